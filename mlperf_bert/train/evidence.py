"""What a finished run leaves so that an audit can re-execute part of it, and the audit's re-execution of its last
eval: the final weights, and the last eval's batches evaluated again on them.

    entry = save_final_weights(trainer, weights_path(log), folder)    # result_bert_<seed>.final.safetensors
    reeval(record_path, indices, devices, rel_eps) -> [(i, EvalBatch, near ties)]  # the audit's side (own process)
    eval_worker(request, emit)                                        # `python -m mlperf_bert reexecute-eval REQUEST.json`

The weights are the model's tensors only (no optimizer state), named as the model's state_dict, in safetensors
(no pickle), written atomically; bfloat16 is stored as float32 (exact) and cast back on load. The last eval's
per-batch counts are the train record's `last_eval` (train/evaluation.py, which computes the metric for both sides).

`python -m mlperf_bert reexecute-eval REQUEST.json` (cli/audit.py; audit/reexec.py starts it) is the audit's re-execution:
it reads the request (the train record, the batches to evaluate, the devices, the tree's eval set), exports the run's
tinygrad settings before importing tinygrad (as the train job does) but its own kernel search settings
(`audit_settings`: BEAM 0, whatever the record says: a search of every kernel takes minutes to hours where the run's
GPU box took seconds) and prints one JSON line of the batches' counts.
"""
from __future__ import annotations
import os
from pathlib import Path
from typing import Any, Callable, Iterator, MutableMapping

import numpy as np

from mlperf_bert.errors import UserError
from mlperf_bert.train.environment import export_tinygrad_env
from mlperf_bert.train.evaluation import EvalBatch, eval_inputs
from mlperf_bert.train.settings import Settings

WEIGHTS_SUFFIX = ".final.safetensors"
# the re-execution's own kernel search settings, whatever the record says (BEAM 0: tinygrad's default kernels)
SEARCH_OFF = {"BEAM": 0, "TRAIN_BEAM": 0, "EVAL_BEAM": 0}
WEIGHTS_FORMAT = "mlperf-bert-final-weights-1"


def weights_path(log_path: str | os.PathLike) -> Path:
  """result_bert_0.log -> result_bert_0.final.safetensors (beside the log)."""
  p = Path(log_path)
  return p.with_name((p.name[:-len(".log")] if p.name.endswith(".log") else p.name) + WEIGHTS_SUFFIX)


# ------------------------------------------------------------------------------------------------ the weights
def save_final_weights(trainer, path: str | os.PathLike, folder: Path) -> dict[str, Any]:
  """The model's weights to `path` (safetensors, atomically); returns the train record's entry (path relative to
  `folder`, bytes, sha256)."""
  from tinygrad import dtypes
  from mlperf_bert.fileio import file_digest, save_safetensors
  arrays = {}
  for k, t in trainer.model.state_dict().items():
    if isinstance(t.device, tuple): t = t.to(t.device[0])
    if t.dtype == dtypes.bfloat16: t = t.float()
    arrays[k] = np.ascontiguousarray(t.numpy())
  save_safetensors(arrays, path, {"format": WEIGHTS_FORMAT})
  return {"path": os.path.relpath(os.path.abspath(path), os.path.abspath(folder)), "bytes": os.path.getsize(path),
          "sha256": file_digest(path, "sha256")}


def load_final_weights(trainer, path: str | os.PathLike, prefix: str = "") -> None:
  """The weights of save_final_weights into the trainer's model (UserError when they do not fit it); prefix "model/":
  the model part of a kept training state (train/states.py), its other tensors left out."""
  from safetensors import SafetensorError, safe_open
  from tinygrad import Tensor
  targets = trainer.model.state_dict()
  try:
    with safe_open(str(path), framework="numpy") as f:
      names = {k[len(prefix):]: k for k in f.keys() if k.startswith(prefix)}
      if set(names) != set(targets):
        raise UserError(f"{path}: its tensors are not the model's ({len(set(names) ^ set(targets))} names differ); "
                        "retrain (snakemake --forcerun train)")
      for k, t in targets.items():
        arr = f.get_tensor(names[k])
        if tuple(arr.shape) != tuple(t.shape):
          raise UserError(f"{path}: {k} has shape {arr.shape}, the model's is {t.shape}; retrain (snakemake "
                          "--forcerun train)")
        t.assign(Tensor(np.ascontiguousarray(arr)).cast(t.dtype).to(t.device)).realize()
  except (SafetensorError, OSError) as e:
    raise UserError(f"{path}: not readable as safetensors ({e}); retrain (snakemake --forcerun train)") from None


# ------------------------------------------------------------------------------------------------ the audit's side
def open_devices(kind: str, n: int) -> tuple[str, ...]:
  """`n` devices of `kind` when this machine has them, else `n` CPU devices (tinygrad makes CPU:0..n-1 on any
  machine), else one CPU device: the audit's fallback, a GPU run re-executed on a CPU in the band. tinygrad's default
  device becomes the kind opened: the run's DEV, exported before tinygrad's import, would otherwise hold every tensor
  made without a device (`NV:0 does not exist` on a CPU-only auditor)."""
  from tinygrad import Device
  from tinygrad.helpers import DEV
  from mlperf_bert.machine import device_kind
  from mlperf_bert.train.trainer import devices_for
  for k, count in ((kind, n), ("CPU", n), ("CPU", 1)):
    try:
      devs = devices_for(k, count)
      for d in devs: Device[d]
    except Exception:  # noqa: BLE001 - any failure to open them: the next choice
      continue
    if device_kind(DEV.device) != device_kind(devs[0]):
      DEV.value = os.environ["DEV"] = device_kind(devs[0])  # the environment too: for any process tinygrad starts
    return devs
  raise UserError("tinygrad opens no CPU device on this machine; check the tinygrad install (clang)")


def near_ties(logits: np.ndarray, batch: dict[str, np.ndarray], row_mask: np.ndarray, rel_eps: float
              ) -> list[float]:
  """The predictions of a batch whose correctness another device could flip: the label's logit and the largest
  other logit differ by at most `rel_eps` times the largest |logit| of the prediction (a device change moves each
  logit by less than that: docs/audit.md, "the device band"). Returns [their masked-LM weight (as `correct` counts
  them), their number among labels that are not 0 (as tinygrad's batch accuracy counts them), that accuracy's
  denominator]."""
  ids = batch["masked_lm_ids"].astype(np.int64)
  lab = np.take_along_axis(logits, ids[..., None], -1)[..., 0]
  others = logits.copy()
  np.put_along_axis(others, ids[..., None], -np.inf, -1)
  near = np.abs(lab - others.max(-1)) <= rel_eps * np.abs(logits).max(-1)
  w = batch["masked_lm_weights"].astype(np.float64) * row_mask.reshape(-1, 1)
  valid = ids != 0
  return [float((w * near).sum()), float((near & valid).sum()), float(valid.sum())]


def audit_settings(settings: dict) -> Settings:
  """The settings a re-execution runs with: the run's (its record's settings), its kernel search off (SEARCH_OFF)."""
  return Settings.from_dict(dict(settings)).replace(**SEARCH_OFF)


def export_audit_env(s: Settings, environ: MutableMapping[str, str]) -> list[str]:
  """What a re-execution process (reexecute-eval, reexecute-segment) exports before importing tinygrad: the run's
  tinygrad settings (audit_settings), the kernel search off (environment.SEARCH_OFF_ENV)."""
  return export_tinygrad_env(s, environ, setter="the run's record", search_off=True)


def reeval(record_file: str | os.PathLike, indices: list[int], devices: tuple[str, ...],
           eval_set: str | os.PathLike | None = None, rel_eps: float | None = None,
           state: str | os.PathLike | None = None, step: int | None = None
           ) -> Iterator[tuple[int, EvalBatch, list[float] | None]]:
  """Evaluate the batches `indices` (in that order) of a train record's last eval on its final weights with the
  trainer's own eval step, on `eval_set` (the audited tree's own; default: the file the record names), and with
  `rel_eps` count each batch's near ties (near_ties; None: not counted). `state` (a kept training state) and its
  `step`: the eval logged at that step instead, on the model part of that state (its window: the evals before it, as
  train/evaluation.py eval_at draws it). Call in a process that exported export_audit_env before importing tinygrad."""
  from mlperf_bert.data.shards import Shard
  from mlperf_bert.train.record import read_record
  from mlperf_bert.train.trainer import ModelTrainer, model_config
  rp = Path(record_file)
  rec = read_record(rp)
  s = audit_settings(rec["settings"])
  cfg = model_config(rp.parent / rec["bert_config"]["path"], s.model)
  trainer = ModelTrainer(cfg, s, devices, seed=s.seed)
  if state is None: load_final_weights(trainer, rp.parent / rec["final_weights"]["path"])
  else: load_final_weights(trainer, state, prefix="model/")
  shard = Shard(eval_set if eval_set is not None else rp.parent / rec["eval_set"]["path"])
  done = int(rec["last_eval"]["evals_done"]) if step is None else (int(step) - 1) // s.eval.step_freq
  try:
    want = set(indices)
    inputs = {i: bm for i, bm in enumerate(eval_inputs(shard, s.eval, done))
              if i in want}  # one pass over the eval's batches; the sample's only are kept
    for i in indices:
      c, t, a = trainer.evaluate(*inputs[i])
      ties = None if rel_eps is None else near_ties(trainer.mlm_logits(inputs[i][0]), *inputs[i], rel_eps)
      yield i, EvalBatch(c.item(), t.item(), a.item()), ties
  finally:
    shard.close()


def eval_worker(req: dict[str, Any], emit: Callable[[dict], None]) -> int:
  """The audit's eval worker (`python -m mlperf_bert reexecute-eval REQUEST.json`). REQUEST {"record", "indices",
  "device", "devices", "eval_set", "rel_eps", "searched"; for an earlier eval, "state" and "step": reeval's}: emits one
  line with the devices used, then one per batch as it is evaluated ({"index", "batch": [correct, total, accuracy], "near": near_ties or None}); a UserError, KeyError,
  TypeError or ValueError is the CLI's {"error"} line and exit 1. Near ties are counted (with rel_eps) where the counts
  may differ from the run's: on other devices than the run's, or when the run searched its eval kernels ("searched")."""
  from mlperf_bert.machine import device_kind
  from mlperf_bert.train.record import read_record
  export_audit_env(audit_settings(read_record(req["record"])["settings"]), os.environ)  # before tinygrad's import
  devices = open_devices(req["device"], int(req["devices"]))
  emit({"device": device_kind(devices[0]), "devices": len(devices)})
  same = (device_kind(devices[0]), len(devices)) == (device_kind(req["device"]), int(req["devices"]))
  rel_eps = None if same and not req.get("searched") else req.get("rel_eps")  # else the counts must be equal
  for i, b, ties in reeval(req["record"], [int(i) for i in req["indices"]], devices, req.get("eval_set"),
                           None if rel_eps is None else float(rel_eps), req.get("state"), req.get("step")):
    emit({"index": i, "batch": b.as_list(), "near": ties})
  return 0

"""What a finished run leaves so that an audit can re-execute part of it: the final weights and the per-batch counts
of its last eval.

    batches = run_eval(trainer, eval_shard, s.eval, evals_done)       # [EvalBatch(correct, total, accuracy), ...]
    acc = eval_accuracy(batches, s.eval.metric)                        # the number the log's eval_accuracy says
    entry = save_final_weights(trainer, weights_path(log), meta)      # result_bert_<seed>.final.safetensors
    reeval(record_path, indices, devices, rel_eps) -> [(i, EvalBatch, near ties)]  # the audit's side (own process)

The eval runs each batch through the trainer's own jitted eval step (ModelTrainer.evaluate) and keeps, per batch,
the three numbers it returns: correct and total (masked-LM weights; EVAL_METRIC pooled sums them) and tinygrad's
per-batch accuracy (EVAL_METRIC tinygrad averages them). `eval_accuracy` is the only place either metric is
computed from them, so the train run and the audit cannot disagree about the formula. Reading the counts changes
nothing the run computes (.item() of values the step realized anyway).

The weights are the model's tensors only (no optimizer state), named as the model's state_dict, in safetensors
(no pickle), written atomically; bfloat16 is stored as float32 (exact) and cast back on load.

`python -m mlperf_bert.train.evidence REQUEST.json` is the audit's re-execution: it reads the request (the train
record, the batches to evaluate, the devices, the tree's eval set), exports the run's tinygrad settings before importing
tinygrad (as the train job does) but its own kernel search settings (`audit_settings`: BEAM 0, whatever the record
says: a search of every kernel takes minutes to hours where the run's GPU box took seconds) and prints one JSON line
of the batches' counts.
"""
from __future__ import annotations
import dataclasses, json, os, sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from mlperf_bert.errors import UserError

WEIGHTS_SUFFIX = ".final.safetensors"
# the re-execution's own kernel search settings, whatever the record says (BEAM 0: tinygrad's default kernels)
SEARCH_OFF = {"BEAM": 0, "TRAIN_BEAM": 0, "EVAL_BEAM": 0}
SEARCH_OFF_ENV = {"BEAM": "0", "JITBEAM": "0"}  # JITBEAM: tinygrad's jit reads it before BEAM
WEIGHTS_FORMAT = "mlperf-bert-final-weights-1"


@dataclasses.dataclass(frozen=True)
class EvalBatch:
  correct: float
  total: float
  accuracy: float

  def as_list(self) -> list[float]:
    return [self.correct, self.total, self.accuracy]


def weights_path(log_path: str | os.PathLike) -> Path:
  """result_bert_0.log -> result_bert_0.final.safetensors (beside the log)."""
  p = Path(log_path)
  return p.with_name((p.name[:-len(".log")] if p.name.endswith(".log") else p.name) + WEIGHTS_SUFFIX)


# ------------------------------------------------------------------------------------------------ the eval
def eval_inputs(shard, e, evals_done: int) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
  """(batch, row mask) of the eval after `evals_done` earlier evals, in order: tinygrad's wrapping window of
  MAX_EVAL_STEPS batches (EVAL_METRIC tinygrad) or the first EVAL_SAMPLES rows (pooled). `e`: EvalSettings."""
  from mlperf_bert.data.loader import eval_batches, eval_window
  if e.metric == "tinygrad":
    n, bs = e.max_steps, e.batch_size
    ones = np.ones(bs, np.float32)
    return ((b, ones) for b in eval_window(shard, bs, n, (evals_done * n * bs) % len(shard)))
  return eval_batches(shard, e.batch_size, e.samples)


def run_eval(trainer, shard, e, evals_done: int, only: set[int] | None = None) -> list[tuple[int, EvalBatch]]:
  """Each batch of the eval (or of `only` these indices) through trainer.evaluate: [(index, EvalBatch)]."""
  out = []
  for i, (b, mask) in enumerate(eval_inputs(shard, e, evals_done)):
    if only is not None and i not in only: continue
    c, t, a = trainer.evaluate(b, mask)
    out.append((i, EvalBatch(c.item(), t.item(), a.item())))
  return out


def eval_accuracy(batches: list[EvalBatch], metric: str) -> float:
  """The eval's accuracy from its batches, as the log states it: the mean of tinygrad's per-batch accuracies, or
  correct / total summed over the batches (pooled)."""
  if metric == "tinygrad":
    accs = [b.accuracy for b in batches]
    return sum(accs) / len(accs)
  correct = total = 0.0
  for b in batches: correct, total = correct + b.correct, total + b.total
  return correct / total if total else 0.0


# ------------------------------------------------------------------------------------------------ the weights
def save_final_weights(trainer, path: str | os.PathLike, folder: Path) -> dict[str, Any]:
  """The model's weights to `path` (safetensors, atomically); returns the train record's entry (path relative to
  `folder`, bytes, sha256)."""
  from safetensors.numpy import save_file
  from tinygrad import dtypes
  from mlperf_bert.fileio import atomic_path, file_digest
  arrays = {}
  for k, t in trainer.model.state_dict().items():
    if isinstance(t.device, tuple): t = t.to(t.device[0])
    if t.dtype == dtypes.bfloat16: t = t.float()
    arrays[k] = np.ascontiguousarray(t.numpy())
  with atomic_path(path) as tmp:
    mode = tmp.stat().st_mode & 0o777
    save_file(arrays, str(tmp), metadata={"format": WEIGHTS_FORMAT})
    os.chmod(tmp, mode)  # safetensors writes a file of its own (0600); keep the target's usual permissions
  return {"path": os.path.relpath(os.path.abspath(path), os.path.abspath(folder)), "bytes": os.path.getsize(path),
          "sha256": file_digest(path, "sha256")}


def load_final_weights(trainer, path: str | os.PathLike) -> None:
  """The weights of save_final_weights into the trainer's model (UserError when they do not fit it)."""
  from safetensors import SafetensorError, safe_open
  from tinygrad import Tensor
  targets = trainer.model.state_dict()
  try:
    with safe_open(str(path), framework="numpy") as f:
      if set(f.keys()) != set(targets):
        raise UserError(f"{path}: its tensors are not the model's ({len(set(f.keys()) ^ set(targets))} names differ); "
                        "retrain (snakemake --forcerun train)")
      for k, t in targets.items():
        arr = f.get_tensor(k)
        if tuple(arr.shape) != tuple(t.shape):
          raise UserError(f"{path}: {k} has shape {arr.shape}, the model's is {t.shape}; retrain (snakemake "
                          "--forcerun train)")
        t.assign(Tensor(np.ascontiguousarray(arr)).cast(t.dtype).to(t.device)).realize()
  except (SafetensorError, OSError) as e:
    raise UserError(f"{path}: not readable as safetensors ({e}); retrain (snakemake --forcerun train)") from None


def eval_entry(batches: list[tuple[int, EvalBatch]], *, step: int, evals_done: int, settings, devices) -> dict:
  """The train record's `last_eval`: what the audit needs to re-execute any of its batches."""
  return {"step": step, "evals_done": evals_done, "metric": settings.eval.metric,
          "batch_size": settings.eval.batch_size, "device": devices[0].split(":")[0], "devices": len(devices),
          "float_type": settings.float_type, "batches": [b.as_list() for _, b in batches]}


# ------------------------------------------------------------------------------------------------ the audit's side
def open_devices(kind: str, n: int) -> tuple[str, ...]:
  """`n` devices of `kind` when this machine has them, else one CPU device (the audit's fallback)."""
  from tinygrad import Device
  from mlperf_bert.train.trainer import devices_for
  try:
    devs = devices_for(kind, n)
    for d in devs: Device[d]
    return devs
  except Exception:  # noqa: BLE001 - any failure to open the recorded devices: evaluate on the CPU
    return devices_for("CPU", 1)


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


def audit_settings(hparams: dict):
  """The settings a re-execution runs with: the run's (its record's hparams), its kernel search off (SEARCH_OFF)."""
  from mlperf_bert.train.settings import Settings
  return Settings.from_dict(dict(hparams)).replace(**SEARCH_OFF)


def audit_env(s) -> dict[str, str]:
  """What the re-execution process exports before importing tinygrad: the run's tinygrad settings, the search off."""
  from mlperf_bert.train.hparams import tinygrad_env
  return {**tinygrad_env(s), **SEARCH_OFF_ENV}


def reeval(record_file: str | os.PathLike, indices: list[int], devices: tuple[str, ...],
           eval_set: str | os.PathLike | None = None, rel_eps: float | None = None
           ) -> Iterator[tuple[int, EvalBatch, list[float] | None]]:
  """Evaluate the batches `indices` (in that order) of a train record's last eval on its final weights with the
  trainer's own eval step, on `eval_set` (the audited tree's own; default: the file the record names), and with
  `rel_eps` count each batch's near ties (near_ties; None: not counted). Call in a process that exported audit_env
  before importing tinygrad."""
  from mlperf_bert.data.shards import Shard
  from mlperf_bert.train.record import read_record
  from mlperf_bert.train.trainer import ModelTrainer, model_config
  rp = Path(record_file)
  rec = read_record(rp)
  s = audit_settings(rec["hparams"])
  cfg = model_config(rp.parent / rec["bert_config"]["path"], s.model)
  trainer = ModelTrainer(cfg, s, devices, seed=s.seed)
  load_final_weights(trainer, rp.parent / rec["final_weights"]["path"])
  shard = Shard(eval_set if eval_set is not None else rp.parent / rec["eval_set"]["path"])
  try:
    want = set(indices)
    inputs = {i: bm for i, bm in enumerate(eval_inputs(shard, s.eval, int(rec["last_eval"]["evals_done"])))
              if i in want}  # one pass over the eval's batches; the sample's only are kept
    for i in indices:
      c, t, a = trainer.evaluate(*inputs[i])
      ties = None if rel_eps is None else near_ties(trainer.mlm_logits(inputs[i][0]), *inputs[i], rel_eps)
      yield i, EvalBatch(c.item(), t.item(), a.item()), ties
  finally:
    shard.close()


def main(argv: list[str]) -> int:
  """REQUEST.json {"record", "indices", "device", "devices", "eval_set", "rel_eps", "searched"}: prints one JSON line
  with the devices used, then one per batch as it is evaluated ({"index", "batch": [correct, total, accuracy],
  "near": near_ties or None}), or {"error"} and exits 1. Near ties are counted (with rel_eps) where the counts may
  differ from the run's: on other devices than the run's, or when the run searched its eval kernels ("searched")."""
  req = json.loads(Path(argv[0]).read_text())
  from mlperf_bert.train.record import read_record
  try:
    os.environ.update(audit_env(audit_settings(read_record(req["record"])["hparams"])))  # before tinygrad's import
    devices = open_devices(req["device"], int(req["devices"]))
    print(json.dumps({"device": devices[0].split(":")[0], "devices": len(devices)}), flush=True)
    same = (devices[0].split(":")[0], len(devices)) == (req["device"], int(req["devices"]))
    rel_eps = None if same and not req.get("searched") else req.get("rel_eps")  # else the counts must be equal
    for i, b, ties in reeval(req["record"], [int(i) for i in req["indices"]], devices, req.get("eval_set"),
                             None if rel_eps is None else float(rel_eps)):
      print(json.dumps({"index": i, "batch": b.as_list(), "near": ties}), flush=True)
  except (UserError, KeyError, TypeError, ValueError) as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}" if not isinstance(e, UserError) else str(e)}), flush=True)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))

"""The audit's re-execution of a training segment: from a kept state (or the run's initial state) to the next kept
state, with the trainer's own code, in a process of its own (audit/segments.py starts it).

    python -m mlperf_bert reexecute-segment REQUEST.json      # cli/audit.py; segment_worker(request, emit) here

REQUEST: {"record": the train record, "from": a step (0: the initial state: the seeded init or the converted
checkpoint, as TrainRun._build makes it), "to": the step of a later kept state, "device", "devices"}. The process
exports the run's tinygrad settings before it imports tinygrad (as the train job), builds the trainer of the
record's settings, loads the `from` state (weights, LAMB state, schedule step, RNG counters), starts the training
stream at its loader position, runs `to - from` train steps with the run's timed step (train/step.py) and
compares the state it reaches with the kept state of `to`, tensor by tensor (on another device kind, with the run's
device count: the RNG counters restored and compared on the same devices of this kind). It prints JSON lines:

    {"device": "CPU", "devices": 1, "machine": {...}}                the devices it trains on, this machine
                                                                     (and nothing more when their count is not the
                                                                     run's: tinygrad draws dropout per device)
    {"step": 21, "wall_s": 0.41, "cpu_s": 0.66, "loss": 7.1}        one per step, as it is done
    {"compare": {"tensors": N, "differ": n, "worst": {...}, "weights_rel_l2": d, "moments_rel_l2": {...},
                 "exact": [...], "nonfinite": [...], "position": p, "want_position": q}}   compare_states
or {"error": "..."} and exits 1. `cpu_s` is the process's CPU time (every thread) spent in the step.
"""
from __future__ import annotations
import os, time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mlperf_bert.errors import UserError


def tensor_group(name: str, a: np.ndarray) -> str:
  """How a state's tensor is compared on another device kind: 'weights' (model/), 'm' and 'v' (the LAMB moments),
  'scalars' (b1_t, b2_t, lr: float scalars of the schedule), 'exact' (the schedule step, the RNG counters, every
  integer tensor: counts, equal on any device)."""
  if name.startswith("rng/") or name.endswith("schedule.step") or not np.issubdtype(a.dtype, np.floating): return "exact"
  if name.startswith("model/"): return "weights"
  part = name.rsplit(".", 2)
  return part[-2] if len(part) == 3 and part[-2] in ("m", "v") and part[-1].isdigit() else "scalars"


def compare_states(got: dict[str, np.ndarray], want: dict[str, np.ndarray], rng_kind: str | None = None,
                   rng: bool = True) -> dict[str, Any]:
  """How the state re-executed differs from the kept one, every tensor of it: how many differ, the worst of them
  (the largest difference relative to the largest magnitude of the kept tensor), the worst of the model's weights
  alone, the distance of each float group (tensor_group: the weights, each LAMB moment, |got - kept| / |kept| in L2
  over the group; the schedule's scalars, the largest relative difference), the tensors that must be equal on any
  device that are not (`exact`: the schedule step, the RNG counters) and the tensors holding a NaN or Inf on either
  side. `rng_kind`: the kept state's RNG counters are of the run's devices, the re-execution's of that kind (on_kind);
  `rng` False: the RNG counters are not compared (another device count draws others)."""
  from mlperf_bert.train.resume import on_kind
  want = {(f"rng/{on_kind(k[4:], rng_kind)}" if k.startswith("rng/") else k): v for k, v in want.items()
          if rng or not k.startswith("rng/")}
  keys = sorted(want)
  missing = [k for k in keys if k not in got]
  differ, worst, model = 0, None, None
  sums: dict[str, list[float]] = {}        # group -> [sum of squared differences, sum of squares]
  scalars, exact, nonfinite = 0.0, [], []
  for k in keys:
    if k in missing: continue
    a, b = np.asarray(got[k]), np.asarray(want[k])
    group = tensor_group(k, b)
    if a.shape != b.shape:
      differ += 1
      worst = {"name": k, "shape": [list(a.shape), list(b.shape)], "rel": float("inf")}
      exact.append(k)
      continue
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()): nonfinite.append(k)
    if np.array_equal(a, b): continue
    differ += 1
    diff = float(np.max(np.abs(a64 - b64)))
    ref = float(np.max(np.abs(b64))) or 1.0
    one = {"name": k, "max_abs": diff, "ref_max_abs": ref, "rel": diff / ref if np.isfinite(diff) else float("inf")}
    if worst is None or one["rel"] > worst["rel"]: worst = one
    if k.startswith("model/") and (model is None or one["rel"] > model["rel"]): model = one
    if group == "exact": exact.append(k)
    elif group == "scalars": scalars = max(scalars, one["rel"])
    else:
      acc = sums.setdefault(group, [0.0, 0.0])
      acc[0] += float(np.sum((a64 - b64) ** 2))
  for k in keys:  # each group's size, the differences' denominator
    if k not in missing and (g := tensor_group(k, want[k])) in sums:
      sums[g][1] += float(np.sum(np.asarray(want[k], np.float64) ** 2))
  rel = {g: ((d / w) ** 0.5 if w else (0.0 if d == 0 else float("inf"))) for g, (d, w) in sums.items()}
  if nonfinite: rel = {g: float("inf") for g in rel}
  return {"tensors": len(keys), "differ": differ, "missing": missing[:3], "n_missing": len(missing), "worst": worst,
          "worst_weight": model, "weights_rel_l2": rel.get("weights", 0.0), "moments_rel_l2":
          {g: rel.get(g, 0.0) for g in ("m", "v")}, "scalars_rel": scalars, "exact": exact[:3], "n_exact": len(exact),
          "nonfinite": nonfinite[:3], "n_nonfinite": len(nonfinite)}


def read_state(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
  from safetensors import SafetensorError, safe_open
  try:
    with safe_open(str(path), framework="numpy") as f:
      return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
  except (SafetensorError, OSError) as e:
    raise UserError(f"{path}: not a readable training state ({e}); retrain (snakemake --forcerun train)") from None


def run_segment(record_file: str | os.PathLike, start: int, end: int, devices: tuple[str, ...],
                emit: Callable[[dict], None]) -> None:
  """Train from the kept state of step `start` (0: the initial state) to `end` and compare with the kept state of
  `end` (see the module doc); `emit` gets each JSON line. Call in a process that exported evidence.export_audit_env."""
  from tinygrad import Tensor
  from tinygrad.helpers import Context
  from mlperf_bert.data.loader import TrainLoader, open_shards
  from mlperf_bert.train.step import timed_step
  from mlperf_bert.train.record import read_record
  from mlperf_bert.train.resume import load_state, state_arrays
  from mlperf_bert.train.evidence import audit_settings
  from mlperf_bert.train.trainer import ModelTrainer, model_config
  from mlperf_bert.machine import device_kind
  rp = Path(record_file)
  rec = read_record(rp)
  s = audit_settings(rec["settings"])  # the run's settings, the kernel search off
  kept = rec["kept_states"]
  folder = rp.parent / str(kept["path"])
  by_step = {int(e["step"]): e for e in kept["states"]}
  if end not in by_step or (start and start not in by_step) or not 0 <= start < end:
    raise UserError(f"{rp}: no kept states of steps {start} and {end} to train between")
  cfg = model_config(rp.parent / rec["bert_config"]["path"], s.model)
  init = rec.get("init_weights")
  Tensor.manual_seed(s.seed)  # as TrainRun._build
  trainer = ModelTrainer(cfg, s, devices, seed=s.seed,
                         init_weights=rp.parent / init["path"] if init and start == 0 else None)
  position = 0
  # another device kind (the run's count): the RNG counters continue on the same devices of this kind
  kind = device_kind(devices[0])
  rng_kind = None if kind == device_kind(rec["settings"].get("DEV")) else kind
  if start:
    load_state(trainer, folder / by_step[start]["file"], rng_kind=rng_kind)
    position = int(by_step[start]["position"])
  shards = open_shards([rp.parent / e["path"] for e in rec["shards"]])
  loader = TrainLoader(shards, s.batch_size, seed=s.seed, position=position, cycle_length=s.num_cpu_threads)
  try:
    with Context(**({"PARALLEL": s.tinygrad.parallel} if s.tinygrad.parallel is not None else {})):
      batch_end, data = next(loader)  # the first batch, and the stream's position just after it
      for step in range(start + 1, end + 1):
        c0 = time.process_time()
        t, (next_end, data) = timed_step(trainer, data, loader, step - 1, devices, lambda _m: None)
        position, batch_end = batch_end, next_end  # the stream after this step's batch, and after the one fetched
        emit({"step": step, "wall_s": t.total_s, "cpu_s": time.process_time() - c0, "loss": t.loss})
        if not np.isfinite(t.loss): raise UserError(f"the loss became {t.loss} at step {step}")
  finally:
    loader.close()
    for sh in shards: sh.close()
  want, meta = read_state(folder / by_step[end]["file"])
  out = compare_states(state_arrays(trainer), want, rng_kind=rng_kind)
  out.update(position=position, want_position=int(by_step[end]["position"]), meta_step=meta.get("step"))
  emit({"compare": out})


def segment_worker(req: dict[str, Any], emit: Callable[[dict], None]) -> int:
  """The audit's segment worker (`python -m mlperf_bert reexecute-segment REQUEST.json`; see the module doc): the lines
  go to `emit`; a UserError, KeyError, TypeError or ValueError is the CLI's {"error"} line and exit 1."""
  from mlperf_bert.machine import this_machine
  from mlperf_bert.train.evidence import audit_settings, export_audit_env, open_devices
  from mlperf_bert.train.record import read_record
  # before tinygrad is imported, as the train job: the run's tinygrad settings, the kernel search off (BEAM 0)
  export_audit_env(audit_settings(read_record(req["record"])["settings"]), os.environ)
  devices = open_devices(req["device"], int(req["devices"]))
  emit({"device": devices[0].split(":")[0], "devices": len(devices), "machine": this_machine()})
  if len(devices) != int(req["devices"]): return 0  # another device count trains another trajectory: not redone
  run_segment(req["record"], int(req["from"]), int(req["to"]), devices, emit)
  return 0

"""Evidence of the steps and of the time: the audit re-executes a random sample of a run's training segments and
checks each segment's logged time against what its machine can physically do.

The train process keeps the training state after its evals (train/states.py: `result_bert_<seed>.states/`, each
state's step, loader position, size and sha256 in the train record). Without re-executing anything the audit checks
that each kept state is the file the train process wrote (its size first; then its sha256, and every float tensor
finite, read within the budget), that the kept steps are those EVIDENCE_STATE_FREQ keeps of the log's evals (every
N-th and the last; the frequency the config and platform file give: audit/claims.py), and that the final weights are
the last state's. Then segments drawn at random
(from the run's initial state, the seeded init or the initial weights, to the first kept state, or from one
kept state to the next) are trained again with the trainer's own code (train/segment.py, a process of its own), and
the state reached is compared with the kept one:
  - on the run's device kind and count: bit-exact (every weight, the LAMB state, the schedule step, the RNG counters
    and the loader position), on one device or several;
  - another device kind, the same count, or a run that searched its train kernels (BEAM > 0; the re-execution runs
    tinygrad's default kernels, BEAM 0, as the eval's does): every tensor still, the weights and each LAMB moment
    within SEGMENT_BAND (L2 distance relative to their size), the schedule step and the RNG counters equal (restored
    on the same devices of this kind); a GPU record's segment that is bit-exact on the CPU proves its device false;
  - another device count: not redone (tinygrad draws dropout per device: another count trains another trajectory).
A state "at step k" that is not what k - j steps from the state at step j give (an eval dropped and the next one
relabelled, fewer steps claimed) then FAILs.

Time. Each segment's logged time (run_start, or the eval_stop of its first step, to the eval_start of its last) must
be at least its floor:
  - the roofline: its steps' matmul FLOPs (train/dress/report.py step_flops) at the published peak of the GPU card
    the platform names (DRESS_TARGET, recorded in the train record), on every machine;
  - on GPU devices of a platform audit/claims.py confirmed: its steps at the low edge of the band the cost model
    predicts for the platform at its BS (resources/predicted/steps.json); no prediction: the roofline alone;
  - on CPU devices: the steps' CPU seconds over the run machine's cores (a machine cannot give its processes more
    CPU seconds a second than it has cores, whatever else runs on it; runs of one tree logged at the same time on
    one host share them, so every window of their logged times must hold all the segments inside it). The CPU
    seconds are those the train process recorded for the steps before each kept state; when this machine is of the
    run's kind (the same CPU model, flags and cores: the train record names its machine), the steps re-executed
    here give the least a step takes, and a record claiming fewer (over TIME_BAND) FAILs (audit/times.py).
What is not checked is said in the rows: a GPU step time is taken on trust above the predicted band's low edge (above
the roofline where there is no prediction).

    reexecute_segments(audit, base, logs, hasher, seed=..., budget=Budget(...), end=None)
"""
from __future__ import annotations
import dataclasses, json, time
from pathlib import Path
from typing import Callable

import numpy as np

from mlperf_bert.audit.bounded import Budget
from mlperf_bert.audit.reexec import NOT_REEXECUTABLE, catch_chance, draw_order, run_worker, \
  train_search
from mlperf_bert.audit.rows import REEXECUTION, RETRAIN, Audit
from mlperf_bert.errors import UserError
from mlperf_bert.machine import device_kind, same_kind, this_machine

SEGMENT_BAND = 1e-3   # another device kind: |x - kept| / |kept| of the weights and of each LAMB moment (measured: docs/audit.md)
WARMUP_STEPS = 2      # a process's first steps compile and capture the jitted step: not timed
TRUST = "steps and time taken on trust"
FREQ_KEY = "EVIDENCE_STATE_FREQ"
FALSE_DEVICE = "the record's device is false"


@dataclasses.dataclass
class Segment:
  log: Path
  rel: str                             # the log, relative to the basedir
  record: Path
  start: int                           # 0: the run's initial state
  end: int
  claimed: tuple[float, float] | None  # the log's times (ms) of its first and last step
  machine: dict
  settings: dict                       # the run's settings, as its train record holds them
  cpu_recorded: float | None = None    # CPU seconds a step, as the train process measured them (its record)
  cpu_step: float | None = None        # the least CPU seconds a step took, re-executed here
  platform: str | None = None          # the GPU platform audit/claims.py confirmed (its predicted band: audit/times.py)

  @property
  def steps(self) -> int: return self.end - self.start

  @property
  def shape(self) -> str:
    """What a step costs depends on: the settings but the seed."""
    return json.dumps({k: v for k, v in self.settings.items() if k != "SEED"}, sort_keys=True, default=str)


# ------------------------------------------------------------------------------------------------ the plan
def logged_times(log: Path) -> tuple[float | None, dict[int, tuple[float, float]]]:
  """(run_start ms, {step: (eval_start ms, eval_stop ms)}) of a result log (its evals' step_num metadata)."""
  from mlperf_bert.audit.logs import read_log
  lg = read_log(log)
  evals: dict[int, list[float]] = {}
  for e in lg.events:
    step = e.metadata.get("step_num") if isinstance(e.metadata, dict) else None
    if e.key in ("eval_start", "eval_stop") and isinstance(step, int):
      evals.setdefault(step, [float("nan"), float("nan")])[e.key == "eval_stop"] = float(e.time_ms)
  return lg.run_start_ms, {k: (v[0], v[1]) for k, v in evals.items()}


def kept_wanted(eval_steps: list[int], every: int) -> list[int]:
  """The steps whose state EVIDENCE_STATE_FREQ `every` keeps, of a run whose evals were at `eval_steps`."""
  if every <= 0 or not eval_steps: return []
  return [s for i, s in enumerate(eval_steps) if (i + 1) % every == 0 or i == len(eval_steps) - 1]


def final_is_last_state(weights: Path, state: Path) -> str:
  """'' when the final weights are the model part of the last kept state (each tensor, as float32), else why not."""
  from safetensors import SafetensorError, safe_open
  try:
    with safe_open(str(weights), framework="numpy") as w, safe_open(str(state), framework="numpy") as s:
      names = set(s.keys())
      for k in w.keys():
        if f"model/{k}" not in names: return f"{k} is not in the state"
        if not np.array_equal(w.get_tensor(k).astype(np.float32), s.get_tensor(f"model/{k}").astype(np.float32)):
          return f"{k} differs"
  except (SafetensorError, OSError) as e:
    return f"not readable ({e})"
  return ""


def check_state_files(rel: str, base: Path, rp: Path, folder: Path, states: dict[int, dict],
                      deadline: float | None) -> tuple[str, str] | None:
  """Each kept state is the file the train process wrote: its size first (a file of another size is not read), then
  its sha256 and every float tensor finite, within `deadline`. None, or the (status, reason) of the first that is not."""
  from mlperf_bert.audit.bounded import nonfinite_within, sha256_within
  from mlperf_bert.audit.provenance import size_differs
  for n, (step, e) in enumerate(sorted(states.items())):
    f = folder / str(e.get("file"))
    name = f.relative_to(base).as_posix()
    try:
      if not f.is_file():
        return "FAIL", f"the kept state of step {step} ({name}) is missing or not a regular file; {RETRAIN}"
      if why := size_differs(f, e.get("bytes")):
        return "FAIL", f"{name}: {why} (not hashed): not the state the train process wrote ({rp.name}); {RETRAIN}"
      sha = sha256_within(f, deadline)
      bad = nonfinite_within(f, deadline) if sha == e.get("sha256") else []
    except (OSError, UserError) as err:
      return "FAIL", f"{name}: not readable ({err}); {RETRAIN}"
    if sha is None or bad is None:
      return "WARN", (f"not checked: {n} of the {len(states)} kept states were read within the budget ({name}, "
                      f"{f.stat().st_size} bytes, was not): their files, steps and time taken on trust; give a larger "
                      "--reexecute-budget")
    if sha != e.get("sha256"):
      return "FAIL", f"{name}: sha256 is not the one the train process wrote ({rp.name}); {RETRAIN}"
    if bad:
      return "FAIL", (f"the kept state of step {step} ({name}) holds a NaN or an infinity ({', '.join(bad[:3])}"
                      f"{f' and {len(bad) - 3} more' if len(bad) > 3 else ''}): no training state; {RETRAIN}")
  return None


def plan_log(audit: Audit, base: Path, log: Path, hasher: Callable, confirmed=None,
             deadline: float | None = None) -> list[Segment]:
  """The segments of one log's kept states, after the checks that need no re-execution (rows for what fails).
  `confirmed` (audit/claims.py Confirmed): the state frequency the config gives and the cores of the run's machine
  where the record's were refuted; `deadline`: the kept states are read within it."""
  from mlperf_bert.train.record import read_record, record_path
  rel, rp = str(log.relative_to(base)), record_path(log)
  want_every = getattr(confirmed, "every", None)
  try: rec = read_record(rp)
  except UserError as e:
    audit.add("WARN", REEXECUTION, rel, f"{NOT_REEXECUTABLE}: {e}"); return []
  kept = rec.get("kept_states")
  refuted = f" (the claims row FAILs it: the config gives {FREQ_KEY} {want_every})" if want_every else ""
  if not isinstance(kept, dict) or not isinstance(kept.get("states"), list):
    audit.add("WARN", REEXECUTION, rel, f"{NOT_REEXECUTABLE}: the train record keeps no "
              f"training states (a tree of an older version, or of tinygrad's own trainer): {TRUST}{refuted}; "
              f"{RETRAIN} to keep them"); return []
  every = int(kept.get("every") or 0) if want_every is None else int(want_every)
  if every <= 0 or int(kept.get("every") or 0) <= 0:
    audit.add("WARN", REEXECUTION, rel, f"no training states kept ({FREQ_KEY} "
              f"{kept.get('every')}): {TRUST}{refuted}"); return []
  try:
    states = {int(e["step"]): e for e in kept["states"]}
  except (KeyError, TypeError, ValueError):
    audit.add("FAIL", REEXECUTION, rel, f"{rp.name}: kept_states is not a list of states with steps; {RETRAIN}"); return []
  try:
    folder = rp.parent / str(kept.get("path"))
    inside = folder.resolve().is_relative_to(base.resolve())
  except (OSError, RuntimeError) as e:  # a symlink loop
    audit.add("FAIL", REEXECUTION, rel, f"{rp.name}: its kept states folder {kept.get('path')} cannot be resolved ({e}); "
              f"not read; {RETRAIN}"); return []
  if not inside or any(Path(str(e.get("file"))).name != str(e.get("file")) for e in states.values()):
    audit.add("FAIL", REEXECUTION, rel, f"{rp.name}: its kept states are named outside the tree ({kept.get('path')}); not "
              f"read; {RETRAIN}"); return []
  if found := check_state_files(rel, base, rp, folder, states, deadline):
    audit.add(found[0], REEXECUTION, rel, found[1]); return []
  run_start, evals = logged_times(log)
  want = kept_wanted(sorted(evals), every)
  if sorted(states) != want:
    audit.add("FAIL", REEXECUTION, rel, f"the log's evals at steps {sorted(evals)} keep the states of steps {want} "
              f"({FREQ_KEY} {every}), {rp.name} has {sorted(states)}: an eval or a state was dropped or "
              f"added; {RETRAIN}"); return []
  if not want: return []
  weights = rp.parent / str((rec.get("final_weights") or {}).get("path"))
  why = final_is_last_state(weights, folder / str(states[want[-1]]["file"])) if weights.is_file() else "missing"
  if why:
    audit.add("FAIL", REEXECUTION, rel, f"the final weights {weights.name} are not the kept state of step {want[-1]}, the "
              f"last eval's: {why}; {RETRAIN}"); return []
  machine = dict(rec.get("machine")) if isinstance(rec.get("machine"), dict) else {}
  if getattr(confirmed, "cores", None): machine["cores"] = confirmed.cores  # the record's were refuted (claims row)
  hp = dict(rec.get("settings")) if isinstance(rec.get("settings"), dict) else {}
  hp["DEV"] = device_kind(hp.get("DEV") or "CPU")  # as tinygrad reads it: cpu, CPU:1 -> CPU
  out, prev = [], 0
  for step in want:
    t0 = run_start if prev == 0 else evals[prev][1]
    t1 = evals[step][0]
    ok = t0 is not None and np.isfinite(t0) and np.isfinite(t1)
    e = states[step]
    try: rec_cpu = float(e["cpu_s"]) / int(e["cpu_steps"]) if int(e.get("cpu_steps") or 0) > 0 else None
    except (KeyError, TypeError, ValueError): rec_cpu = None
    out.append(Segment(log, rel, rp, prev, step, (t0, t1) if ok else None, machine, hp,
                       rec_cpu if rec_cpu is not None and np.isfinite(rec_cpu) else None,
                       platform=getattr(confirmed, "platform", None)))
    prev = step
  return out


# ------------------------------------------------------------------------------------------------ re-execution
def redo_segment(seg: Segment, deadline: float | None) -> tuple[dict, list[dict], dict | None, str, bool]:
  """Train the segment again (`python -m mlperf_bert reexecute-segment`: train/segment.py), its process group stopped
  at `deadline`: (devices line, step lines, comparison or None, error, stopped)."""
  lines, tail, stopped = run_worker("reexecute-segment",
                                    {"record": str(seg.record.resolve()), "from": seg.start, "to": seg.end,
                                     "device": device_kind(seg.settings.get("DEV") or "CPU"),
                                     "devices": int(seg.settings.get("GPUS", 1))}, deadline)
  devs = next((l for l in lines if "device" in l), {})
  steps = [l for l in lines if "step" in l]
  cmp = next((l["compare"] for l in lines if "compare" in l), None)
  err = next((l["error"] for l in lines if "error" in l), "")
  if not stopped and not err and cmp is None and (not devs or devs.get("devices") == int(seg.settings.get("GPUS", 1))):
    err = tail or "the process printed no comparison"
  return devs, steps, cmp, err, stopped


def judge(seg: Segment, devs: dict, cmp: dict) -> tuple[str, str]:
  """(status, what was seen) of a re-executed segment's comparison: every tensor of the state (train/segment.py
  compare_states), bit-exact on the run's device kind, else the float groups within SEGMENT_BAND and the counts equal;
  bit-exact on the CPU while the record names another device kind proves the record's device false."""
  run_kind, here_kind = device_kind(seg.settings.get("DEV") or "CPU"), device_kind(devs.get("device"))
  beam = train_search(seg.settings)  # the re-execution runs tinygrad's default kernels (BEAM 0): other sums' order
  exact = here_kind == run_kind and not beam
  if cmp["position"] != cmp["want_position"]:
    return "FAIL", (f"the training stream after step {seg.end} is at sample {cmp['position']}, the kept state says "
                    f"{cmp['want_position']}")
  if cmp.get("n_missing"):
    return "FAIL", f"the kept state of step {seg.end} lacks {cmp['missing']}"
  if cmp.get("n_nonfinite"):
    return "FAIL", f"{cmp['n_nonfinite']} tensor(s) hold a NaN or an infinity ({', '.join(cmp['nonfinite'])})"
  if exact:
    if cmp["differ"] == 0: return "PASS", "bit-exact"
    w = cmp["worst"]
    return "FAIL", (f"{cmp['differ']} of {cmp['tensors']} tensors differ from the kept state of step {seg.end} (the "
                    f"most: {w['name']}, by {w.get('rel', float('inf')):.3g} of its largest value); the weights are "
                    f"{cmp['weights_rel_l2']:.3g} of their size apart")
  if cmp["differ"] == 0 and here_kind != run_kind:
    return "FAIL", (f"bit-exact ({cmp['tensors']} of {cmp['tensors']} tensors) on {here_kind}, while the train record "
                    f"says the run trained on {seg.settings.get('GPUS', 1)} {run_kind} device(s): another device kind's "
                    f"kernels sum in another order and round otherwise, so these steps were trained on {here_kind}: "
                    f"{FALSE_DEVICE}")
  if cmp.get("n_exact"):
    return "FAIL", (f"{cmp['n_exact']} tensor(s) that every device computes alike differ from the kept state of step "
                    f"{seg.end} ({', '.join(cmp['exact'])}: the schedule step, the RNG counters)")
  groups = {"the weights": cmp["weights_rel_l2"], "the LAMB first moments": cmp.get("moments_rel_l2", {}).get("m", 0.0),
            "the LAMB second moments": cmp.get("moments_rel_l2", {}).get("v", 0.0),
            "the schedule's scalars": cmp.get("scalars_rel", 0.0)}
  over = [(g, d) for g, d in groups.items() if not d <= SEGMENT_BAND]
  if not over:
    d = groups
    return "PASS", (f"every tensor within the band: the weights {d['the weights']:.2g}, the LAMB moments "
                    f"{d['the LAMB first moments']:.2g} and {d['the LAMB second moments']:.2g} of their size from the "
                    f"kept state's (band {SEGMENT_BAND:g}), the schedule step and RNG counters equal")
  g, d = over[0]
  return "FAIL", (f"{g} are {d:.3g} of their size away from the kept state of step {seg.end}, more than the "
                  f"{SEGMENT_BAND:g} the rounding of another device kind or of unsearched kernels moves them")


def steady_cpu(steps: list[dict]) -> float | None:
  """The least CPU seconds a step took, of those after the process's first WARMUP_STEPS (the least is the steadiest
  under load: docs/audit.md)."""
  cpu = [float(l["cpu_s"]) for l in steps[WARMUP_STEPS:] if isinstance(l.get("cpu_s"), (int, float))]
  return min(cpu) if cpu else None


def reexecute_segments(audit: Audit, base: Path, logs: list[Path], hasher: Callable, *, seed: int, budget: Budget,
                       end: float | None, confirmed: dict | None = None) -> None:
  """The segment and time rows of a workflow tree (see the module doc): the checks without re-execution on every
  log (its kept states read before `end`), then its segments in an order drawn from `seed`: a share `budget.coverage`
  of them, or as many as fit in the log's share of the time left until `end` (each process stopped with its group at
  the end of it). `confirmed`: each log's audit/claims.py Confirmed (what the record's claims may set)."""
  here = this_machine()
  plans = {log: plan_log(audit, base, log, hasher, (confirmed or {}).get(log), end) for log in logs}
  todo = [log for log in logs if plans[log]]
  for i, log in enumerate(todo):
    segs, st = plans[log], time.perf_counter()
    share_end = None if end is None else st + max(end - st, 0.0) / (len(todo) - i)
    done, bad, stopped = [], None, False
    for j in draw_order(len(segs), seed, f"segments:{log.name}")[:budget.count(len(segs))]:
      if share_end is not None and time.perf_counter() >= share_end:
        stopped = True; break
      seg = segs[j]
      devs, steps, cmp, err, stopped = redo_segment(seg, share_end)
      if stopped: break
      if err:
        audit.add("FAIL", REEXECUTION, seg.rel, f"training steps {seg.start}-{seg.end} again failed: {err}"); bad = True
        break
      if cmp is None:
        audit.add("WARN", REEXECUTION, seg.rel, f"{NOT_REEXECUTABLE} here: the run trained on {seg.settings.get('GPUS')} "
                  f"{seg.settings.get('DEV')} device(s), this machine has {devs.get('devices')} "
                  f"{devs.get('device')}: another device count draws other dropout masks and trains another "
                  f"trajectory; {TRUST}"); bad = True
        break
      status, seen = judge(seg, devs, cmp)
      if status != "PASS":
        why = "" if seen.endswith(FALSE_DEVICE) else \
          f": the kept state of step {seg.end} is not what {seg.steps} steps give"
        audit.add(status, REEXECUTION, seg.rel, f"steps {seg.start}-{seg.end} trained again from the "
                  f"{'initial state' if seg.start == 0 else f'kept state of step {seg.start}'} (seed {seed}) on "
                  f"{devs.get('devices')} {devs.get('device')} device(s): {seen}{why}; {RETRAIN}"); bad = True
        break
      seg.cpu_step = steady_cpu(steps) if devs.get("device") == "CPU" and same_kind(here, devs.get("machine")) else None
      done.append((seg, seen))
    if bad: continue
    secs = time.perf_counter() - st
    share = f"{secs:.1f} s" + (f" of a {share_end - st:.0f} s share" if share_end is not None else
                               f" ({budget.describe()})")
    rel = log.relative_to(base).as_posix()
    if not done:
      audit.add("WARN", REEXECUTION, rel, f"not redone: none of the {len(segs)} training segments: the process was stopped "
                f"with its group at the end of its share ({share}) before it finished one; {TRUST}; give a larger "
                "--reexecute-budget (a segment takes a process start, a compile and its steps)")
      continue
    cut = (f"; not redone: {len(segs) - len(done)} segment(s), the process was stopped at the end of its share"
           if stopped else "")
    kinds = list(dict.fromkeys(x for _, x in done))  # each segment's own finding, once each
    seen = kinds[0] if len(kinds) == 1 else "; ".join(f"{s.start}-{s.end} {x}" for s, x in done)
    audit.add("PASS", REEXECUTION, rel, f"{len(done)} of {len(segs)} training segments (drawn with seed {seed}; steps "
              f"{', '.join(f'{s.start}-{s.end}' for s, _ in done)}) trained again from the kept states with the "
              f"trainer's own step: {seen}; {share}; {catch_chance(len(done), len(segs))}{cut}")
  from mlperf_bert.audit.times import check_times
  check_times(audit, base, [s for log in logs for s in plans[log]], here)

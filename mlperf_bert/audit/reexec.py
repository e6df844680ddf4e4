"""Re-execution as evidence: the audit redoes a random sample of a workflow tree's work, chosen when it runs.

Records can be rewritten by whoever holds the tree; work cannot be faked without doing it. So the audit
  - rebuilds the eval set from results4/eval.txt, and a random sample of topics' shards from their text (the text the
    header names), with the preprocessing settings on record and the vocab, with the package's own builders in a
    process of its own (audit/rebuild.py), and compares the bytes with the files on disk: shards are deterministic;
  - evaluates a random sample of the last eval's batches of the tree's own eval set (eval/eval.shard, whatever path
    the record names) on the final weights the train process saved (result_bert_<seed>.final.safetensors) with the
    trainer's own eval step (`python -m mlperf_bert reexecute-eval`: train/evidence.py, in a process of its own that
    exports the run's tinygrad settings first, with its own search settings: BEAM 0, whatever the record says), and
    compares each batch's counts with those the train record holds, which must in turn give the log's last
    eval_accuracy;
  - evaluates again whole the evals of a random sample of the earlier kept states (train/states.py, whose batches the
    record does not hold) on the model part of each state, and holds each accuracy to the one the log holds at that
    step (reexecute_kept_evals): an earlier accuracy edited, with the records resealed, FAILs.
The sample is drawn from a seed taken at audit time (os.urandom through `secrets`, or --reexecute-seed to repeat a
draw) that is printed in the table, so a forger cannot know which part will be redone. The budget (audit/bounded.py)
is seconds or a coverage. Seconds are a hard bound: the eval set and the shards are rebuilt in the drawn order until
their share of this call's seconds is spent (half when both parts are redone), then each log's batches are evaluated
in the drawn order until its share of the rest is spent;
each process is stopped with its process group at the end of its share, and the row says what was not redone. A
coverage (20%) redoes that share of the shards and of each log's batches (at least one of each), however long it takes.

Same device kind, device count and float type as the train run, and no kernel search in it: the counts must be
equal (they are integers; only a logit tie broken the other way could change one). Another device (e.g. a GPU run
audited on a CPU), or a run whose eval kernels were searched (BEAM > 0: the re-execution runs tinygrad's default
kernels, whose sums go in another order): each batch's total exact, and its correct count may differ by at most its
near ties, the predictions whose label's logit and best other logit differ by at most REL_EPS[float type] times the
prediction's largest |logit| (train/evidence.py near_ties): only those can flip from right to wrong or back when
another kernel sums in another order. REL_EPS is 8 times the largest difference measured between the logits of the
demo's final weights in that float type and in a more exact one (bench/bench_device_band.py; docs/audit.md, "the
device band"): a forger's extra correct predictions are not near ties, so they are not let through as a share of
the batch.

Training segments between the kept states are trained again by audit/segments.py; `parts` names which of PARTS
are redone, the seconds of a budget shared equally among them.

    reexecute(audit, base, logs, preprocessing, hasher, seed=None, budget=DEFAULT_BUDGET_S, eval_examples=None,
              parts=("shards", "evals"))
"""
from __future__ import annotations
import json, os, sys, tempfile, time
from pathlib import Path
from typing import Callable

from mlperf_bert.audit.bounded import Budget, catch_chance, draw_order, draw_seed, run_json_lines
from mlperf_bert.audit.rebuild import EVAL_SET, NOT_REEXECUTABLE, rebuild_shard, reexecute_data
from mlperf_bert.audit.rows import REEXECUTION, RETRAIN, Audit
from mlperf_bert.errors import UserError
from mlperf_bert.machine import device_kind

__all__ = ["DEFAULT_BUDGET_S", "PARTS", "REL_EPS", "Budget", "batches_agree", "catch_chance", "draw_order", "draw_seed",
           "rebuild_shard", "reexecute", "reexecute_data", "reexecute_eval", "run_worker"]

DEFAULT_BUDGET_S = 300.0
# the device band: near ties within this share of a prediction's largest |logit| (measured, x8: docs/audit.md)
REL_EPS = {"float32": 5e-6, "half": 6e-3, "bfloat16": 5e-2}
PARTS = ("shards", "evals", "segments")  # what --reexecute-parts may name (segments: audit/segments.py)


# ------------------------------------------------------------------------------------------------ the last eval
def rel_eps(float_type) -> float:
  """The device band's bound for the record's float type (the widest for one it does not know)."""
  return REL_EPS.get(str(float_type), max(REL_EPS.values()))


def allowed(near: list[float] | None) -> tuple[float, float]:
  """What a device change can move in a batch with these near ties: (|correct|, |accuracy|); (0, 0) on the run's
  devices (near None). The accuracy also gets 1e-6 for its float32 division on another device."""
  if near is None: return 0.0, 0.0
  w, n, valid = map(float, near)
  return w, (n / valid if valid else 0.0) + 1e-6


def batches_agree(recorded: list[float], got: list[float], near: list[float] | None) -> str:
  """'' when a batch's [correct, total, accuracy] re-executed agrees with the recorded one (equal on the run's
  devices, `near` None; elsewhere within its near ties), else what differs."""
  rc, rt, ra = map(float, recorded)
  gc, gt, ga = map(float, got)
  dc, da = allowed(near)
  if rt == gt and abs(rc - gc) <= dc and abs(ra - ga) <= da: return ""
  band = "" if near is None else (f"; {near[0]:g} near-tied prediction(s) could flip on another device, so at most "
                                  f"{dc:g} correct may differ")
  return (f"correct/total {got[0]:g}/{got[1]:g} (accuracy {got[2]:.6f}) on the weights, the record says "
          f"{rc:g}/{rt:g} ({ra:.6f}){band}")


def run_worker(command: str, request: dict, deadline: float | None) -> tuple[list[dict], str, bool]:
  """`python -m mlperf_bert <command> REQUEST.json` (one of the audit's workers: reexecute-eval, reexecute-segment)
  with this package first on its path, stopped with its process group at `deadline`: run_json_lines' (JSON lines,
  stderr tail, stopped)."""
  with tempfile.TemporaryDirectory(prefix="mlperf-bert-reexec-") as tmp:
    req = Path(tmp) / "request.json"
    req.write_text(json.dumps(request))
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PARALLEL", "0")  # tinygrad compiles in this process, not a pool: the same kernels, 30 % less CPU
    return run_json_lines([sys.executable, "-m", "mlperf_bert", command, str(req)], env, deadline)


def _share(start: float, deadline: float | None, budget: Budget) -> str:
  """The seconds an eval re-execution took since `start`, and of what share of the budget."""
  secs = time.perf_counter() - start
  return f"{secs:.1f} s" + (f" of a {max(deadline - start, 0):.0f} s share" if deadline is not None else
                            f" ({budget.describe()})")


def _same_devices(devs: dict, ev: dict) -> bool:
  """Whether the re-execution ran on the run's kind and count of devices (then its counts must be the run's)."""
  return (device_kind(devs.get("device")), devs.get("devices")) == (device_kind(ev.get("device")), ev.get("devices"))


def reeval_sample(record: Path, indices: list[int], ev: dict, deadline: float | None, eval_set: Path,
                  searched: bool = False, state: tuple[Path, int] | None = None) -> tuple[dict, list[dict], str, bool]:
  """The re-execution process (python -m mlperf_bert reexecute-eval: train/evidence.py) on `eval_set`, stopped with
  its process group at `deadline`: (devices used, batch lines with their near ties, error, stopped). `state`: (a kept
  state, its step): the eval logged at that step, on that state's weights, instead of the last."""
  more = {} if state is None else {"state": str(state[0].resolve()), "step": int(state[1])}
  lines, tail, stopped = run_worker("reexecute-eval",
                                    {"record": str(record.resolve()), "indices": indices, "device": ev.get("device"),
                                     "devices": ev.get("devices", 1), "eval_set": str(eval_set.resolve()),
                                     "rel_eps": rel_eps(ev.get("float_type")), "searched": searched, **more}, deadline)
  errors = [l["error"] for l in lines if "error" in l]
  devs = next((l for l in lines if "device" in l), {})
  got = [l for l in lines if "index" in l]
  if errors or (not stopped and (not devs or not got)):
    return devs, got, errors[0] if errors else (tail or "the eval process printed nothing"), stopped
  return devs, got, "", stopped


def _recorded(rec: dict) -> tuple[list[list[float]], dict] | str:
  w, ev = rec.get("final_weights"), rec.get("last_eval")
  if not w or not ev or not isinstance(ev.get("batches"), list) or not ev["batches"]:
    return "the train record holds no final weights and last-eval batches (a tree of an older version, or of " \
           "tinygrad's own trainer)"
  return ev["batches"], ev


def _step_beam(settings: dict, key: str) -> int:
  """The BEAM a step of the run was compiled with (its own `key`, else BEAM): 0 when its kernels were not searched."""
  hp = settings if isinstance(settings, dict) else {}
  beam = hp.get(key) if hp.get(key) is not None else hp.get("BEAM")
  return int(beam) if isinstance(beam, (int, float)) and not isinstance(beam, bool) else 0


def train_search(settings: dict) -> int:
  """The BEAM the run's train step was compiled with (TRAIN_BEAM, else BEAM)."""
  return _step_beam(settings, "TRAIN_BEAM")


def eval_search(settings: dict) -> int:
  """The BEAM the run's eval step was compiled with (EVAL_BEAM, else BEAM)."""
  return _step_beam(settings, "EVAL_BEAM")


def _weights(base: Path, rp: Path, rec: dict, hasher: Callable) -> Path | str:
  """The final weights, or why they are not the train process's (their size is compared before any hashing)."""
  from mlperf_bert.audit.provenance import size_differs
  entry = rec["final_weights"]
  weights = (rp.parent / str(entry.get("path"))).resolve()
  if not weights.is_file():
    return f"the final weights {entry.get('path')} are missing; {RETRAIN}"
  if (why := size_differs(weights, entry.get("bytes"))) or hasher(weights)["sha256"] != entry.get("sha256"):
    return (f"{weights.name}: {why + ' (not hashed)' if why else 'sha256 is not the one the train process wrote'} "
            f"({rp.name}); {RETRAIN}")
  return weights


def _own_eval_set(base: Path, rp: Path, rec: dict, hasher: Callable) -> Path | str:
  """The tree's eval/eval.shard when it is the eval set the record says the run read, else why not (its size compared
  before it is hashed)."""
  from mlperf_bert.audit.provenance import size_differs
  ev, entry = base / EVAL_SET, rec.get("eval_set") or {}
  named = (rp.parent / str(entry.get("path"))).resolve()
  if named != ev.resolve():
    return f"the train record's eval set is {entry.get('path')}, not this tree's {EVAL_SET} (chain rows)"
  if not ev.is_file() or size_differs(ev, entry.get("bytes")) or hasher(ev)["sha256"] != entry.get("sha256"):
    return f"{EVAL_SET} is not the eval set the train process read (chain rows)"
  return ev


def reexecute_eval(audit: Audit, base: Path, log: Path, seed: int, budget: Budget, deadline: float | None,
                   hasher: Callable, eval_proven: bool | None = None) -> None:
  """One result log's last eval: the record's batches give the log's accuracy; a sample of them, evaluated again
  on the final weights and the tree's own eval set, gives the record's counts. eval_proven False (the eval set is
  not what eval.txt gives): nothing is evaluated on it."""
  from mlperf_bert.audit.chain import logged_accuracies
  from mlperf_bert.train.evaluation import EvalBatch, eval_accuracy
  from mlperf_bert.train.record import read_record, record_path
  rel, rp = str(log.relative_to(base)), record_path(log)
  try:
    rec = read_record(rp)
  except UserError as e:
    audit.add("WARN", REEXECUTION, rel, f"{NOT_REEXECUTABLE}: {e}"); return
  r = _recorded(rec)
  if isinstance(r, str):
    audit.add("WARN", REEXECUTION, rel, f"{NOT_REEXECUTABLE}: {r}; {RETRAIN} to make it re-executable"); return
  batches, ev = r
  weights = _weights(base, rp, rec, hasher)
  if isinstance(weights, str):
    audit.add("FAIL", REEXECUTION, rel, weights); return
  try:
    as_b = [EvalBatch(*map(float, b)) for b in batches]
  except (TypeError, ValueError):
    audit.add("FAIL", REEXECUTION, rel, f"{rp.name}: last_eval batches are not [correct, total, accuracy] numbers; {RETRAIN}")
    return
  logged = logged_accuracies(log)
  rec_acc = eval_accuracy(as_b, str(ev.get("metric")))
  if not logged or logged[-1] != rec_acc:
    audit.add("FAIL", REEXECUTION, rel, f"the log's last eval_accuracy is {logged[-1] if logged else 'absent'}, the "
              f"{len(batches)} eval batches in {rp.name} give {rec_acc}: the log or its record was changed; {RETRAIN}")
    return
  n = len(batches)
  own = _own_eval_set(base, rp, rec, hasher)
  if isinstance(own, str) or eval_proven is False:
    why = own if isinstance(own, str) else f"{EVAL_SET} is not the eval set results4/eval.txt gives (its row)"
    audit.add("WARN", REEXECUTION, rel, f"not redone: none of the {n} batches of the last eval: {why}, so an accuracy "
              "measured on it proves nothing"); return
  order = draw_order(n, seed, log.name)[:budget.count(n)]
  st = time.perf_counter()
  beam = eval_search(rec.get("settings"))
  devs, got, err, stopped = reeval_sample(rp, order, ev, deadline, own, searched=bool(beam))
  share = _share(st, deadline, budget)
  if err:
    audit.add("FAIL", REEXECUTION, rel, f"the eval of {weights.name} failed: {err}"); return
  if not got:
    audit.add("WARN", REEXECUTION, rel, f"not redone: none of the {n} batches of the last eval: the eval process was "
              f"stopped with its process group at the end of its share ({share}) before its first batch; give a "
              "larger --reexecute-budget"); return
  same = _same_devices(devs, ev)
  why_band = "; ".join(([] if same else [f"the run used {ev.get('devices')} {ev.get('device')}"]) + (
    [f"the run searched its eval kernels with BEAM {beam}, the re-execution uses BEAM 0"] if beam else []))
  exact = same and not beam
  near = {g["index"]: (None if exact else g.get("near") or [0.0, 0.0, 0.0]) for g in got}
  ties = sum(n[0] for n in near.values() if n)
  how = (f"on {devs.get('devices')} {devs.get('device')} device(s), {ev.get('float_type')}, " +
         ("bit-exact as recorded" if exact else f"within each batch's near ties ({ties:g} in all: predictions whose "
          f"label and best other logit lie within {rel_eps(ev.get('float_type')):g} of their largest |logit|; "
          f"{why_band})"))
  bad = [(g["index"], why) for g in got if (why := batches_agree(batches[g["index"]], g["batch"], near[g["index"]]))]
  got.sort(key=lambda g: g["index"])  # summed in the eval's order, as the run summed them
  sample = eval_accuracy([EvalBatch(*g["batch"]) for g in got], str(ev.get("metric")))
  if bad:
    i, why = bad[0]
    audit.add("FAIL", REEXECUTION, rel, f"{len(bad)} of {len(got)} re-executed eval batches disagree with {rp.name} "
              f"(seed {seed}): batch {i}: {why}; the sample's accuracy is {sample:.6f}, the log says {logged[-1]}: "
              f"the weights do not reach the logged accuracy; {RETRAIN}"); return
  if len(got) == n and abs(sample - logged[-1]) > whole_eval_band([allowed(near[g["index"]]) for g in got],
                                                                  [float(b[1]) for b in batches], str(ev.get("metric"))):
    audit.add("FAIL", REEXECUTION, rel, f"all {n} eval batches re-executed give accuracy {sample}, the log says "
              f"{logged[-1]}; {RETRAIN}"); return
  cut = (f"; not redone: {n - len(got)} batch(es), the eval process was stopped at the end of its share" if stopped
         else "")
  audit.add("PASS", REEXECUTION, rel, f"{len(got)} of {n} batches of the last eval (drawn with seed {seed}) evaluated on "
            f"{weights.name} with the trainer's eval step {how}: accuracy {sample:.6f} on the sample, "
            f"{logged[-1]:.6f} logged, {share}; {catch_chance(len(got), n)}{cut}")


def whole_eval_band(per_batch: list[tuple[float, float]], totals: list[float], metric: str) -> float:
  """How far the whole eval's accuracy may move with each batch's allowed moves: the mean of the accuracy moves
  (tinygrad's metric), or the correct moves over all predictions (pooled); 0 on the run's devices."""
  if not per_batch: return 0.0
  if metric == "tinygrad": return sum(a for _, a in per_batch) / len(per_batch)
  return sum(c for c, _ in per_batch) / (sum(totals) or 1.0) + 1e-6


# ------------------------------------------------------------------------------------------------ the kept states' evals
def _earlier_states(base: Path, rp: Path, rec: dict) -> list[tuple[int, Path, dict]]:
  """(step, file, record entry) of each kept state but the last (whose eval is the last eval), in step order; [] when
  the record keeps none or names them outside the tree (the segments' rows say so)."""
  kept = rec.get("kept_states")
  if not isinstance(kept, dict) or not isinstance(kept.get("states"), list): return []
  try:
    folder = rp.parent / str(kept.get("path"))
    if not folder.resolve().is_relative_to(base.resolve()): return []
    states = sorted((int(e["step"]), folder / str(e["file"]), e) for e in kept["states"]
                    if Path(str(e["file"])).name == str(e["file"]))
  except (KeyError, TypeError, ValueError, OSError, RuntimeError):
    return []
  return states[:-1]


def _logged_at(log: Path) -> dict[int, float]:
  """{step: eval_accuracy} of a result log, each eval's step from its samples (audit/run_time.py: epoch_num over
  global_batch_size), so no step_num edit moves an accuracy to another state."""
  from mlperf_bert.audit.logs import read_log
  from mlperf_bert.audit.run_time import log_evals
  lg = read_log(log)
  bs = lg.global_batch_size
  if isinstance(bs, bool) or not isinstance(bs, int) or bs <= 0: return {}
  # a log is untrusted: an accuracy that is no number is no accuracy (bool is an int to Python, not to JSON)
  return {int(e.steps): float(e.accuracy.value) for e in log_evals(lg, bs)
          if e.accuracy is not None and e.steps is not None and e.steps.is_integer()
          and isinstance(e.accuracy.value, (int, float)) and not isinstance(e.accuracy.value, bool)}


def reexecute_kept_evals(audit: Audit, base: Path, log: Path, seed: int, budget: Budget, deadline: float | None,
                         hasher: Callable, eval_proven: bool | None = None) -> None:
  """The evals of a sample of a log's earlier kept states (drawn with `seed`, `budget.count` of them or as many as fit
  before `deadline`): each eval evaluated again whole (the record holds the batches of the last eval only) on the
  model part of its state, the tree's own eval set and the window of its eval, and its accuracy held to the
  eval_accuracy the log holds at that step: equal on the run's devices, else within the batches' near ties. So an
  earlier accuracy edited, with the records resealed, FAILs. No row when the log has no earlier kept state."""
  from mlperf_bert.audit.provenance import size_differs
  from mlperf_bert.train.evaluation import EvalBatch, eval_accuracy
  from mlperf_bert.train.record import read_record, record_path
  rel, rp = str(log.relative_to(base)), record_path(log)
  try: rec = read_record(rp)
  except UserError: return   # the last eval's row says why
  r, states = _recorded(rec), None
  if isinstance(r, str) or not (states := _earlier_states(base, rp, rec)): return
  batches, ev = r
  own = _own_eval_set(base, rp, rec, hasher)
  if isinstance(own, str) or eval_proven is False:
    audit.add("WARN", REEXECUTION, rel, f"not redone: the evals of the {len(states)} earlier kept state(s): "
              f"{own if isinstance(own, str) else EVAL_SET + ' is not the eval set results4/eval.txt gives'}"); return
  logged, n, beam = _logged_at(log), len(batches), eval_search(rec.get("settings"))
  order = draw_order(len(states), seed, f"kept-evals:{log.name}")[:budget.count(len(states))]
  st, done, stopped, how = time.perf_counter(), [], False, ""
  for j in order:
    if deadline is not None and time.perf_counter() >= deadline:
      stopped = True; break
    step, f, entry = states[j]
    name = f.relative_to(base).as_posix()
    if not f.is_file() or size_differs(f, entry.get("bytes")) or hasher(f)["sha256"] != entry.get("sha256"):
      audit.add("FAIL", REEXECUTION, rel, f"{name}: not the kept state of step {step} the train process wrote "
                f"({rp.name}): its eval is not redone on it; {RETRAIN}"); return
    if step not in logged:
      audit.add("FAIL", REEXECUTION, rel, f"the log holds no eval_accuracy at step {step}, where {rp.name} keeps a "
                f"state; {RETRAIN}"); return
    devs, got, err, stopped = reeval_sample(rp, list(range(n)), ev, deadline, own, bool(beam), (f, step))
    if err:
      audit.add("FAIL", REEXECUTION, rel, f"the eval of the kept state of step {step} ({name}) failed: {err}"); return
    if stopped or len(got) < n: stopped = True; break
    same = _same_devices(devs, ev)
    exact = same and not beam
    near = [None if exact else g.get("near") or [0.0, 0.0, 0.0] for g in got]
    got.sort(key=lambda g: g["index"])
    acc = eval_accuracy([EvalBatch(*g["batch"]) for g in got], str(ev.get("metric")))
    band = whole_eval_band([allowed(x) for x in near], [float(g["batch"][1]) for g in got], str(ev.get("metric")))
    how = (f"on {devs.get('devices')} {devs.get('device')} device(s), " +
           ("bit-exact" if exact else f"within the batches' near ties ({band:.2g} of accuracy)"))
    if not abs(acc - float(logged[step])) <= band:
      audit.add("FAIL", REEXECUTION, rel, f"the eval at step {step} evaluated again whole ({n} batch(es), seed {seed}) "
                f"on the kept state {name} with the trainer's eval step {how}: accuracy {acc}, the log says "
                f"{logged[step]}: the state does not reach the logged accuracy; {RETRAIN}"); return
    done.append(step)
  share = _share(st, deadline, budget)
  if not done:
    audit.add("WARN", REEXECUTION, rel, f"not redone: the evals of the {len(states)} earlier kept state(s): the eval "
              f"process was stopped with its process group at the end of its share ({share}) before it finished one; "
              "give a larger --reexecute-budget"); return
  cut = (f"; not redone: {len(states) - len(done)} of them, the eval process was stopped at the end of its share"
         if stopped else "")
  audit.add("PASS", REEXECUTION, rel, f"the evals of {len(done)} of {len(states)} earlier kept state(s) (drawn with "
            f"seed {seed}; step {', '.join(map(str, done))}) evaluated again whole on their weights with the trainer's "
            f"eval step {how}: the logged accuracies; {share}; {catch_chance(len(done), len(states))}{cut}")


# ------------------------------------------------------------------------------------------------ all of it
def reexecute(audit: Audit, base: Path, logs: list[Path], preprocessing: dict | None, hasher: Callable, *,
              seed: int | None = None, budget: Budget | float | str = DEFAULT_BUDGET_S,
              eval_examples: int | None = None, parts: tuple[str, ...] = ("shards", "evals")) -> None:
  """The shard and last-eval re-execution rows of a workflow tree (see the module doc) of `parts`. seed None: drawn
  now; budget: seconds, a Budget, or its text (`300`, `300s`, `20%`): its seconds are this call's, the shards half of
  them when both are redone. The eval set is rebuilt whenever the evals are (an accuracy on it proves nothing else)."""
  seed = draw_seed() if seed is None else int(seed)
  budget = budget if isinstance(budget, Budget) else Budget.parse(budget)
  t0 = time.perf_counter()
  end = None if budget.seconds is None else t0 + budget.seconds
  data_end = None if end is None else t0 + budget.seconds * (0.5 if "shards" in parts and "evals" in parts else
                                                             1.0 if "shards" in parts else 0.1)
  proven = reexecute_data(audit, base, preprocessing, eval_examples, seed, budget, data_end, hasher,
                          with_shards="shards" in parts)
  if "evals" not in parts: return
  for i, log in enumerate(logs):
    # each log's share of what is left: its eval process is stopped at the end of it; half of it for the evals of
    # its earlier kept states, where it keeps any
    now = time.perf_counter()
    deadline = None if end is None else now + max(end - now, 0.0) / (len(logs) - i)
    half = deadline if deadline is None or not _has_earlier(base, log) else now + (deadline - now) / 2
    reexecute_eval(audit, base, log, seed, budget, half, hasher, proven)
    reexecute_kept_evals(audit, base, log, seed, budget, deadline, hasher, proven)


def _has_earlier(base: Path, log: Path) -> bool:
  from mlperf_bert.train.record import read_record, record_path
  try: return bool(_earlier_states(base, record_path(log), read_record(record_path(log))))
  except UserError: return False

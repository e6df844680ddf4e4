"""Numbers no real run produces: the checks that catch an edited received submission whose every line still parses
and passes mlperf-logging's checkers. Each is calibrated on every published BERT result (v0.7 ... v5.0,
tests/fixtures/audit-calibration.json): what MLCommons accepted is a WARN that says what was seen, never a FAIL.

* `check_clock`: a `time_ms` that is NaN or infinite, one before MLPerf existed (EARLIEST_MS) or in the future, a
  run_stop before its run_start. Each is a FAIL (never a DROP: olympic scoring does not drop a forged run) that
  stops the official tools, which would score the edited numbers. The one exception is an event at time_ms 0 that
  no score or check times (not one of CLOCKED_KEYS): published logs carry such lines, written by a script before
  or after the run (a `cache_clear` by clean.sh, `submission_*` lines added when packaging): a WARN.
* `check_copies`: runs with the same eval sequence (each eval's epoch_num and eval_accuracy, in order) are one run
  logged twice, whatever their seeds and time stamps say, when the sequence holds at least DISTINCT_EVALS different
  accuracies (a real run climbs; two do not climb alike). A shorter or flat sequence happens by chance (a small model
  scoring the most frequent token's share at every eval, whatever its seed): there the evals' times after run_start
  must be equal too (a copy shifted in time keeps them). A copy with its numbers edited is found up to a tolerance
  (NEAR_MIN_EVALS evals or more with the same epoch_num sequence, accuracies within ACCURACY_TOL at every eval, each
  eval's time after run_start the first log's times one ratio within PROPORTIONAL_TOL). A copy whose every event
  sits at the same time after run_start (within MOVED_SLACK_MS) with the clock moved is a FAIL anywhere (time
  stamps edited so that one run looks like several). In a received submission any other copy is a WARN (MLCommons
  accepted a log published twice with another seed, and a trainer that ignores its seed logs equal accuracies, or
  accuracies and times alike up to the tolerances); in a workflow tree, whose provenance says how each log was made,
  every copy is a FAIL.
* `check_scaling`: scaling.json's factor is not the submitter's to choose: mlperf-logging's rcp_checker writes it
  (package_checker runs it with set_scaling). It is recomputed here. result_summarizer scores with the file's
  factor (1 without it), and so does the audit, with a WARN when the rcp_checker gives another one (the RCPs of
  the round's checker may differ from the installed one's); a factor no rcp_checker writes (below 1, above the
  largest speedup any BERT RCP allows, not a number) is a FAIL naming both, and the score uses the recomputed one.
"""
from __future__ import annotations
import json, math, re, time
from datetime import datetime, timezone
from pathlib import Path

from mlperf_bert.audit.mlperf_tools import rcp_max_speedup, rcp_scaling
from mlperf_bert.audit.logs import MLPerfLog
from mlperf_bert.audit.rows import Row, shorten

# 2018-01-01 UTC: the first MLPerf Training round (v0.5) ran in 2018; no result log's clock reads earlier
EARLIEST_MS = 1_514_764_800_000
FUTURE_SLACK_MS = 24 * 3600 * 1000   # a clock a day ahead of the auditor's is still believed
DISTINCT_EVALS = 3                   # different accuracies that make an equal eval sequence a copy on its own
# A copy up to a tolerance (`_alike`; a copy whose accuracies were nudged and whose times were scaled): calibrated on
# every pair of distinct published runs of one system with the same epoch_num sequence (v0.7 ... v5.0, 2,774 pairs;
# tests/fixtures/copies-calibration.json, tools/calibrate_copies.py). With 3 to 5 evals, distinct runs come within
# ACCURACY_TOL at every eval with times proportional within PROPORTIONAL_TOL (v0.7 Google tpu-v3-8192-JAX result_0
# and result_6: 3 evals within 9.7e-5, times within 9.2e-4); with NEAR_MIN_EVALS or more, the closest pair differs
# by 5.2e-4 at one eval (v0.7 NVIDIA dgx2h_n32 result_1 and result_5), five times ACCURACY_TOL. Times alone tell no
# copy: TPU runs are proportional to a few ms (v0.7 Google tpu-v4-16-TF, 4e-6).
ACCURACY_TOL = 1e-4                  # issue 42: accuracies this close at every eval are one run's
NEAR_MIN_EVALS = 6                   # evals a sequence needs to be compared up to ACCURACY_TOL
PROPORTIONAL_TOL = 1e-3              # each eval's time after run_start, over the first log's, within this of one ratio
CLOCK_MS = 1                         # a time_ms is a whole ms: each time after run_start is off by up to this
# A copy is "moved" when every event sits at the same time after run_start within this, with the clock moved: the
# closest two distinct published runs with the same events keep them within 78 ms of each other (v4.0 Supermicro
# SYS-421GE-TNHR2-LCC-1 result_02 and result_06)
MOVED_SLACK_MS = 10
TIME_CHECKS = ("times",)             # the checks whose FAIL means the official tools are not run
# the events a run's clock times: the score, the init time and the copies check read them; a script does not write them
CLOCKED_KEYS = ("run_start", "run_stop", "init_start", "init_stop", "block_start", "block_stop", "epoch_start",
                "epoch_stop", "eval_start", "eval_stop", "eval_accuracy")
_NONFINITE = re.compile(r"^'time_ms' is (nan|inf|-inf),")


def _date(ms: float) -> str:
  try:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  except (OverflowError, OSError, ValueError):
    return "no date"


def _key_of(text: str) -> str:
  try:
    return str(json.loads(text.split(":::MLLOG", 1)[1]).get("key"))[:40]
  except (ValueError, AttributeError, IndexError):
    return "?"


def check_clock(log: MLPerfLog, s: str, now_ms: float | None = None) -> list[Row]:
  """The clock of one log: finite, after EARLIEST_MS, not in the future, run_stop not before run_start."""
  now_ms = time.time() * 1000 if now_ms is None else now_ms
  rows = []
  nonfinite = [(m, _NONFINITE.match(m.error).group(1)) for m in log.malformed if _NONFINITE.match(m.error)]
  if nonfinite:
    rows.append(Row("FAIL", "times", s, "time_ms is not a number a clock gives: " + shorten(
      [f"line {m.lineno} ({_key_of(m.text)}) is {'NaN' if v == 'nan' else v.replace('inf', 'infinite')}"
       for m, v in nonfinite]) + ": the log was edited"))
  odd = [e for e in log.events if not EARLIEST_MS <= e.time_ms <= now_ms + FUTURE_SLACK_MS]
  # an event no score or check reads timed off the clock (time_ms 0; Intel's v2.1 16-nodes-SPR-pytorch-open
  # result_9.txt: a cache_clear at 16655441572299, a digit too many) is a WARN; a clocked one is a FAIL
  unclocked = [e for e in odd if e.key not in CLOCKED_KEYS]
  odd = [e for e in odd if e.key in CLOCKED_KEYS]
  if odd:
    rows.append(Row("FAIL", "times", s, f"{len(odd)} event(s) timed outside 2018-01-01 .. now: " + shorten(
      [f"line {e.lineno} {e.key} at time_ms {e.time_ms:.6g} ({_date(e.time_ms)})" for e in odd])
      + ": no MLPerf run's clock reads that; the log was edited"))
  if unclocked:
    at = "at time_ms 0" if all(e.time_ms == 0 for e in unclocked) else "timed outside 2018-01-01 .. now"
    rows.append(Row("WARN", "times", s, f"{len(unclocked)} event(s) {at}, off the run's clock: " + shorten(
      [f"line {e.lineno} {e.key[:40]}" + (f" at time_ms {e.time_ms:.6g}" if e.time_ms else "")
       + (f" (written by {str(e.metadata['file'])[:60]})"
                                          if e.metadata.get("file") not in (None, "", "N/A") else "") for e in unclocked])
      + ": lines a script wrote before or after the run, none of the run's own clocked events (run, init, block, "
      "epoch, eval); the score reads run_start and run_stop"))
  start, stop = log.first("run_start"), log.first("run_stop")
  if start and stop and stop.time_ms < start.time_ms:
    rows.append(Row("FAIL", "times", s, f"run_stop (line {stop.lineno}) is {(start.time_ms - stop.time_ms) / 1000:,.1f} "
                    f"s before run_start (line {start.lineno}): a negative run time; the log was edited"))
  return rows


def eval_sequence(log: MLPerfLog) -> tuple:
  """Each eval's (epoch_num, eval_accuracy) in order, as text (values of any JSON type compare)."""
  return tuple((json.dumps(e.metadata.get("epoch_num"), sort_keys=True), json.dumps(e.value, sort_keys=True))
               for e in log.eval_accuracies)


def eval_offsets(log: MLPerfLog) -> tuple | None:
  """Each eval's time after run_start in ms (None without a run_start): equal in a copy shifted in time."""
  start = log.run_start_ms
  return None if start is None else tuple(e.time_ms - start for e in log.eval_accuracies)


def _eval_values(log: MLPerfLog) -> list[float] | None:
  try:
    accs = [float(e.value) for e in log.eval_accuracies]
  except (TypeError, ValueError):
    return None
  return accs if all(math.isfinite(a) for a in accs) else None


def _climbs(accs: list[float]) -> bool:
  """At least DISTINCT_EVALS accuracies further apart than the tolerance allows two copies to be."""
  kept: list[float] = []
  for a in sorted(accs):
    if not kept or a - kept[-1] > 2 * ACCURACY_TOL: kept.append(a)
  return len(kept) >= DISTINCT_EVALS


def _alike(a: MLPerfLog, b: MLPerfLog) -> float | None:
  """The ratio of b's eval times after run_start to a's when b is a copy of a up to the tolerances (NEAR_MIN_EVALS
  evals or more at the same epoch_num sequence, accuracies within ACCURACY_TOL at every one and climbing, each eval's
  time after run_start a's times the same ratio within PROPORTIONAL_TOL and the clocks' rounding); else None."""
  ea, eb = a.eval_accuracies, b.eval_accuracies
  if len(ea) < NEAR_MIN_EVALS or len(ea) != len(eb) or a.run_start_ms is None or b.run_start_ms is None: return None
  if [json.dumps(e.metadata.get("epoch_num"), sort_keys=True) for e in ea] != \
     [json.dumps(e.metadata.get("epoch_num"), sort_keys=True) for e in eb]: return None
  xa, xb = _eval_values(a), _eval_values(b)
  if xa is None or xb is None or not _climbs(xa) or any(abs(x - y) > ACCURACY_TOL for x, y in zip(xa, xb)): return None
  oa, ob = eval_offsets(a), eval_offsets(b)
  if min(oa) <= 0 or min(ob) <= 0: return None
  r = ob[-1] / oa[-1]
  if all(abs(y - r * x) <= PROPORTIONAL_TOL * r * x + (1 + r) * CLOCK_MS for x, y in zip(oa, ob)):
    return r
  return None


def _events(log: MLPerfLog, shift: float = 0) -> tuple:
  """The log's events but its seeds, each (key, value, time_ms - shift): equal for one run logged twice."""
  return tuple((e.key, json.dumps(e.value, sort_keys=True), e.time_ms - shift) for e in log.events if e.key != "seed")


def _start(log: MLPerfLog) -> float:
  return log.run_start_ms if log.run_start_ms is not None else (log.events[0].time_ms if log.events else 0)


def _moved_by(log: MLPerfLog, first: MLPerfLog) -> float | None:
  """The largest difference (ms) between an event's time after run_start in `log` and in `first` when both log the
  same events with the same values (but the seed; eval accuracies within ACCURACY_TOL); None when they do not."""
  mine, theirs = _events(log, _start(log)), _events(first, _start(first))
  if len(mine) != len(theirs): return None
  worst = 0.0
  for (k, v, t), (k2, v2, t2) in zip(mine, theirs):
    if k != k2: return None
    if v != v2:
      try:
        if k != "eval_accuracy" or not abs(float(v) - float(v2)) <= ACCURACY_TOL: return None
      except (TypeError, ValueError):
        return None
    worst = max(worst, abs(t - t2))
  return worst


def _days(ms: float) -> str:
  return f"{ms / 86_400_000:,.1f} days" if ms >= 86_400_000 else f"{ms / 1000:,.0f} s"


def _copy_kind(group: list[MLPerfLog], ratios: dict) -> tuple[str, str]:
  """How the logs of one group are alike: ("same", ...) every event at the same time_ms, ("moved", ...) every event
  at the same time after run_start within MOVED_SLACK_MS with the clock moved, ("other", ...) the evals only."""
  first = group[0]
  if all(_events(l) == _events(first) for l in group):
    return "same", "every event at the same time_ms with the same value, only the seed differs"
  off = [_moved_by(l, first) for l in group]
  moved = sorted({abs(_start(l) - _start(first)) / 1000 for l in group} - {0})
  if moved and all(o is not None and o <= MOVED_SLACK_MS for o in off):
    slack = max(off)
    return "moved", (f"every event at the same time after run_start{f' (within {slack:,.0f} ms)' if slack else ''}, "
                     f"the clock moved by {shorten([f'{m:,.0f} s' for m in moved])}: time stamps edited so that one "
                     "run looks like several")
  if not ratios:
    return "other", "at other times (a copy with its times edited unevenly, or a trainer whose runs do not depend on the seed)"
  apart = max(abs(_start(l) - _start(first)) for l in group)
  r = list(ratios.values()) or [1.0]
  return "other", (f"times after run_start proportional (x{min(r):.3f}-x{max(r):.3f}), clocks up to {_days(apart)} "
                   "apart (a copy with its numbers edited, or a trainer whose runs do not depend on the seed)")


def _groups(logs: list[MLPerfLog]) -> list[tuple[list[MLPerfLog], dict]]:
  """The logs that are copies of each other, each group in file order with {id(log): its ratio to the first's eval
  times} for the logs found by `_alike` (empty when every log has the first's eval sequence)."""
  parent = {id(l): id(l) for l in logs}
  def root(i):
    while parent[i] != i: i = parent[i]
    return i
  exact: dict[tuple, list[MLPerfLog]] = {}
  for log in logs:
    seq = eval_sequence(log)
    if not seq: continue
    timed = len({acc for _, acc in seq}) < DISTINCT_EVALS   # flat or short: the times must match too
    exact.setdefault((seq, eval_offsets(log) or id(log)) if timed else (seq,), []).append(log)
  for same in exact.values():
    for l in same[1:]: parent[root(id(l))] = root(id(same[0]))
  for i, a in enumerate(logs):
    for b in logs[i + 1:]:
      if root(id(a)) != root(id(b)) and _alike(a, b) is not None: parent[root(id(b))] = root(id(a))
  by_root: dict[int, list[MLPerfLog]] = {}
  for l in logs: by_root.setdefault(root(id(l)), []).append(l)
  out = []
  for group in by_root.values():
    if len(group) < 2: continue
    first = group[0]
    if all(eval_sequence(l) == eval_sequence(first) for l in group):
      out.append((group, {}))
    else:
      last = lambda l: (eval_offsets(l) or (None,))[-1]
      out.append((group, {id(l): last(l) / last(first) for l in group if last(l) and last(first)}))
  return out


def check_copies(logs: list[MLPerfLog], names: dict, system: str, received: bool = False) -> list[Row]:
  """Runs that are copies of one run (seeds and time stamps are easily edited; two real runs do not reach the same
  accuracies at the same samples, eval after eval): the same eval sequence (epoch_num and eval_accuracy, in order;
  a sequence of fewer than DISTINCT_EVALS different accuracies only with the same eval times after run_start), or
  one alike up to the tolerances (`_alike`). A copy with its clock moved is a FAIL; in a `received` submission the
  other copies are a WARN (see the module's docstring)."""
  rows = []
  for group, ratios in _groups(logs):
    kind, what = _copy_kind(group, ratios)
    v = [names[id(l)] for l in group]
    seeds = [str(l.seed) for l in group]
    n = len(group[0].eval_accuracies)
    if ratios:
      xs = [x for x in map(_eval_values, group) if x is not None]
      gap = max((abs(x - y) for acc in xs[1:] for x, y in zip(acc, xs[0])), default=0.0)
      tol = f"{ACCURACY_TOL:.0e}".replace("e-0", "e-")
      alike = f"have {n} evals at the same epoch_num, accuracies within {tol} at all {n} evals (up to {gap:.2g} apart)"
    else:
      alike = f"have the same {n} eval(s) (epoch_num and eval_accuracy, in order)"
    rows.append(Row("WARN" if received and kind != "moved" else "FAIL", "copies", system,
                    f"{' and '.join(v[:4])}{f' and {len(v) - 4} more' if len(v) > 4 else ''} {alike}, {what} (seeds "
                    f"{', '.join(seeds[:4])}{', ...' if len(seeds) > 4 else ''}): one run logged {len(v)} times, not "
                    "separate runs"))
  return rows


def check_scaling(logs: list[MLPerfLog], bert: Path, system: str, *, division: str | None, ruleset: str,
                  shipped: float | None) -> tuple[list[Row], float]:
  """scaling.json's factor (`shipped`, None without the file) against the one mlperf-logging's rcp_checker writes.
  Returns the rows and the factor to score with: the file's (1 without it), as result_summarizer scores, unless no
  rcp_checker writes it (then the recomputed one)."""
  name = f"results/{system}/bert/scaling.json"
  factor = 1.0 if shipped is None else shipped
  if any(l.unread or l.over_bounds for l in logs):
    return ([Row("SKIP", "scaling", system, f"{name}: not recomputed, a result log could not be read safely")]
            if shipped is not None else []), factor
  if division != "closed":
    want, how = 1.0, f"the {division or 'unknown'} division has no RCP, so mlperf-logging writes no scaling.json"
  else:
    ok, msg, want = rcp_scaling(bert, ruleset)
    how = (f"rcp_checker training {ruleset}: {msg}; " + ("the RCP mean over the submission's mean epochs"
           if want > 1 else "no faster convergence than the RCP mean, so no scaling.json" if ok else
           "the RCP check fails, so no scaling.json"))
  if math.isclose(factor, want, rel_tol=1e-9):
    if shipped is None: return [], want
    return [Row("PASS", "scaling", system, f"{name}: factor {factor:.6g}, as mlperf-logging's rcp_checker computes "
                f"it ({how})")], want
  top = rcp_max_speedup()
  if shipped is None:
    return [Row("WARN", "scaling", system, f"scaling.json absent: scored with 1 as MLCommons does; rcp_checker would "
                f"give {want:.6g} ({how})")], 1.0
  if 1.0 <= shipped <= top:
    return [Row("WARN", "scaling", system, f"{name} says {shipped:.6g}: scored with it as MLCommons does; "
                f"mlperf-logging's rcp_checker gives {want:.6g} ({how}); the file's factor is one an rcp_checker "
                f"writes (1 .. {top:.4g}, the largest speedup a BERT RCP allows): the round's RCPs may differ")], shipped
  return [Row("FAIL", "scaling", system, f"{name} says {shipped:.6g}; mlperf-logging's rcp_checker gives {want:.6g} "
              f"({how}): no rcp_checker writes a factor below 1 or above {top:.4g}, the largest speedup a BERT RCP "
              "allows; the factor is not the submitter's to choose (rerun package_checker, which writes it)")], want

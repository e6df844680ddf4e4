"""Numbers no real run produces: the checks that catch an edited received submission whose every line still parses
and passes mlperf-logging's checkers.

* `check_times`: a `time_ms` that is NaN or infinite, one before MLPerf existed (EARLIEST_MS) or in the future, a
  run_stop before its run_start. Each is a FAIL (never a DROP: olympic scoring does not drop a forged run) that
  stops the official tools, which would score the edited numbers.
* `check_copies`: runs with the same eval sequence (each eval's epoch_num and eval_accuracy, in order) are one run
  logged twice, whatever their seeds and time stamps say, when the sequence holds at least DISTINCT_EVALS different
  accuracies (a real run climbs; two do not climb alike). A shorter or flat sequence happens by chance (a small model
  scoring the most frequent token's share at every eval, whatever its seed): there the evals' times after run_start
  must be equal too (a copy shifted in time keeps them).
* `check_scaling`: scaling.json's factor is not the submitter's to choose: mlperf-logging's rcp_checker writes it
  (package_checker runs it with set_scaling). It is recomputed here and a file that differs is a FAIL naming both.
"""
from __future__ import annotations
import json, math, re, time
from datetime import datetime, timezone
from pathlib import Path

from mlperf_bert.audit.mlperf_tools import rcp_scaling
from mlperf_bert.audit.logs import MLPerfLog
from mlperf_bert.audit.rows import Row, shorten

# 2018-01-01 UTC: the first MLPerf Training round (v0.5) ran in 2018; no result log's clock reads earlier
EARLIEST_MS = 1_514_764_800_000
FUTURE_SLACK_MS = 24 * 3600 * 1000   # a clock a day ahead of the auditor's is still believed
DISTINCT_EVALS = 3                   # different accuracies that make an equal eval sequence a copy on its own
TIME_CHECKS = ("times",)             # the checks whose FAIL means the official tools are not run
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


def check_times(log: MLPerfLog, s: str, now_ms: float | None = None) -> list[Row]:
  """The clock of one log: finite, after EARLIEST_MS, not in the future, run_stop not before run_start."""
  now_ms = time.time() * 1000 if now_ms is None else now_ms
  rows = []
  nonfinite = [(m, _NONFINITE.match(m.error).group(1)) for m in log.malformed if _NONFINITE.match(m.error)]
  if nonfinite:
    rows.append(Row("FAIL", "times", s, "time_ms is not a number a clock gives: " + shorten(
      [f"line {m.lineno} ({_key_of(m.text)}) is {'NaN' if v == 'nan' else v.replace('inf', 'infinite')}"
       for m, v in nonfinite]) + ": the log was edited"))
  odd = [e for e in log.events if not EARLIEST_MS <= e.time_ms <= now_ms + FUTURE_SLACK_MS]
  if odd:
    rows.append(Row("FAIL", "times", s, f"{len(odd)} event(s) timed outside 2018-01-01 .. now: " + shorten(
      [f"line {e.lineno} {e.key} at time_ms {e.time_ms:.6g} ({_date(e.time_ms)})" for e in odd])
      + ": no MLPerf run's clock reads that; the log was edited"))
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


def check_copies(logs: list[MLPerfLog], names: dict, system: str) -> list[Row]:
  """Runs whose eval sequences are equal: copies of one run (seeds and time stamps are easily edited; two real
  runs do not reach the same accuracies at the same samples, eval after eval). A sequence of fewer than
  DISTINCT_EVALS different accuracies is one only with the same eval times after run_start."""
  groups: dict[tuple, list[str]] = {}
  for log in logs:
    seq = eval_sequence(log)
    if not seq: continue
    timed = len({acc for _, acc in seq}) < DISTINCT_EVALS   # flat or short: the times must match too
    groups.setdefault((seq, eval_offsets(log) or id(log)) if timed else (seq,), []).append(names[id(log)])
  same = [(len(key[0]), v) for key, v in groups.items() if len(v) > 1]
  return [Row("FAIL", "copies", system, f"{' and '.join(v[:4])}{f' and {len(v) - 4} more' if len(v) > 4 else ''} "
              f"have the same {n} eval(s) (epoch_num and eval_accuracy, in order): one run logged {len(v)} times "
              "with other seeds or times, not separate runs") for n, v in same]


def check_scaling(logs: list[MLPerfLog], bert: Path, system: str, *, division: str | None, ruleset: str,
                  shipped: float | None) -> tuple[list[Row], float]:
  """scaling.json's factor (`shipped`, None without the file) against the one mlperf-logging's rcp_checker writes.
  Returns the rows and the factor to score with (the recomputed one when it can be recomputed)."""
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
  said = f"{name} says {factor:.6g}" if shipped is not None else f"{name} is missing (factor 1)"
  return [Row("FAIL", "scaling", system, f"{said}; mlperf-logging's rcp_checker gives {want:.6g} ({how}): the factor "
              "is not the submitter's to choose (rerun package_checker, which writes it)")], want

"""Copies of one run in a received submission, found up to a tolerance (mlperf_bert/audit/forged.py `check_copies`):
forged from tinycorp's real v4.1 tinybox_red result_2 (17 evals), and the real published logs beside them."""
import json
from pathlib import Path

import pytest

from mlperf_bert.audit.forged import check_copies
from mlperf_bert.audit.logs import parse_lines, read_log
from conftest import FIXTURES
from test_hostile import audit_cli, bert, find, red  # noqa: F401 (the fixture)

SRC = FIXTURES / "tinycorp-v4.1" / "results" / "tinybox_red" / "bert" / "result_2.txt"
DAY = 86_400_000


def _records(path: Path = SRC) -> list[dict]:
  return [json.loads(l.split(":::MLLOG ", 1)[1]) for l in path.read_text().splitlines() if ":::MLLOG " in l]


def _forged(i: int, *, scale: float = 1e-3, nudge: float = 1e-7, edit=None) -> list[dict]:
  """Copy i of result_2: its clock moved by i days, each time after run_start scaled by 1 + i*scale (rounded to the
  ms, as a clock writes), each eval_accuracy nudged by i*nudge, another seed; `edit(record)` after that."""
  recs = _records()
  start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
  out = []
  for r in recs:
    r = {**r, "time_ms": round(start + i * DAY + (r["time_ms"] - start) * (1 + i * scale))}
    if r["key"] == "eval_accuracy": r["value"] += i * nudge
    if r["key"] == "seed": r["value"] = 1000 + i
    out.append(edit(r) if edit else r)
  return out


def _log(recs: list[dict]):
  return parse_lines([":::MLLOG " + json.dumps(r) for r in recs])


def _copies(logs: list, received: bool = True):
  return check_copies(logs, {id(l): f"result_{i}.txt" for i, l in enumerate(logs)}, "tinybox_red", received)


def test_nudged_and_scaled_copies_get_a_copies_row():
  """One run copied 10 times, clocks moved by days, times after run_start scaled by 1+i*1e-3, accuracies nudged by
  i*1e-7 (was: no row, PASS): one row naming all ten and how they are alike; a WARN in a received submission, as
  every copy not moved as a block is (a trainer that ignores its seed), a FAIL in a workflow tree."""
  logs = [_log(_forged(i)) for i in range(10)]
  [row] = _copies(logs)
  assert row.status == "WARN" and row.check == "copies", row
  assert row.reason.startswith("result_0.txt and result_1.txt and result_2.txt and result_3.txt and 6 more have 17 "
                               "evals at the same epoch_num, accuracies within 1e-4 at all 17 evals (up to 9e-07 "
                               "apart), times after run_start proportional (x1.000-x1.009), clocks up to 9.0 days "
                               "apart"), row.reason
  assert row.reason.endswith("one run logged 10 times, not separate runs")
  assert [r.status for r in _copies(logs, received=False)] == ["FAIL"]


@pytest.mark.parametrize("how", ["accuracy 2e-4 apart", "one eval's time 1 % off", "5 evals"])
def test_what_is_not_alike_within_the_tolerance_is_no_copy(how):
  """Accuracies further apart than 1e-4 at one eval, times that are not proportional at one eval, or too few evals
  for the tolerance (distinct published runs come within it with 3 to 5 evals): no row."""
  recs = _forged(1)
  evals = [r for r in recs if r["key"] == "eval_accuracy"]
  if how == "accuracy 2e-4 apart":
    evals[5]["value"] += 2e-4
  elif how == "one eval's time 1 % off":
    start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
    evals[5]["time_ms"] = round(start + (evals[5]["time_ms"] - start) * 1.01)
  cut = lambda rs: rs[:rs.index(next(r for r in rs if r["key"] == "eval_accuracy" and r["metadata"]["epoch_num"]
                                     == [e for e in rs if e["key"] == "eval_accuracy"][5]["metadata"]["epoch_num"]))]
  a, b = (_records(), recs) if how != "5 evals" else (cut(_records()), cut(recs))
  assert _copies([_log(a), _log(b)]) == []


def test_a_copy_with_its_clock_moved_and_init_start_plus_1_ms_fails():
  """A copy whose every event keeps its time after run_start but init_start's, moved by 1 ms, with the clock moved by
  a day (was: a WARN "at other times"): FAIL in a received submission as documented. 50 ms off (beyond
  MOVED_SLACK_MS, and closer than any two distinct published runs, 78 ms): the copy is a WARN there."""
  init = lambda ms: lambda r: {**r, "time_ms": r["time_ms"] + ms} if r["key"] == "init_start" else r
  logs = [_log(_forged(0)), _log(_forged(1, scale=0, nudge=0, edit=init(1)))]
  [row] = _copies(logs)
  assert row.status == "FAIL" and "result_0.txt and result_1.txt have the same 17 eval(s)" in row.reason, row
  assert "every event at the same time after run_start (within 1 ms), the clock moved by 86,400 s: time stamps " \
         "edited so that one run looks like several" in row.reason, row
  [row] = _copies([_log(_forged(0)), _log(_forged(1, scale=0, nudge=1e-7, edit=init(1)))])
  assert row.status == "FAIL" and "(within 1 ms), the clock moved by 86,400 s" in row.reason, row
  [row] = _copies([_log(_forged(0)), _log(_forged(1, scale=0, nudge=0, edit=init(50)))])
  assert row.status == "WARN" and "at other times" in row.reason, row


def test_real_published_logs_are_no_copies_but_tinycorps_known_one():
  """Every real log fixture (MLCommons v0.7 ... v5.0, tinycorp's v4.1 and v5.0): no copies row, but tinycorp's v4.1
  tinybox_green result_8 = result_3 (seed aside, byte for byte), which MLCommons accepted: a WARN, as before."""
  found = {}
  for bert_dir in sorted([*(FIXTURES / "mlcommons").glob("*/*/results/*/bert"),
                          *(FIXTURES / "tinycorp-v4.1").glob("results/*/bert"),
                          *(FIXTURES / "tinycorp-v5.0").glob("results/*/bert")]):
    paths = sorted(bert_dir.glob("result_*.txt"))
    logs = [read_log(p) for p in paths]
    rows = check_copies(logs, {id(l): p.name for l, p in zip(logs, paths)}, bert_dir.parent.name, received=True)
    found[str(bert_dir.relative_to(FIXTURES))] = [(r.status, r.reason[:87]) for r in rows]
  assert len(found) == 13, found
  assert {k: v for k, v in found.items() if v} == {"tinycorp-v4.1/results/tinybox_green/bert": [
    ("WARN", "result_3.txt and result_8.txt have the same 16 eval(s) (epoch_num and eval_accuracy, in")]}, found


def test_nudged_copies_in_a_received_submission_are_a_copies_row(red):
  """The real CLI on tinybox_red with its ten logs replaced by nudged, scaled copies of result_2 (was: PASS, no
  copies row): one copies WARN naming the ten."""
  for i in range(10):
    (bert(red) / f"result_{i}.txt").write_text("".join(":::MLLOG " + json.dumps(r) + "\n" for r in _forged(i)))
  rows, _ = audit_cli(red, expect_rc=0)
  [row] = find(rows, "copies", "WARN")
  assert "have 17 evals at the same epoch_num, accuracies within 1e-4 at all 17 evals" in row["reason"], row
  assert "one run logged 10 times" in row["reason"]


def test_the_tolerances_are_calibrated_on_every_published_pair():
  """tests/fixtures/copies-calibration.json (tools/calibrate_copies.py over training_results v0.7 ... v5.0): no
  published system gets a copies FAIL, and the one copies row is tinycorp's known copy; no two distinct runs are alike
  within the tolerances; with 3 evals distinct runs come within ACCURACY_TOL (hence NEAR_MIN_EVALS), with
  NEAR_MIN_EVALS or more the closest is five times further; distinct runs with the same events keep them more than
  five times MOVED_SLACK_MS apart."""
  from mlperf_bert.audit.forged import ACCURACY_TOL, MOVED_SLACK_MS, NEAR_MIN_EVALS
  t = json.loads((FIXTURES / "copies-calibration.json").read_text())
  assert t["meta"]["systems"] >= 340 and list(t["meta"]["rounds"]) == ["0.7", "1.0", "1.1", "2.0", "2.1", "3.0",
                                                                       "3.1", "4.0", "4.1", "5.0"]
  assert not [r for r in t["copies_rows"] if r["status"] == "FAIL"], t["copies_rows"]
  assert [(r["system"], r["status"]) for r in t["copies_rows"]] == [("v4.1/tinycorp/tinybox_green", "WARN")]
  assert t["alike_distinct_pairs"] == [] and t["distinct_eval_pairs"] >= 2700
  assert t["closest_by_evals"]["3"]["max_accuracy_diff"] < ACCURACY_TOL
  assert all(p["max_accuracy_diff"] > ACCURACY_TOL for n, p in t["closest_by_evals"].items()
             if int(n.rstrip("+")) >= NEAR_MIN_EVALS)
  assert t["closest_with_near_min_evals"]["max_accuracy_diff"] >= 5 * ACCURACY_TOL
  assert t["closest_same_events"]["max_ms"] >= 5 * MOVED_SLACK_MS

"""The MLPerf log reader on tinycorp's published v4.1 BERT logs and on damaged input."""
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker.mlp_parser import parse_file
from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average

from mlperf_bert.audit.logs import (BERT_TARGET_ACCURACY, normalize_ruleset, olympic_score, parse_lines, read_log)
from conftest import FIXTURES

DATA = FIXTURES / "tinycorp-v4.1" / "results"
GREEN = sorted((DATA / "tinybox_green" / "bert").glob("result_*.txt"))
RED = sorted((DATA / "tinybox_red" / "bert").glob("result_*.txt"))


def test_reads_every_tinycorp_log_like_mlperf_loggings_parser():
  for f in GREEN + RED:
    log = read_log(f)
    theirs, errors = parse_file(str(f), ruleset="4.1.0")
    assert not errors and not log.malformed
    assert [(e.key, e.time_ms) for e in log.events] == [(l.key, l.timestamp) for l in theirs]


def test_helpers_on_a_converged_log():
  log = read_log(DATA / "tinybox_green" / "bert" / "result_0.txt")
  assert (log.benchmark, log.division, log.org, log.platform) == ("bert", "closed", "tinycorp", "tinybox_green")
  assert log.seed == 6505 and log.status == "success" and log.converged
  assert log.run_minutes == pytest.approx((1728538316186 - 1728518110874) / 60000)
  assert log.init_minutes == pytest.approx((1728518095273 - 1728516968917) / 60000)
  assert log.final_eval_accuracy == pytest.approx(0.7208575420416825)
  assert log.eval_samples == 10002 and log.global_batch_size == 66
  assert log.nonconvergence_reason() is None


def test_non_converged_log_green_result_2():
  log = read_log(DATA / "tinybox_green" / "bert" / "result_2.txt")
  assert log.status is None and not log.converged and log.run_minutes is None
  assert log.final_eval_accuracy == pytest.approx(0.7196774663650568)
  assert log.final_eval_accuracy < BERT_TARGET_ACCURACY
  assert log.nonconvergence_reason() == "final eval_accuracy 0.7197 < target 0.72, no run_stop"


def test_malformed_lines_are_skipped_counted_and_named():
  lines = [
    'plain trainer output\n',
    ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "seed", "value": 3, "metadata": {}}\n',
    ':::MLLOG {"time_ms": 2, "key": "run_start"\n',                        # truncated JSON
    ':::MLLOG ["a", "list"]\n',                                              # not an object
    ':::MLLOG {"time_ms": 3, "value": null, "metadata": {}}\n',              # no key
    ':::MLLOG {"time_ms": "soon", "key": "x", "value": 1, "metadata": {}}\n',  # non-numeric time
    'prefix :::MLLOG {"time_ms": 4, "key": "init_start", "value": null, "metadata": {}}\n',  # token mid-line is fine
  ]
  log = parse_lines(lines, "x.log")
  assert [e.key for e in log.events] == ["seed", "init_start"]
  assert [m.lineno for m in log.malformed] == [3, 4, 5, 6]
  assert "not valid JSON" in str(log.malformed[0]) and "no 'key'" in str(log.malformed[2])
  assert log.other_lines == [(1, "plain trainer output")]
  assert log.seed == 3 and log.run_minutes is None and log.status is None


def test_olympic_score_matches_the_result_summarizer():
  for runs in ([5.0, 1.0, 3.0, 2.0, 4.0, 9.0, 7.0, 6.0, 8.0, 10.0], [5.0, 1.0, None, 2.0, 4.0, 9.0, 7.0, 6.0, 8.0, 3.0]):
    ok = [r for r in runs if r is not None]
    assert olympic_score(runs) == pytest.approx(_compute_olympic_average(list(ok), len(runs) - len(ok), 1))
  assert olympic_score([1.0, None, None, 2.0]) is None


def test_normalize_ruleset():
  assert normalize_ruleset("4.1") == "4.1.0" and normalize_ruleset("v5.0") == "5.0.0"
  assert normalize_ruleset("5.0.0") == "5.0.0"

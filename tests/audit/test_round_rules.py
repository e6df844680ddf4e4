"""A round's logs are checked with the rules of its own release (resources/mlperf-rules, tools/record_round_rules.py):
a published v2.1 log that today's training_2.1.0 configs reject (they ask `opt_lamb_epsilon` since mlcommons/logging
d82b94d, after the v2.1 results) passes the real compliance checker under the rules as at the v2.1 results, and the
audit's ruleset row names the rules and what today's ask instead; a v1.1 log without `weights_initialization` passes
as training 1.1.0's release checker let it. The logs are MLCommons' own, unmodified: NVIDIA's dgxa100_ngc22.09_pytorch
result_0.txt of training_results_v2.1 (commit 158189d4) and dgxa100_ngc21.09_pytorch of training_results_v1.1
(commit ebe92f81)."""
import hashlib, json, shutil

import pytest

from mlperf_bert import cli

from mlperf_bert.audit.log_checks import check_compliance, check_ruleset
from mlperf_bert.audit.org import check_package
from mlperf_bert.audit.forged import check_clock
from mlperf_bert.audit.logs import read_log
from mlperf_bert.audit.mlperf_tools import compliance_check, rcp_max_speedup
from mlperf_bert.audit.round_rules import ROUNDS_MANIFEST, RULES_DIR, differing, round_rules
from mlperf_bert.audit.rows import Audit
from conftest import FIXTURES

LOG = FIXTURES / "mlcommons" / "v2.1" / "NVIDIA" / "results" / "dgxa100_ngc22.09_pytorch" / "bert" / "result_0.txt"
V11 = FIXTURES / "mlcommons" / "v1.1" / "NVIDIA"
V11_LOG = V11 / "results" / "dgxa100_ngc21.09_pytorch" / "bert" / "result_0.txt"


def test_a_v21_log_passes_under_its_rounds_rules_and_the_row_names_them():
  ok_today, msgs = compliance_check(LOG, "2.1.0")                # the installed checker, its own configs
  assert not ok_today and any("opt_lamb_epsilon" in m for m in msgs), msgs
  rows = check_compliance(read_log(LOG), "dgxa100/result_0.txt", "2.1.0")   # the round's: 2.1.0-rc3
  assert [r.status for r in rows] == ["PASS"], rows
  audit = Audit(str(LOG.parent), "org", "2.1.0")
  check_ruleset(audit, "2.1.0")
  reason = audit.rows[0].reason
  assert audit.rows[0].status == "PASS" and "the round's rules: mlcommons/logging 35004c4 (2.1.0, 2022-11-01), as " \
    "at the v2.1 results (2022-11-08)" in reason, reason
  assert "today's ask opt_lamb_epsilon and no longer ask opt_epsilon" in reason, reason


def test_the_kept_rules_are_whole_and_name_their_source():
  manifest = json.loads(ROUNDS_MANIFEST.read_text())
  assert manifest["source"] == "https://github.com/mlcommons/logging"
  assert manifest["rounds"]["2.1.0"]["tag"] == "2.1.0" and manifest["rounds"]["2.1.0"]["commit"].startswith("35004c4")
  for ruleset, r in manifest["rounds"].items():
    rules = round_rules(ruleset)
    assert rules is not None and len(r["commit"]) == 40 and (RULES_DIR / ruleset / "LICENSE.md").is_file()
    assert "Apache License" in (RULES_DIR / ruleset / "LICENSE.md").read_text()
    assert all(rules.kept(f).is_file() for f in r["files"]) and f"compliance_checker/training_{ruleset}/common.yaml" \
      in r["files"]
  # v2.1's own closed_bert.yaml asks opt_epsilon (the kept bytes, as at the tag)
  kept = round_rules("2.1.0").kept("compliance_checker/training_2.1.0/closed_bert.yaml").read_text()
  assert "NAME:  opt_epsilon" in kept and "opt_lamb_epsilon" not in kept
  assert "compliance_checker/training_2.1.0/closed_bert.yaml" in differing(round_rules("2.1.0"))
  data = LOG.read_bytes()   # the published blob, as git names it in training_results_v2.1
  assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == "05388e7ff2f6c2b8f856a71d42c7250df30e42bc"
  assert rcp_max_speedup() >= 1.0


def test_a_v11_log_passes_as_its_rounds_checker_let_it_and_package_checker_is_read_so():
  ok_today, msgs = compliance_check(V11_LOG, "1.1.0")            # no weights_initialization: today's checker fails it
  assert not ok_today and any("weights_initialization" in m for m in msgs), msgs
  rows = check_compliance(read_log(V11_LOG), "dgxa100_ngc21.09_pytorch/result_0.txt", "1.1.0")
  assert [r.status for r in rows] == ["PASS"] and "can be ignored for 1.1.0" in rows[0].reason, rows
  # package_checker runs today's checker code: its "do not comply" for such a system is a WARN, for another a FAIL
  audit = Audit("NVIDIA", "org", "1.1.0", rows=list(rows))
  check_package(audit, "NVIDIA", "1.1.0", False, {"dgxa100_ngc21.09_pytorch": [
    "10 files do not comply, directory cannot be accepted"], "other": ["10 files do not comply, directory cannot be "
                                                                       "accepted"]})
  got = {r.subject: r.status for r in audit.rows if r.check == "package_checker"}
  assert got == {"dgxa100_ngc21.09_pytorch": "WARN", "other": "FAIL"}, audit.rows


@pytest.mark.full  # the real tools on an org again (test_official runs that path on CI): ~10 CPU s
def test_an_accepted_v11_system_has_no_fail_under_its_rounds_rules(tmp_path):
  shutil.copytree(V11, tmp_path / "NVIDIA")
  out = tmp_path / "audit.json"
  cli.main(["audit", str(tmp_path / "NVIDIA"), "--ruleset", "1.1.0", "--json", str(out)])
  data = json.loads(out.read_text())
  assert not [r for r in data["rows"] if r["status"] == "FAIL"], [r for r in data["rows"] if r["status"] == "FAIL"]
  assert data["scores"]["NVIDIA/dgxa100_ngc21.09_pytorch"]["score"] is not None
  assert [r for r in data["rows"] if r["check"] == "ruleset" and "mlcommons/logging beaf26d" in r["reason"]]


def test_an_unclocked_event_off_the_clock_is_a_warn_a_clocked_one_a_fail(tmp_path):
  """Intel's accepted v2.1 16-nodes-SPR-pytorch-open result_9.txt begins with a cache_clear at time_ms
  16655441572299 (a digit too many); no score or check reads it. The same time on run_stop is an edit."""
  line = ':::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "{k}", "key": "{key}", "value": {v}, "metadata": {{}}}}'
  def log(stop_ms):
    p = tmp_path / f"result_{stop_ms}.txt"
    p.write_text("\n".join([line.format(t=16655441572299, k="POINT_IN_TIME", key="cache_clear", v="true"),
                            line.format(t=1665544157229, k="INTERVAL_START", key="run_start", v="null"),
                            line.format(t=stop_ms, k="INTERVAL_END", key="run_stop", v="null")]) + "\n")
    return check_clock(read_log(p), p.name)
  rows = log(1665544257229)
  assert [r.status for r in rows] == ["WARN"] and "line 1 cache_clear at time_ms 1.66554e+13" in rows[0].reason, rows
  assert sorted(r.status for r in log(16655442572299)) == ["FAIL", "WARN"]

"""A round's logs are checked with the rules of its own release (resources/mlperf-rules, tools/record_round_rules.py):
a published v2.1 log that today's training_2.1.0 configs reject (they ask `opt_lamb_epsilon` since mlcommons/logging
d82b94d, after the v2.1 results) passes the real compliance checker under 2.1.0-rc3's, and the audit's ruleset row
names the rules and what today's ask instead. The log is NVIDIA's dgxa100_ngc22.09_pytorch result_0.txt from
MLCommons' training_results_v2.1 (commit 158189d4), unmodified."""
import hashlib, json

from mlperf_bert.audit.log_checks import check_compliance, check_ruleset
from mlperf_bert.audit.logs import read_log
from mlperf_bert.audit.mlperf_tools import compliance_check, rcp_max_speedup
from mlperf_bert.audit.round_rules import ROUNDS_MANIFEST, RULES_DIR, differing, round_rules
from mlperf_bert.audit.rows import Audit
from conftest import FIXTURES

LOG = FIXTURES / "mlcommons" / "v2.1" / "NVIDIA" / "results" / "dgxa100_ngc22.09_pytorch" / "bert" / "result_0.txt"


def test_a_v21_log_passes_under_its_rounds_rules_and_the_row_names_them():
  ok_today, msgs = compliance_check(LOG, "2.1.0")                # the installed checker, its own configs
  assert not ok_today and any("opt_lamb_epsilon" in m for m in msgs), msgs
  rows = check_compliance(read_log(LOG), "dgxa100/result_0.txt", "2.1.0")   # the round's: 2.1.0-rc3
  assert [r.status for r in rows] == ["PASS"], rows
  audit = Audit(str(LOG.parent), "org", "2.1.0")
  check_ruleset(audit, "2.1.0")
  reason = audit.rows[0].reason
  assert audit.rows[0].status == "PASS" and "2.1.0-rc3's rules (the round's release, dd3a014" in reason, reason
  assert "today's ask opt_lamb_epsilon and no longer ask opt_epsilon" in reason, reason


def test_the_kept_rules_are_whole_and_name_their_source():
  manifest = json.loads(ROUNDS_MANIFEST.read_text())
  assert manifest["source"] == "https://github.com/mlcommons/logging"
  assert manifest["rounds"]["2.1.0"]["tag"] == "2.1.0-rc3"
  for ruleset, r in manifest["rounds"].items():
    rules = round_rules(ruleset)
    assert rules is not None and len(r["commit"]) == 40 and (RULES_DIR / r["tag"] / "LICENSE.md").is_file()
    assert "Apache License" in (RULES_DIR / r["tag"] / "LICENSE.md").read_text()
    assert all(rules.kept(f).is_file() for f in r["files"]) and f"compliance_checker/training_{ruleset}/common.yaml" \
      in r["files"]
  # v2.1's own closed_bert.yaml asks opt_epsilon (the kept bytes, as at the tag)
  kept = round_rules("2.1.0").kept("compliance_checker/training_2.1.0/closed_bert.yaml").read_text()
  assert "NAME:  opt_epsilon" in kept and "opt_lamb_epsilon" not in kept
  assert "compliance_checker/training_2.1.0/closed_bert.yaml" in differing(round_rules("2.1.0"))
  data = LOG.read_bytes()   # the published blob, as git names it in training_results_v2.1
  assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == "05388e7ff2f6c2b8f856a71d42c7250df30e42bc"
  assert rcp_max_speedup() >= 1.0

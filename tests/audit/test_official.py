"""The audit scores real published BERT systems as MLCommons does: scaling.json's factor, log names that
package_checker accepts (result_*.txt), and a system accepted under olympic scoring with one non-compliant run.

The logs are MLCommons' own (tests/fixtures/mlcommons/, Apache-2.0, see ATTRIBUTION.md); the expected figures are
the ones result_summarizer prints for them."""
import json, math, re, shutil
from pathlib import Path

import pytest

from mlperf_bert import cli
from mlperf_bert.audit.org import audit_submission
from conftest import FIXTURES

DATA = FIXTURES / "mlcommons"


def copy_org(tmp_path, version, org) -> Path:
  dest = tmp_path / org
  shutil.copytree(DATA / version / org, dest)
  return dest


def rows(audit, check, status=None, subject=""):
  return [r for r in audit.rows if r.check == check and (status is None or r.status == status) and subject in r.subject]


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_scaling_factor_applied_and_equal_to_result_summarizer(tmp_path):
  org = copy_org(tmp_path, "v5.0", "Dell")
  system = "1xXE9712x4GB200"
  factor = json.loads((org / "results" / system / "bert" / "scaling.json").read_text())["scaling_factor"]
  audit = audit_submission(org, "5.0.0")
  assert not audit.failed, [r for r in audit.rows if r.status == "FAIL"]
  s = audit.scores[f"Dell/{system}"]
  assert s["scaling_factor"] == factor and factor > 1.03
  assert s["score"] == s["olympic_mean"] * factor
  assert math.isclose(s["score"], s["result_summarizer"], rel_tol=1e-9)  # equal, not within 0.005 min
  assert round(s["score"], 2) == 6.31 and round(s["olympic_mean"], 2) != 6.31  # the published score
  [score] = rows(audit, "score", "PASS")
  assert "scaling factor 1.03541" in score.reason
  assert rows(audit, "scaling", "PASS") and rows(audit, "package_checker", "PASS")


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_timestamped_log_names_are_logs(tmp_path):
  org = copy_org(tmp_path, "v4.1", "Lambda")
  system = "lambda_1cc_n2_H100-SXM-80GB_ngc24.04_nemo"
  names = sorted(p.name for p in (org / "results" / system / "bert").glob("result_*.txt"))
  assert len(names) == 10 and all(re.fullmatch(r"result_\d{21}_\d\d\.txt", n) for n in names)
  audit = audit_submission(org, "4.1.0")
  assert not audit.failed, [r for r in audit.rows if r.status == "FAIL"]
  assert [r.reason for r in rows(audit, "log count")] == ["10 result logs"]
  assert not rows(audit, "file names") and len(rows(audit, "compliance", "PASS")) == 10
  s = audit.scores[f"Lambda/{system}"]
  assert round(s["score"], 2) == 3.29 and math.isclose(s["score"], s["result_summarizer"], rel_tol=1e-9)
  assert [v.file for v in audit.runs] == [f"{system}/{n}" for n in names]


def test_non_compliant_run_dropped_under_olympic_scoring(tmp_path, capsys):
  """tinycorp v5.0 tinybox_green: result_2's init took 32.3 min; package_checker accepts the system ("1 file does
  not comply, accepting this under olympic scoring") and result_summarizer scores it 213.60."""
  org = copy_org(tmp_path, "v5.0", "tinycorp")
  out_json = tmp_path / "audit.json"
  assert cli.main(["audit", str(org), "--ruleset", "5.0.0", "--json", str(out_json)]) == 0
  out = capsys.readouterr().out
  assert "Traceback" not in out and "-> PASS" in out
  data = json.loads(out_json.read_text())
  r2 = [r for r in data["rows"] if r["subject"] == "tinybox_green/result_2.txt" and r["status"] != "PASS"]
  assert {(r["check"], r["status"]) for r in r2} >= {("compliance", "DROP"), ("init time", "DROP")}
  assert any("32.29 min" in r["reason"] for r in r2)
  [v] = [v for v in data["runs"] if v["file"] == "tinybox_green/result_2.txt"]
  assert v["verdict"].startswith("dropped") and "init took 32.29 min" in v["verdict"]
  s = data["scores"]["tinycorp/tinybox_green"]
  assert round(s["score"], 2) == 213.60 and math.isclose(s["score"], s["result_summarizer"], rel_tol=1e-9)
  assert [r["status"] for r in data["rows"] if r["check"] == "package_checker"] == ["PASS"]


def test_scaling_json_absent_or_another_factor_is_scored_as_mlcommons_does(tmp_path):
  """Dell's factor is the rcp_checker's. Without the file, result_summarizer scores with 1 and so does the audit,
  with a WARN naming both; a factor an rcp_checker writes (1 .. the largest BERT RCP speedup) is scored as the file
  says, with a WARN; one no rcp_checker writes (below 1, above that bound) is a FAIL scored with the recomputed one."""
  from mlperf_bert.audit.forged import check_scaling
  from mlperf_bert.audit.logs import read_log
  bert = DATA / "v5.0" / "Dell" / "results" / "1xXE9712x4GB200" / "bert"
  logs = [read_log(p) for p in sorted(bert.glob("result_*.txt"))]
  scaling = lambda shipped: check_scaling(logs, bert, "1xXE9712x4GB200", division="closed", ruleset="5.0.0",
                                          shipped=shipped)
  [row], used = scaling(None)
  assert row.status == "WARN" and used == 1.0
  assert row.reason.startswith("scaling.json absent: scored with 1 as MLCommons does; rcp_checker would give 1.03541 (")
  [row], used = scaling(1.01)
  assert row.status == "WARN" and used == 1.01 and "scored with it as MLCommons does" in row.reason
  for shipped, said in ((0.5, "scaling.json says 0.5"), (1.2, "scaling.json says 1.2")):
    [row], used = scaling(shipped)
    assert row.status == "FAIL" and math.isclose(used, 1.0354072598111361, rel_tol=1e-12)
    assert f"results/1xXE9712x4GB200/bert/{said}; mlperf-logging's rcp_checker gives 1.03541" in row.reason
    assert "no rcp_checker writes a factor below 1 or above 1.066" in row.reason


# published systems the audit once FAILed though MLCommons accepted them (tests/fixtures/audit-calibration.json has
# every system); their logs are MLCommons' own, unmodified: (round, ruleset, {org/system: the findings expected})
ACCEPTED = [
  ("v0.7", "0.7.0", {"Google/tpu-v4-16-TF": [   # submission_* lines appended at time_ms 0, no seed, no RCP in 0.7
    ("WARN", "times", "result_0.txt", "5 event(s) at time_ms 0, off the run's clock: line 41 submission_platform"),
    ("WARN", "seed", "result_0.txt", "no integer `seed` event"),
    ("SKIP", "rcp", "tpu-v4-16-TF", "training 0.7.0 has no BERT RCPs")]}),
  ("v1.0", "1.0.0", {
    "Graphcore/ipu-pod16-POPART-closed": [      # no scaling.json: scored with 1, as result_summarizer scores it
      ("WARN", "scaling", "ipu-pod16-POPART-closed",
       "scaling.json absent: scored with 1 as MLCommons does; rcp_checker would give 1.01856")],
    "Supermicro/SYS-420GP-TNAR+": [             # "key": "" records (its logger's), epochs counted in samples
      ("PASS", "parse", "result_1.txt", ":::MLLOG events; 95 other line(s)"),
      ("PASS", "rcp", "SYS-420GP-TNAR+", "epochs from train_samples")]}),
  ("v3.0", "3.0.0", {"Intel/8-nodes-SPR-pytorch": [   # a cache_clear by clean.sh at time_ms 0 before each run
    ("WARN", "times", "result_0.txt", "1 event(s) at time_ms 0, off the run's clock: line 1 cache_clear (written by "
     "clean.sh)")]}),
]


@pytest.mark.slow  # runs the real tools: tens of seconds on 2 cores
@pytest.mark.parametrize("version,ruleset,systems", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_accepted_systems_the_audit_once_failed_pass_with_the_official_score(tmp_path, version, ruleset, systems):
  table = {(r["org"], r["system"]): r for r in json.loads((FIXTURES / "audit-calibration.json").read_text())["rows"]
           if r["round"] == version[1:]}
  shutil.copytree(DATA / version, tmp_path / version)
  out = tmp_path / "audit.json"
  assert cli.main(["audit", str(tmp_path / version), "--ruleset", ruleset, "--json", str(out)]) == 0
  data = json.loads(out.read_text())
  assert not [r for r in data["rows"] if r["status"] == "FAIL"]
  assert set(data["scores"]) == set(systems)
  for key, expected in systems.items():
    s, official = data["scores"][key], table[tuple(key.split("/"))]["summarizer_score"]
    assert official is not None and math.isclose(s["score"], official, rel_tol=1e-9), (key, s, official)
    assert math.isclose(s["result_summarizer"], official, rel_tol=1e-9)
    system = key.split("/")[1]
    for status, check, subject, text in expected:
      assert [r for r in data["rows"] if r["status"] == status and r["check"] == check
              and r["subject"] in (system, f"{system}/{subject}") and text in r["reason"]], (key, status, check, text)

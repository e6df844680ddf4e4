"""`python -m mlperf_bert audit` on tinycorp's real v4.1 submission and on damaged copies of it.

The expected verdicts come from mlperf-logging's own result_summarizer, run here independently."""
import csv, hashlib, json, re, shutil, subprocess, sys
from pathlib import Path

import pytest

from mlperf_bert import cli
from mlperf_bert.audit import Audit, Row, audit_submission, detect_kind

DATA = Path(__file__).parent / "data" / "tinycorp-v4.1"


def make_pkg(tmp_path, systems=("tinybox_green", "tinybox_red")) -> Path:
  org = tmp_path / "tinycorp"
  for s in systems:
    shutil.copytree(DATA / "results" / s, org / "results" / s)
    (org / "systems").mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "systems" / f"{s}.json", org / "systems" / f"{s}.json")
  return org


def tree_digest(root: Path) -> dict:
  return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def summarizer_scores(org: Path, ruleset: str, tmp: Path) -> dict:
  """mlperf-logging's result_summarizer, run on its own copy: {system dir: score}."""
  work = tmp / "summarizer"
  shutil.copytree(org, work / org.name)
  subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(work / org.name), "training", ruleset,
                  "--csv", str(work / "s.csv")], cwd=work, check=True, capture_output=True)
  with open(work / "s.csv") as f:
    return {re.search(r"/systems/(.+)\.json", r["details_url"]).group(1): float(r["bert"]) for r in csv.DictReader(f)}


def rows(audit, check=None, status=None, subject=None):
  return [r for r in audit.rows if (check is None or r.check == check) and (status is None or r.status == status)
          and (subject is None or subject in r.subject)]


def test_tinycorp_v41_official_verdicts(tmp_path):
  org = make_pkg(tmp_path / "pkg")
  before = tree_digest(tmp_path / "pkg")
  audit = audit_submission(org, "4.1.0")
  assert tree_digest(tmp_path / "pkg") == before, "the audit wrote into the audited tree"
  assert not audit.failed, [r for r in audit.rows if r.status == "FAIL"]
  official = summarizer_scores(org, "4.1.0", tmp_path)
  assert round(official["tinybox_green"], 2) == 360.52 and round(official["tinybox_red"], 2) == 397.33
  for system, score in official.items():
    s = audit.scores[f"tinycorp/{system}"]
    assert round(s["score"], 2) == round(score, 2) and s["result_summarizer"] == pytest.approx(score)
  r2 = next(v for v in audit.runs if v.file == "tinybox_green/result_2.txt")
  assert r2.verdict.startswith("dropped") and "0.7197" in r2.verdict and "no run_stop" in r2.verdict
  assert [r.status for r in rows(audit, "run_stop", subject="tinybox_green/result_2.txt")] == ["DROP"]
  assert sum(v.verdict == "scored" for v in audit.runs) == 16
  assert all(r.status == "PASS" for r in rows(audit, "rcp") + rows(audit, "package_checker") + rows(audit, "score"))
  # tinycorp logged eval_samples 10002 (accepted by MLCommons): a warning, not a failure
  assert {r.status for r in rows(audit, "eval_samples")} == {"WARN"}


def test_cli_exit_codes_and_ruleset_5_1_has_no_bert(tmp_path, capsys):
  org = make_pkg(tmp_path, systems=("tinybox_red",))
  assert cli.main(["audit", str(org), "--ruleset", "5.0.0"]) == 0
  out = capsys.readouterr().out
  assert "397.33" in out and "-> PASS" in out
  assert cli.main(["audit", str(org), "--ruleset", "5.1"]) == 1
  out = capsys.readouterr().out
  assert re.search(r"FAIL\s+ruleset.*BERT is not a benchmark of MLPerf Training 5\.1\.0", out)
  assert cli.main(["audit", str(org), "--strict"]) == 1  # eval_samples 10002 fails under --strict
  assert cli.main(["audit", str(tmp_path / "missing")]) == 2


def _edit(path: Path, old: str, new: str, count: int = 1):
  text = path.read_text()
  assert old in text
  path.write_text(text.replace(old, new, count))


@pytest.fixture
def green(tmp_path):
  return make_pkg(tmp_path, systems=("tinybox_green",))


def _failing(org, capsys, ruleset="4.1.0"):
  """Run the CLI (exit 1, no traceback) and read back its --json rows."""
  out_json = org.parent / "audit.json"
  assert cli.main(["audit", str(org), "--ruleset", ruleset, "--json", str(out_json)]) == 1
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err and "-> FAIL" in out.out
  data = json.loads(out_json.read_text())
  audit = Audit(data["path"], data["kind"], data["ruleset"], rows=[Row(**r) for r in data["rows"]])
  return audit, [r for r in audit.rows if r.status == "FAIL"]


def test_malformed_lines(green, capsys):
  log = green / "results/tinybox_green/bert/result_0.txt"
  text = log.read_text().splitlines(keepends=True)
  text.insert(3, ':::MLLOG {"namespace": "", "time_ms": 17285169\n')
  text.insert(6, ':::MLLOG {"time_ms": 1728516968782, "value": null, "metadata": {}}\n')
  log.write_text("".join(text))
  audit, fails = _failing(green, capsys)
  parse = rows(audit, "parse", "FAIL", "result_0.txt")
  assert parse and "2 malformed" in parse[0].reason and "line 4" in parse[0].reason and "line 7" in parse[0].reason
  assert rows(audit, "compliance", "FAIL", "result_0.txt")


def test_missing_system_json(green, capsys):
  (green / "systems/tinybox_green.json").unlink()
  audit, fails = _failing(green, capsys)
  assert any(r.check == "system description" and "missing systems/tinybox_green.json" in r.reason for r in fails)


@pytest.mark.parametrize("n", [9, 11])
def test_wrong_log_count(green, capsys, n):
  bert = green / "results/tinybox_green/bert"
  if n == 9:
    (bert / "result_9.txt").unlink()
  else:
    shutil.copy(DATA / "results/tinybox_red/bert/result_0.txt", bert / "result_10.txt")
  audit, fails = _failing(green, capsys)
  assert any(r.check == "log count" and r.reason.startswith(f"{n} result logs") for r in fails)
  assert rows(audit, "rcp")[0].status == "SKIP"


def test_duplicate_seeds(green, capsys):
  _edit(green / "results/tinybox_green/bert/result_1.txt", '"key": "seed", "value": 20151', '"key": "seed", "value": 6505')
  audit, fails = _failing(green, capsys)
  dup = [r for r in fails if r.check == "unique seeds"]
  assert dup and "seed 6505" in dup[0].reason and "result_0.txt" in dup[0].reason and "result_1.txt" in dup[0].reason


def test_log_of_another_benchmark(green, capsys):
  _edit(green / "results/tinybox_green/bert/result_4.txt", '"key": "submission_benchmark", "value": "bert"',
        '"key": "submission_benchmark", "value": "retinanet"')
  audit, fails = _failing(green, capsys)
  assert any(r.check == "benchmark" and "result_4.txt" in r.subject and "'retinanet'" in r.reason for r in fails)


def test_detect_kind(tmp_path, green):
  assert detect_kind(green) == "org" and detect_kind(green.parent) == "orgs"
  (tmp_path / "base" / "shards").mkdir(parents=True)
  assert detect_kind(tmp_path / "base") == "basedir"

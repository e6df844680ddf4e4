"""A received submission is untrusted input: hostile copies of tinycorp's real v4.1 tinybox_red.

Each case runs the real CLI in a subprocess under an address-space limit and a timeout (the bounds docs/audit.md
states), and checks that the finding is one line naming the file, with no traceback."""
import json, os, resource, shutil, subprocess, sys
from pathlib import Path

import pytest

from mlperf_bert.audit.checks import Audit
from mlperf_bert.audit.tree import check_checksums, _Hasher
from conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
DATA = FIXTURES / "tinycorp-v4.1"
SYSTEM = "tinybox_red"
MEM_LIMIT = 3 << 30   # address space of the audit process (a 3 GB file read whole would not fit)
TIME_LIMIT = 120      # seconds per audit


@pytest.fixture
def red(tmp_path) -> Path:
  org = tmp_path / "tinycorp"
  shutil.copytree(DATA / "results" / SYSTEM, org / "results" / SYSTEM)
  (org / "systems").mkdir()
  shutil.copy(DATA / "systems" / f"{SYSTEM}.json", org / "systems" / f"{SYSTEM}.json")
  return org


def bert(org: Path) -> Path:
  return org / "results" / SYSTEM / "bert"


def _limit():
  resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def audit_cli(org: Path, expect_rc: int = 1) -> tuple[list[dict], str]:
  """The CLI on org, bounded in memory and time: (its rows, its output). No traceback, one line per row."""
  out_json = org.parent / "audit.json"
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "audit", str(org), "--ruleset", "4.1.0", "--json",
                      str(out_json)], capture_output=True, text=True, timeout=TIME_LIMIT, preexec_fn=_limit, env=env)
  out = p.stdout + p.stderr
  assert "Traceback" not in out, out[-3000:]
  assert p.returncode == expect_rc, out[-3000:]
  data = json.loads(out_json.read_text())
  assert all(len(r["reason"]) < 2000 and "\n" not in r["reason"] for r in data["rows"])
  return data["rows"], p.stdout


def find(rows, check, status, text=""):
  return [r for r in rows if r["check"] == check and r["status"] == status and text in r["subject"] + r["reason"]]


def test_symlinks_out_of_the_submission_are_not_read(red, tmp_path):
  big = tmp_path / "sparse.bin"
  with open(big, "wb") as f: f.truncate(3 << 30)   # 3 GB, sparse
  secret = tmp_path / "secret"
  secret.write_text(":::MLLOG " + "x" * 100)
  (bert(red) / "result_3.txt").unlink(); (bert(red) / "result_3.txt").symlink_to(big)
  (bert(red) / "result_4.txt").unlink(); (bert(red) / "result_4.txt").symlink_to(secret)
  rows, _ = audit_cli(red)
  for n, target in (("result_3.txt", big), ("result_4.txt", secret)):
    [r] = find(rows, "read", "FAIL", n)
    assert "symlink" in r["reason"] and str(target) in r["reason"] and "outside the submission" in r["reason"]
  assert find(rows, "package_checker", "SKIP") and not find(rows, "compliance", "FAIL", "result_3.txt")


def test_deep_json_in_a_log_and_in_the_systems_json(red):
  for name, depth in (("result_0.txt", 200_000), ("result_1.txt", 2_000)):
    with open(bert(red) / name, "a") as f:
      f.write(':::MLLOG {"key": "x", "time_ms": 1, "value": ' + "[" * depth + "]" * depth + "}\n")
  (red / "systems" / f"{SYSTEM}.json").write_text("[" * 100_000 + "]" * 100_000)
  rows, _ = audit_cli(red)
  assert "over the audit's bound of 65,536" in find(rows, "parse", "FAIL", "result_0.txt")[0]["reason"]
  assert "nested deeper than 64" in find(rows, "parse", "FAIL", "result_1.txt")[0]["reason"]
  assert "nested deeper than 64" in find(rows, "system description", "FAIL")[0]["reason"]


def test_fifo_device_and_directory_in_place_of_logs(red):
  (bert(red) / "result_4.txt").unlink(); os.mkfifo(bert(red) / "result_4.txt")
  (bert(red) / "result_5.txt").unlink(); (bert(red) / "result_5.txt").mkdir()
  (bert(red) / "result_6.txt").unlink(); (bert(red) / "result_6.txt").symlink_to("/dev/zero")
  rows, _ = audit_cli(red)
  assert "is a FIFO" in find(rows, "read", "FAIL", "result_4.txt")[0]["reason"]
  assert "is a directory" in find(rows, "read", "FAIL", "result_5.txt")[0]["reason"]
  assert "outside the submission" in find(rows, "read", "FAIL", "result_6.txt")[0]["reason"]
  assert find(rows, "rcp", "SKIP") and find(rows, "package_checker", "SKIP")


def test_ten_thousand_logs_stop_early(red):
  for i in range(10, 10_000):
    (bert(red) / f"result_{i}.txt").write_text(":::MLLOG {}\n")
  for i in range(3_000):
    (bert(red) / f"notes_{i}.md").write_text("x")
  rows, out = audit_cli(red)
  [r] = find(rows, "log count", "FAIL")
  assert "10,000 result logs" in r["reason"] and "not read" in r["reason"]
  assert not find(rows, "compliance", "PASS") and not find(rows, "seed", "FAIL")
  assert "3000 file(s) not named" in find(rows, "file names", "WARN")[0]["reason"]
  assert max(map(len, out.splitlines())) < 1000


def test_other_org_and_non_utf8_bytes_are_noted(red):
  log = bert(red) / "result_0.txt"
  text = log.read_bytes()
  assert b'"key": "submission_org", "value": "tinycorp"' in text
  log.write_bytes(text.replace(b'"key": "submission_org", "value": "tinycorp"', b'"key": "submission_org", "value": "NVIDIA"'))
  with open(bert(red) / "result_1.txt", "ab") as f: f.write(b"trainer print \xff\xfe\n")
  rows, _ = audit_cli(red, expect_rc=0)
  assert "'NVIDIA' is not the submission directory's organization 'tinycorp'" in find(rows, "org", "WARN")[0]["reason"]
  assert "not UTF-8" in find(rows, "encoding", "WARN", "result_1.txt")[0]["reason"]


def test_directory_in_place_of_an_eval_shard(tmp_path):
  (tmp_path / "eval" / "eval.shard").mkdir(parents=True)
  audit = Audit(str(tmp_path), "basedir", "5.0.0")
  check_checksums(audit, tmp_path, _Hasher())
  assert [(r.status, r.subject) for r in audit.rows] == [("FAIL", "eval/eval.shard")]
  assert "not a regular file" in audit.rows[0].reason

"""The software a tree was made with: the provenance records the lock and what differs from it, and the audit
compares the recorded versions with the lock of the tree's commit (read with git) and that lock with the checkout's."""
import json, subprocess
from pathlib import Path

from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.software import check_software
from mlperf_bert.lock import lock_digest, lock_path, read_lock
from mlperf_bert.software import SHAPING, software_record

REPO = Path(__file__).resolve().parents[2]
LOCK = ("# a lock\nnumpy==2.4.6 --hash=sha256:" + "a" * 64 + "  # base\ntokenizers==0.23.3 --hash=sha256:" + "b" * 64 +
        "  # base\ntinygrad==0.14.0 --hash=sha256:" + "c" * 64 + "  # base\n")


def git(repo: Path, *args) -> str:
  return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def checkout(tmp: Path, lock_text: str = LOCK) -> tuple[Path, str]:
  """A git repository whose one commit holds lock/py3.11.txt; returns it and the commit."""
  repo = tmp / "checkout"
  (repo / "lock").mkdir(parents=True)
  (repo / "lock/py3.11.txt").write_text(lock_text)
  git(repo, "init", "-q")
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock", "--allow-empty")
  git(repo, "add", "lock"); git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock")
  return repo, git(repo, "rev-parse", "HEAD")


def tree(tmp: Path, commit: str, software: dict | None = None, **versions) -> tuple[Path, list[Path]]:
  base = tmp / "run"
  (base / "results/cpu").mkdir(parents=True)
  log = base / "results/cpu/result_bert_1.log"
  log.write_text(":::MLLOG {}\n")
  rec = {"git": {"commit": commit, "dirty": False}, "software": software or {},
         "versions": {"python": "3.11.7", "numpy": "2.4.6", "tokenizers": "0.23.3", "tinygrad": "0.14.0", **versions}}
  log.with_name("result_bert_1.provenance.json").write_text(json.dumps(rec))
  return base, [log]


def audit_of(base, logs, repo) -> Audit:
  audit = Audit(str(base), "basedir", "5.0.0")
  check_software(audit, base, logs, repo)
  return audit


def test_the_versions_of_the_lock_pass_with_no_warning(tmp_path):
  repo, commit = checkout(tmp_path)
  audit = audit_of(*tree(tmp_path, commit), repo)
  assert [(r.status, r.check) for r in audit.rows] == [("PASS", "software")], audit.rows
  assert "numpy, tokenizers, tinygrad" in audit.rows[0].reason or "tinygrad, numpy, tokenizers" in audit.rows[0].reason


def test_another_numpy_or_tokenizers_than_the_commits_lock_is_a_warning_naming_both_versions(tmp_path):
  repo, commit = checkout(tmp_path)
  audit = audit_of(*tree(tmp_path, commit, numpy="2.5.0", tokenizers="0.22.1"), repo)
  warns = [r.reason for r in audit.rows if r.status == "WARN"]
  assert len(warns) == 2 and not [r for r in audit.rows if r.status == "PASS"], audit.rows
  assert warns[0].startswith("numpy 2.5.0 made this run") and "says 2.4.6" in warns[0], warns
  assert warns[1].startswith("tokenizers 0.22.1 made this run") and "says 0.23.3" in warns[1], warns


def test_a_commit_the_checkout_lacks_or_before_the_lock_is_a_row_saying_so(tmp_path):
  repo, commit = checkout(tmp_path)
  audit = audit_of(*tree(tmp_path, "0" * 40), repo)
  assert [(r.status, r.check) for r in audit.rows] == [("SKIP", "software")]
  assert "is not in this checkout" in audit.rows[0].reason
  first = git(repo, "rev-list", "--max-parents=0", "HEAD")
  audit = audit_of(*tree(tmp_path / "b", first), repo)
  assert [r.status for r in audit.rows] == ["SKIP"] and "has no lock/py3.11.txt" in audit.rows[0].reason


def test_a_lock_other_than_the_checkouts_is_one_row_naming_what_differs(tmp_path):
  repo, commit = checkout(tmp_path)
  (repo / "lock/py3.11.txt").write_text(LOCK.replace("numpy==2.4.6", "numpy==2.5.0"))
  audit = audit_of(*tree(tmp_path, commit), repo)
  rows = [r for r in audit.rows if r.subject == "lock"]
  assert len(rows) == 1 and rows[0].status == "WARN" and "numpy 2.4.6 -> 2.5.0" in rows[0].reason, audit.rows


def test_the_provenance_records_the_lock_and_what_differs_from_it():
  rec = software_record(REPO)
  assert rec["lock"] == f"lock/{lock_path(REPO).name}" and rec["lock_sha256"] == lock_digest(lock_path(REPO))
  assert rec["differs"]["mlperf-bert"]["install"].startswith("editable file://"), rec["differs"]
  lock = read_lock(lock_path(REPO))
  # scripts/setup.sh installs the lock: nothing it names differs
  assert not {k for k in rec["differs"] if k.lower().replace("_", "-") in lock}, rec["differs"]
  assert not set(SHAPING) & set(rec["differs"])
  assert isinstance(rec["apt"], dict) and "clang" in rec["apt"], rec["apt"]


def test_a_run_from_another_lock_than_its_commits_is_a_warning(tmp_path):
  repo, commit = checkout(tmp_path)
  audit = audit_of(*tree(tmp_path, commit, software={"lock_sha256": "f" * 64}), repo)
  warns = [r.reason for r in audit.rows if r.status == "WARN"]
  assert len(warns) == 1 and "an uncommitted lock" in warns[0] and "ffffffffffff" in warns[0], audit.rows
  ok = audit_of(*tree(tmp_path / "b", commit, software={"lock_sha256": lock_digest(repo / "lock/py3.11.txt")}), repo)
  assert [r.status for r in ok.rows] == ["PASS"], ok.rows

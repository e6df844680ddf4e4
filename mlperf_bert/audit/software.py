"""The audit's `software` rows: the versions that made a tree (each result log's provenance) against the lock of the
commit that made it (read with git from the auditing checkout), and that lock against the checkout's own.

A result-shaping package (software.SHAPING) that ran at another version than its commit's lock is a WARN row naming
the package and both versions; a run whose lock file was not its commit's (an uncommitted edit) is a WARN row; a
commit this checkout does not have, or one older than the lock, is a SKIP row saying so. A tree whose commits' locks
differ from the auditing checkout's is one WARN row naming the packages that differ: rebuilding it here installs other
software."""
from __future__ import annotations
import hashlib, json, subprocess
from pathlib import Path

from mlperf_bert.audit.rows import Audit, shorten
from mlperf_bert.audit.runs import provenance_path
from mlperf_bert.errors import UserError
from mlperf_bert.lock import LOCK_DIR, Locked, parse_lock
from mlperf_bert.software import SHAPING

CHECK = "software"


def lock_at(repo: Path, commit: str, name: str) -> tuple[str | None, str]:
  """(the text of lock/<name> at `commit`, '') or (None, why it cannot be read)."""
  def git(*args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
  try:
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
      return None, f"its commit {commit[:12]} is not in this checkout ({repo}): fetch it to compare with its lock"
    p = git("show", f"{commit}:{LOCK_DIR}/{name}")
  except (OSError, subprocess.TimeoutExpired) as e:
    return None, f"git not usable ({e})"
  if p.returncode != 0:
    return None, f"its commit {commit[:12]} has no {LOCK_DIR}/{name} (made before the lock, or another Python's)"
  return p.stdout, ""


def _lock_name(versions: dict) -> str:
  py = str(versions.get("python") or "")
  return f"py{'.'.join(py.split('.')[:2])}.txt"


def version_rows(audit: Audit, rel: str, versions: dict, lock: dict[str, Locked], commit: str) -> None:
  """A WARN per result-shaping package that ran at another version than the lock; else one PASS."""
  compared, differ = [], []
  for pkg in SHAPING:
    ran, locked = versions.get(pkg), lock.get(pkg)
    if ran is None or locked is None: continue
    compared.append(pkg)
    if str(ran) != locked.version:
      differ.append(pkg)
      audit.add("WARN", CHECK, rel, f"{pkg} {ran} made this run, the lock of its commit {commit[:12]} says "
                f"{locked.version} ({pkg} can change {SHAPING[pkg]}); rerun it from the lock (bash scripts/setup.sh)")
  if compared and not differ:
    audit.add("PASS", CHECK, rel, f"{', '.join(compared)} ran at the versions of its commit {commit[:12]}'s lock")


def check_software(audit: Audit, base: Path, logs: list[Path], repo: Path) -> None:
  """The rows of every result log's provenance record, then the one row of locks unlike the checkout's."""
  seen: dict[str, tuple[str, str]] = {}  # lock text's sha256 -> (commit, lock name)
  texts: dict[str, str] = {}
  for log in logs:
    rel = str(log.relative_to(base))
    try:
      rec = json.loads(provenance_path(log).read_text())
      versions, commit = rec.get("versions") or {}, (rec.get("git") or {}).get("commit")
      software = rec.get("software") or {}
    except (OSError, ValueError, AttributeError):
      continue  # the provenance rows say what is wrong with the record
    if not isinstance(versions, dict) or not commit:
      audit.add("SKIP", CHECK, rel, "its provenance names no commit or versions: no lock to compare with"); continue
    commit = str(commit)   # a record is untrusted: its fields are read as text
    name = _lock_name(versions)
    text, why = lock_at(repo, commit, name)
    if text is None:
      audit.add("SKIP", CHECK, rel, why); continue
    try: lock = parse_lock(text, f"{commit[:12]}:{LOCK_DIR}/{name}")
    except UserError as e:
      audit.add("FAIL", CHECK, rel, str(e)); continue
    digest = hashlib.sha256(text.encode()).hexdigest()
    ran_from = software.get("lock_sha256") if isinstance(software, dict) else None
    ran_from = ran_from if isinstance(ran_from, str) else None
    if ran_from and ran_from != digest:
      audit.add("WARN", CHECK, rel, f"it ran from a {LOCK_DIR}/{name} (sha256 {ran_from[:12]}...) that is not its "
                f"commit {commit[:12]}'s ({digest[:12]}...): an uncommitted lock")
    version_rows(audit, rel, versions, lock, commit)
    seen.setdefault(digest, (commit, name)); texts[digest] = text
  differ = []
  for digest, (commit, name) in seen.items():
    here = repo / LOCK_DIR / name
    try: now_text = here.read_text()
    except OSError: now_text = None
    if now_text == texts[digest]: continue
    try: now = parse_lock(now_text, str(here)) if now_text is not None else {}
    except UserError as e:
      audit.add("FAIL", CHECK, LOCK_DIR, str(e)); return
    then = parse_lock(texts[digest], name)
    changed = [f"{then[k].name} {then[k].version} -> {now[k].version if k in now else 'absent'}"
               for k in sorted(then) if k not in now or now[k].version != then[k].version]
    changed += [f"{now[k].name} absent -> {now[k].version}" for k in sorted(set(now) - set(then))]
    differ.append(f"commit {commit[:12]}'s {LOCK_DIR}/{name}: " +
                  (shorten(changed, 6) if changed else "the same versions, other hashes or groups"))
  if differ:
    audit.add("WARN", CHECK, LOCK_DIR, "the lock that made the tree differs from this checkout's (rebuilding here "
              "installs other software): " + "; ".join(differ))

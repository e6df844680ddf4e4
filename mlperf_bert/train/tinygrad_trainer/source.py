"""tinygrad's own code for the tinygrad trainer (config `trainer: tinygrad`): the checkout, brought into the basedir
and verified against the commit it claims.

Config `tinygrad_source` is either {git: URL, commit: SHA} (cloned, then the commit checked out), or a local
checkout path (a string, or {path: P, commit: SHA}), copied into the basedir. Pinned by default to PINNED_COMMIT,
the v5.1 submission commit this project's parity names (docs/parity.md).

Verification never trusts the checkout's git (whoever holds it can rewrite it: a `refs/replace/<commit>` makes git
show another commit under the pinned name). The files are hashed here, in Python, into their git tree id (`tree_id`:
every file but .git and __pycache__, as `git write-tree` hashes them), and that tree must be the commit's:
  * the pinned commit's tree is known here (PINNED_TREE): a `git archive` of e0139fa unpacked anywhere, a clone or a
    local checkout verifies without asking any git for it;
  * another commit's tree is read from the commit object itself (`git cat-file commit` with GIT_NO_REPLACE_OBJECTS=1
    and no inherited GIT_* setting), after checking that the object's own SHA-1 is that commit.
Git runs with `--` before a URL, and a failed git command is one line of git's own words. Nothing of tinygrad is in
this repository.
"""
from __future__ import annotations
import dataclasses, hashlib, json, os, shutil, stat, subprocess
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path

PINNED_COMMIT = "e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178"
PINNED_TREE = "0c29fd474b1eb0363a1b043208772539083c100f"   # git rev-parse e0139fa^{tree}
DEFAULT_GIT = "https://github.com/tinygrad/tinygrad.git"
TRAIN_SCRIPT = Path("examples") / "mlperf" / "model_train.py"


@dataclasses.dataclass(frozen=True)
class Source:
  kind: str            # "git" or "path"
  where: str           # the URL, or the local path
  commit: str

  def describe(self) -> str:
    """For the provenance: the URL of a git source; a local path is named only as such (no absolute path)."""
    return self.where if self.kind == "git" else "local checkout"


def parse_source(value: Any) -> Source:
  """Config `tinygrad_source` -> Source (None: the pinned commit from tinygrad's GitHub)."""
  if value is None or value == "": return Source("git", DEFAULT_GIT, PINNED_COMMIT)
  if isinstance(value, str): return Source("path", value, PINNED_COMMIT)
  if isinstance(value, dict) and ("git" in value) != ("path" in value):
    commit = str(value.get("commit") or PINNED_COMMIT)
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
      raise UserError(f"tinygrad_source.commit {commit!r}: give the full 40-hex commit id")
    return Source("git", str(value["git"]), commit) if "git" in value else Source("path", str(value["path"]), commit)
  raise UserError(f"tinygrad_source {value!r}: give a local checkout path or {{git: URL, commit: SHA}}")


def _git_env() -> dict:
  """The environment git runs in: no GIT_* setting inherited (GIT_DIR, GIT_REPLACE_REF_BASE, ...), replace refs off."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
  return {**env, "GIT_NO_REPLACE_OBJECTS": "1", "GIT_TERMINAL_PROMPT": "0"}


def _git(*args: str, cwd: str | os.PathLike | None = None) -> str:
  p = subprocess.run(["git", "-c", "core.fsmonitor=false", *args], cwd=cwd, env=_git_env(), capture_output=True,
                     text=True, errors="replace", check=False)
  if p.returncode != 0:
    words = " ".join(l.strip() for l in (p.stderr or p.stdout).splitlines() if l.strip()) or f"exit status {p.returncode}"
    raise UserError(f"git {' '.join(args)} failed in {cwd or '.'}: {words[:600]}; check the tinygrad_source setting "
                    f"(URL, commit, network)")
  return p.stdout.strip()


def _tree(folder: str) -> bytes | None:
  """The binary git tree id of a directory (None when it holds no file: git records no empty directory)."""
  entries = []
  with os.scandir(folder) as it:
    for e in it:
      if e.name in (".git", "__pycache__"): continue
      st = os.lstat(e.path)
      if stat.S_ISLNK(st.st_mode):
        mode, oid = b"120000", _blob(os.fsencode(os.readlink(e.path)))
      elif stat.S_ISDIR(st.st_mode):
        mode, oid = b"40000", _tree(e.path)
        if oid is None: continue
      elif stat.S_ISREG(st.st_mode):
        mode = b"100755" if st.st_mode & stat.S_IXUSR else b"100644"
        with open(e.path, "rb") as f: oid = _blob(f.read())
      else:
        raise UserError(f"{e.path}: not a file, directory or symlink; a tinygrad checkout holds none")
      name = os.fsencode(e.name)
      entries.append((name + b"/" if mode == b"40000" else name, mode + b" " + name + b"\0" + oid))
  if not entries: return None
  body = b"".join(v for _, v in sorted(entries))   # git's order: a directory sorts as its name + "/"
  return hashlib.sha1(b"tree %d\0" % len(body) + body).digest()


def _blob(data: bytes) -> bytes:
  return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()


def tree_id(folder: str | os.PathLike) -> str:
  """The git tree id of a directory's files (.git and __pycache__ left out), hashed here as `git write-tree` would
  hash them after `git add -A -f`: no git, no .gitattributes, no checkout's object store is asked."""
  t = _tree(str(folder))
  return (t or hashlib.sha1(b"tree 0\0").digest()).hex()


def commit_tree(src: Path, commit: str) -> str:
  """The tree of `commit` as its own object says, read from src's git without replace refs; the object must hash to
  `commit` (a rewritten object store is refused, not believed)."""
  raw = subprocess.run(["git", "-c", "core.fsmonitor=false", "cat-file", "commit", commit], cwd=src, env=_git_env(),
                       capture_output=True, check=False)
  if raw.returncode != 0:
    words = " ".join(raw.stderr.decode(errors="replace").split())
    raise UserError(f"{src}: its git has no commit {commit[:12]} ({words[:300]}); give a checkout of that commit")
  if hashlib.sha1(b"commit %d\0" % len(raw.stdout) + raw.stdout).hexdigest() != commit:
    raise UserError(f"{src}: its git's object for commit {commit[:12]} does not hash to that id (the object store was "
                    f"rewritten); use an unmodified clone of tinygrad")
  first = raw.stdout.split(b"\n", 1)[0].decode("ascii", "replace")
  if not first.startswith("tree ") or len(first) != 45:
    raise UserError(f"{src}: commit {commit[:12]} names no tree ({first[:60]!r}); use an unmodified clone of tinygrad")
  return first[5:]


def _expected_tree(src: Path, commit: str) -> str:
  if commit == PINNED_COMMIT: return PINNED_TREE   # known here: the checkout's git is never asked
  if (src / ".git").exists(): return commit_tree(src, commit)
  raise UserError(f"{src}: no .git, so only the pinned commit {PINNED_COMMIT[:7]} can be verified here; give a git "
                  f"work tree of {commit[:7]} or tinygrad_source {{git: URL, commit: {commit}}}")


def local_path(source: Source, repo: Path) -> Path:
  """A local source's directory (relative to the repository)."""
  return Path(source.where) if Path(source.where).is_absolute() else repo / source.where


def check_local(source: Source, repo: Path) -> None:
  """At planning: a local tinygrad_source must be a checkout (it holds train_bert's script)."""
  if source.kind != "path": return
  src = local_path(source, repo)
  if not (src / TRAIN_SCRIPT).is_file():
    what = "does not exist" if not os.path.lexists(src) else f"has no {TRAIN_SCRIPT}"
    raise UserError(f"tinygrad_source {source.where!r}: {src} {what}; give a tinygrad checkout of {source.commit[:7]} "
                    f"(e.g. a git archive of it unpacked) or {{git: URL, commit: SHA}}")


def bring_checkout(source: Source, dest: str | os.PathLike, record: str | os.PathLike, repo: Path) -> dict:
  """Clone or copy the checkout to `dest` (replaced), verify it (see the module doc) and write `record` (JSON:
  commit, tree, source). Returns the record."""
  dest = Path(dest)
  if dest.exists(): shutil.rmtree(dest)
  dest.parent.mkdir(parents=True, exist_ok=True)
  tmp = dest.with_name(dest.name + ".part")
  if tmp.exists(): shutil.rmtree(tmp)
  try:
    if source.kind == "git":
      _git("clone", "-q", "--no-checkout", "--", source.where, str(tmp))
      _git("checkout", "-q", "--detach", source.commit, "--", cwd=tmp)
      head = _git("rev-parse", "HEAD", cwd=tmp)
      if head != source.commit:
        raise UserError(f"{source.where}: HEAD is {head} after checking out {source.commit}; check tinygrad_source.commit")
      src, want = Path(source.where), _expected_tree(tmp, source.commit)
    else:
      src = local_path(source, repo)
      check_local(source, repo)
      want = _expected_tree(src, source.commit)
      shutil.copytree(src, tmp, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    tree = tree_id(tmp)
    if tree != want:
      raise UserError(f"{src}: its files are git tree {tree}, not the tree {want} of commit {source.commit[:7]}; "
                      f"use an unmodified checkout of that commit (git status, git stash) or change tinygrad_source")
    tmp.rename(dest)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  rec = {"commit": source.commit, "tree": tree, "source": source.describe(), "kind": source.kind}
  with atomic_path(record) as t:
    t.write_text(json.dumps(rec, indent=1) + "\n")
  return rec


def read_checkout_record(path: str | os.PathLike) -> dict:
  try: return json.loads(Path(path).read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: not a readable tinygrad checkout record ({e}); rerun rule tinygrad_checkout") from None

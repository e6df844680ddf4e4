"""tinygrad's own code for the tinygrad trainer (config `trainer: tinygrad`): the checkout, brought into the basedir
and verified against the commit it claims.

Config `tinygrad_source` is either {git: URL, commit: SHA} (cloned, then the commit checked out), or a local
checkout path (a string, or {path: P, commit: SHA}), copied into the basedir. Pinned by default to PINNED_COMMIT,
the v5.1 submission commit this project's parity names (docs/parity.md).

Verification: a clone's HEAD must be the commit. A copied directory is verified by its git tree id: the tree of
every file but .git and __pycache__, computed with `git add -A -f; git write-tree` in a scratch repository, must
equal the commit's tree (read from the directory's own .git when it has one, else known here for the pinned commit
alone: a `git archive` of e0139fa unpacked anywhere verifies without network). Nothing of tinygrad is in this
repository.
"""
from __future__ import annotations
import dataclasses, json, os, shutil, subprocess, tempfile
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


def _git(*args: str, cwd: str | os.PathLike | None = None, env: dict | None = None) -> str:
  p = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
  if p.returncode != 0:
    raise UserError(f"git {' '.join(args)} failed in {cwd or '.'}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}; "
                    f"check the tinygrad_source setting (URL, commit, network)")
  return p.stdout.strip()


def tree_id(folder: str | os.PathLike) -> str:
  """The git tree id of a directory's files (every file, any .git left out), from a scratch repo."""
  folder = Path(folder).resolve()
  with tempfile.TemporaryDirectory(prefix="tg-tree-") as tmp:
    env = {**os.environ, "GIT_DIR": tmp, "GIT_WORK_TREE": str(folder), "GIT_INDEX_FILE": f"{tmp}/index"}
    _git("init", "-q", "--bare", tmp)
    _git("add", "-A", "-f", ".", cwd=folder, env=env)  # -f: tinygrad tracks a few files its .gitignore names
    return _git("write-tree", cwd=folder, env=env)


def _expected_tree(src: Path, commit: str) -> str:
  if (src / ".git").exists(): return _git("rev-parse", f"{commit}^{{tree}}", cwd=src)
  if commit == PINNED_COMMIT: return PINNED_TREE
  raise UserError(f"{src}: no .git, so only the pinned commit {PINNED_COMMIT[:7]} can be verified here; give a git "
                  f"work tree of {commit[:7]} or tinygrad_source {{git: URL, commit: {commit}}}")


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
      _git("clone", "-q", "--no-checkout", source.where, str(tmp))
      _git("checkout", "-q", source.commit, cwd=tmp)
      head = _git("rev-parse", "HEAD", cwd=tmp)
      if head != source.commit:
        raise UserError(f"{source.where}: HEAD is {head} after checking out {source.commit}; check tinygrad_source.commit")
      tree = _git("rev-parse", "HEAD^{tree}", cwd=tmp)
    else:
      src = Path(source.where) if Path(source.where).is_absolute() else repo / source.where
      if not (src / TRAIN_SCRIPT).is_file():
        raise UserError(f"{src}: no {TRAIN_SCRIPT}; tinygrad_source must name a tinygrad checkout (e.g. a git archive "
                        f"of {PINNED_COMMIT[:7]} unpacked)")
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

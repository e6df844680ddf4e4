"""The demo's layout moved: a checkout whose basedir (results/demo) lies inside it, run there, then moved to
another directory. Its data rules depend on the checkout (local sources relative to it, the shipped eval.md5):
none of that may reach a rule's params or input paths, or the moved checkout reruns them. The training, provenance
and report rules are covered by tests/workflow/test_end_to_end.py, which moves a finished tree."""
import shutil, subprocess, sys
from pathlib import Path

import pytest

from workflow_helpers import REPO

pytestmark = pytest.mark.slow

TARGETS = ["results/demo/verified/eval.txt.ok", "results/demo/download/bert_config.json"]


def copy_checkout(dest: Path) -> Path:
  """The checkout's tracked (and untracked, not ignored) files, modification times kept."""
  files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout.split("\0")
  for f in filter(None, files):
    if (REPO / f).is_file() and not f.startswith("tests/"):
      (dest / f).parent.mkdir(parents=True, exist_ok=True)
      shutil.copy2(REPO / f, dest / f)
  return dest


def smk(checkout: Path, *args) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), "-d", str(checkout),
                         *args], capture_output=True, text=True, timeout=900)


def test_moved_demo_checkout_plans_nothing(tmp_path):
  first = copy_checkout(tmp_path / "checkout")
  r = smk(first, "--cores", "2", *TARGETS)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  moved = tmp_path / "elsewhere" / "checkout"
  moved.parent.mkdir()
  shutil.move(first, moved)
  r = smk(moved, "-n", *TARGETS)
  assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr, r.stdout[-3000:] + r.stderr[-3000:]

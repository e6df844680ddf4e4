"""Shared pytest setup: makes tests/ importable (for feature_digest), names the fixture folder, offers common
fixtures and hands the longest test files out first."""
import collections, os, resource, sys
from pathlib import Path


import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
  sys.path.insert(0, str(TESTS))

FIXTURES = TESTS / "fixtures"                   # recorded inputs and expected numbers of every wing's tests
ORACLE = FIXTURES / "oracle"
DEMO = ROOT / "resources" / "demo"

# The longest test files, longest first (measured with --durations on 2 cores). scripts/test.sh runs each file on
# one of three workers (--dist loadfile --no-loadscope-reorder) in collection order: starting with these keeps all
# workers busy to the end instead of leaving one on a long end-to-end file while the other idles.
LONGEST_FIRST = [
  "workflow/test_end_to_end.py",      # the demo, its audits, the submission, two whitewashing reruns
  "workflow/test_rehearsal.py",       # green's rehearsal through the whole DAG (--all: three more trainings)
  "train/test_train.py",              # the train rule killed and resumed, and some 20 short training runs
  "workflow/test_disk_space.py",      # the demo on a small tmpfs: refused, filled mid-run, resumed
  "workflow/test_slurm.py",           # a SLURM cluster brought up (apt-installed on a fresh machine), three runs
  "train/test_parity.py",
  "train/test_dress.py",              # BERT-large's step at 1 and 2 layers compiled by nvrtc, a refused BS, NULL vs CPU
  "workflow/test_workflow_data.py",
  "train/test_preflight.py",
]


def pytest_collection_modifyitems(items):
  """The files of LONGEST_FIRST first, in its order; the rest as collected (the sort is stable: a file's own
  tests keep their order)."""
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  def key(item):
    path = Path(item.path).resolve()
    return rank.get(path.relative_to(TESTS).as_posix(), len(rank)) if path.is_relative_to(TESTS) else len(rank)
  items.sort(key=key)


# ---- CPU seconds per test (this process and every child it waited for: Snakemake, its jobs, tinygrad's threads):
# unlike --durations' wall times they do not grow with the machine's load. The summary names the dearest files.
def _cpu_s() -> float:
  me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(item):
  t0 = _cpu_s()
  yield
  item.user_properties.append(("cpu_s", _cpu_s() - t0))  # before the phase's report is made: it travels with it


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
  yield from _timed(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  yield from _timed(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
  yield from _timed(item)


_CPU_BY_FILE: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
  # a phase's report carries the entries of the phases before it too: count only the last one
  entries = [v for k, v in report.user_properties if k == "cpu_s"]
  if entries:
    _CPU_BY_FILE[report.nodeid.split("::")[0]] += entries[-1]


def pytest_terminal_summary(terminalreporter):
  if not _CPU_BY_FILE:
    return
  tr = terminalreporter
  tr.write_sep("=", f"CPU time of the tests: {sum(_CPU_BY_FILE.values()):.0f} s; the dearest files")
  for name, secs in _CPU_BY_FILE.most_common(15):
    tr.write_line(f"{secs:8.1f} s  {name}")


@pytest.fixture(scope="module")
def quick_kernels():
  """For modules that check runs, resumes, logs, records and the workflow, not kernels: tinygrad lowers each kernel
  without its optimizations (NOOPT=1) and without a compile worker pool (PARALLEL=0), in this process and in the
  children it starts. The kernels the product runs, with their optimizations, are checked by test_parity.py (against
  tinygrad's own numbers), test_model.py, the end-to-end runs, the rehearsal and the dress."""
  from tinygrad.helpers import Context
  with pytest.MonkeyPatch.context() as mp, Context(NOOPT=1, PARALLEL=0):
    mp.setenv("NOOPT", "1")
    mp.setenv("PARALLEL", "0")
    yield


@pytest.fixture(scope="session")
def demo_text(tmp_path_factory):
  """The demo corpus extracted once per session: a folder holding results4/part-0000{0..7}-of-00008 and eval.txt."""
  import tarfile
  out = tmp_path_factory.mktemp("demo_text")
  with tarfile.open(DEMO / "results_text.tar.gz") as tar:
    for m in tar.getmembers():
      name = Path(m.name)
      if not m.isfile() or name.is_absolute() or ".." in name.parts:
        continue
      dest = out / "results4" / name.name
      dest.parent.mkdir(parents=True, exist_ok=True)
      dest.write_bytes(tar.extractfile(m).read())
  return out / "results4"


# ---- a real small filesystem: a tmpfs of a given size (tests of full disks and of the space checks). It needs
# `mount -t tmpfs` (root, or a user namespace that allows it); a test skips, saying so, only where it cannot mount.
def mount_tmpfs(path: Path, size: str) -> None:
  """Mount a tmpfs of `size` (mount's syntax: 256k, 100M) at `path` (made if missing); pytest.skip when this machine
  does not let the tests mount one."""
  import subprocess
  path.mkdir(parents=True, exist_ok=True)
  r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True)
  if r.returncode != 0:
    pytest.skip(f"needs a tmpfs of {size} (mount -t tmpfs, as root): cannot mount one here ({r.stderr.strip()})")


def resize_tmpfs(path: Path, size: str) -> None:
  import subprocess
  subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def unmount(path: Path) -> None:
  import subprocess
  subprocess.run(["umount", "--lazy", str(path)], check=False)


@pytest.fixture
def tmpfs(tmp_path):
  """tmpfs(size) -> the mount point of a fresh tmpfs of that size, unmounted after the test."""
  mounts = []
  def make(size: str) -> Path:
    mnt = tmp_path / f"tmpfs-{len(mounts)}"
    mount_tmpfs(mnt, size)
    mounts.append(mnt)
    return mnt
  yield make
  for m in mounts: unmount(m)

"""Writing shards when the machine says no: a killed writer's temp file is removed by the next run; a full disk,
a file-size limit and a read-only folder end in one line naming the path and what to do (no traceback, no temp
file, no half-written target). Real processes, real kills, a real full tmpfs and a real permission denial."""
from __future__ import annotations
import os, resource, shutil, signal, subprocess, sys
from pathlib import Path

import pytest

from conftest import DEMO, ROOT

TOPIC = "part-00000-of-00008"


def shard_cli(text: Path, out: Path, prefix: list[str] | None = None, preexec=None,
              extra: list[str] | None = None) -> subprocess.CompletedProcess:
  cmd = [sys.executable, "-m", "mlperf_bert", "shard", "--input", str(text), "--vocab", str(DEMO / "vocab.txt"),
         "--output", str(out), "--max-seq-length", "128", "--max-predictions-per-seq", "20", "--no-progress",
         *(extra or [])]
  env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
  return subprocess.run((prefix or []) + cmd, capture_output=True, text=True, timeout=600, env=env,
                        preexec_fn=preexec)


def leftovers(folder: Path) -> list[str]:
  return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def assert_one_line(p: subprocess.CompletedProcess, *needles: str) -> str:
  assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-4000:])
  err = p.stderr.strip()
  assert "Traceback" not in err and len(err.splitlines()) == 1, err
  for n in needles:
    assert n in err, (n, err)
  return err


def test_a_killed_writers_temp_file_is_removed_by_the_next_run(tmp_path, demo_text):
  out = tmp_path / "shards" / f"{TOPIC}.shard"
  # a writer killed (SIGKILL: no cleanup runs) while its temp file is half written
  code = ("import os, signal, sys\nfrom mlperf_bert.fileio import atomic_path\n"
          "with atomic_path(sys.argv[1]) as t:\n  t.write_bytes(b'half' * 100000)\n  os.kill(os.getpid(), signal.SIGKILL)\n")
  p = subprocess.run([sys.executable, "-c", code, str(out)], env=dict(os.environ, PYTHONPATH=str(ROOT)))
  assert p.returncode == -signal.SIGKILL
  parts = [n for n in leftovers(out.parent) if n.endswith(".part")]
  assert len(parts) == 1 and not out.exists()
  # the next run of the same target removes it and leaves only its outputs
  p = shard_cli(demo_text / TOPIC, out)
  assert p.returncode == 0, p.stderr
  assert leftovers(out.parent) == [] and out.is_file()
  assert sorted(x.name for x in out.parent.iterdir()) == [out.name, out.name + ".sha256"]


def test_a_live_writers_temp_file_is_kept(tmp_path):
  from mlperf_bert.fileio import atomic_path
  target = tmp_path / "x.bin"
  with atomic_path(target) as outer:
    outer.write_bytes(b"1")
    with atomic_path(tmp_path / "y.bin") as t:  # another target's writer never touches x's temp
      t.write_bytes(b"2")
    assert outer.exists()
  assert target.read_bytes() == b"1" and leftovers(tmp_path) == []


def test_file_size_limit_is_one_line_naming_the_shard(tmp_path, demo_text):
  out = tmp_path / f"{TOPIC}.shard"

  def limit():  # a real EFBIG from the kernel: the shard is ~1 MB, the limit 64 kB
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

  p = shard_cli(demo_text / TOPIC, out, preexec=limit)
  assert_one_line(p, f"cannot write {out}", "File too large", "ulimit -f")
  assert list(tmp_path.iterdir()) == []


@pytest.fixture
def small_tmpfs(tmpfs):
  return tmpfs("256k")


def test_disk_full_is_one_line_naming_the_shard(small_tmpfs, demo_text):
  out = small_tmpfs / f"{TOPIC}.shard"
  # the planned shard (its text times the measured ratio) does not fit: refused before the text is read
  p = shard_cli(demo_text / TOPIC, out)
  assert_one_line(p, f"not enough disk space for the shard {TOPIC}.shard: it writes 1.09 MB", f"into {small_tmpfs}",
                  "has 262 kB free", "--no-space-check")
  assert list(small_tmpfs.iterdir()) == []
  # written anyway, the disk fills: one line, no temp file
  p = shard_cli(demo_text / TOPIC, out, extra=["--no-space-check"])
  assert_one_line(p, f"cannot write {out}", "No space left on device", "free space")
  assert list(small_tmpfs.iterdir()) == []


def test_permission_denied_is_one_line_naming_the_shard(tmp_path, demo_text):
  folder = tmp_path / "readonly"
  folder.mkdir()
  folder.chmod(0o555)
  prefix = []
  if os.geteuid() == 0:  # root writes anywhere: drop the capabilities that let it
    if not shutil.which("setpriv"):
      pytest.skip("running as root without setpriv: cannot make a folder unwritable")
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps",
              "-dac_override,-dac_read_search", "--"]
  out = folder / f"{TOPIC}.shard"
  try:
    p = shard_cli(demo_text / TOPIC, out, prefix=prefix)
  finally:
    folder.chmod(0o755)
  assert_one_line(p, f"cannot write {out}", "Permission denied", "writable")
  assert list(folder.iterdir()) == []

"""A basedir on a filesystem that refuses writes for another reason than bytes, on a real tmpfs (`mount -t tmpfs`, as
root; skipped, saying so, where the tests cannot mount one): out of inodes (`-o nr_inodes=N`: bytes to spare, no file
can be created) and read-only (`mount -o remount,ro`). Each is one line naming it, with no traceback in Snakemake's
output or any job log: before any job when the basedir has no inode left or cannot be written (the basedir lock,
rules/common.smk), and from the job log itself when a job running beside another finds the inodes gone
(snakejob.job_log: the basedir's inode reserve gives its log a place). Cheap: the first data job (a download of a
file in the repository), seconds."""
from __future__ import annotations
import os, re, subprocess
from pathlib import Path

import pytest

from conftest import unmount
from workflow_helpers import snakemake, write_config
from mlperf_bert.errors import UserError

TARGETS = ("download/vocab.txt", "download/bert_config.json")  # the first data jobs: copies of repository files
INODES = r"its filesystem \S+ \(tmpfs\) has no free inodes \(all \d+ used; [\d.]+ [kMG]?B free\)"


def _mount(path: Path, options: str) -> Path:
  path.mkdir(parents=True, exist_ok=True)
  r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
  if r.returncode != 0:
    pytest.skip(f"needs a tmpfs ({options}; mount -t tmpfs, as root): cannot mount one here ({r.stderr.strip()})")
  return path


def _used_inodes(path: Path) -> int:
  st = os.statvfs(path)
  return st.f_files - st.f_ffree


def _fill_inodes(folder: Path) -> int:
  """Empty files in `folder` until its filesystem has no inode left; how many."""
  folder.mkdir(parents=True, exist_ok=True)
  n = 0
  try:
    while True:
      (folder / f"f{n}").touch(); n += 1
  except OSError:
    return n


def _run(wd: Path, base: Path, *targets: str):
  wd.mkdir(parents=True, exist_ok=True)
  cfg = write_config(wd / "config.yaml", base)
  return snakemake(wd, "--cores", "1", *(str(base / t) for t in targets), configfile=cfg, check=False, timeout=300)


def test_a_basedir_out_of_inodes_is_one_line_before_any_job(tmp_path):
  mnt = _mount(tmp_path / "disk", "size=64M,nr_inodes=64")
  try:
    base = mnt / "base"
    assert _fill_inodes(mnt / "filler") > 0 and os.statvfs(mnt).f_bfree > 0  # bytes to spare, no inode
    r = _run(tmp_path, base, TARGETS[0])
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out, out[-3000:]
    lines = [l for l in out.splitlines() if "no free inodes" in l]
    assert len(lines) == 1 and re.search(rf"^basedir {re.escape(str(base))}: {INODES}: no file can be created there; "
                                         r"delete files there .*nr_inodes", lines[0]), out[-3000:]
    assert not base.exists() and "rule download:" not in out  # before any job
  finally:
    unmount(mnt)


def test_a_job_that_finds_the_inodes_gone_says_so_in_its_log_in_one_line(tmp_path):
  """Two downloads: the first takes the last inode (the tmpfs has exactly what one download's run uses), the second
  cannot create its log; it says so in one line, in its log and on the console, and Snakemake, which creates a failed
  job's missing log itself, finds it there (its own failure to create it was a traceback)."""
  probe = _mount(tmp_path / "probe", "size=64M,nr_inodes=4096")
  try:
    r = _run(tmp_path / "p", probe / "base", TARGETS[0])
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    used = _used_inodes(probe)  # one download's run: the lock, the command record, the reserve, the job
  finally:
    unmount(probe)
  mnt = _mount(tmp_path / "disk", f"size=64M,nr_inodes={used}")
  try:
    base = mnt / "base"
    r = _run(tmp_path / "w", base, *TARGETS)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out, out[-4000:]
    lines = [l for l in out.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, out[-4000:]
    assert re.search(rf"^error: cannot write {re.escape(str(base))}/logs/download/(vocab\.txt|bert_config\.json)\.log: "
                     rf"No space left on device: {INODES}: no file can be created there; delete files there", lines[0])
    done = [t for t in TARGETS if (base / t).is_file()]
    assert len(done) == 1, done  # the other download ran to its end
    failed = next(t for t in TARGETS if t not in done)
    log = (base / "logs/download" / (Path(failed).name + ".log")).read_text()
    assert log == lines[0] + "\n", log
    for p in (base / "logs").rglob("*.log"):
      assert "Traceback" not in p.read_text(), p
  finally:
    unmount(mnt)


def test_a_read_only_basedir_is_one_line_before_any_job(tmp_path):
  mnt = _mount(tmp_path / "disk", "size=16M")
  try:
    base = mnt / "base"
    (base / "logs").mkdir(parents=True)  # a tree that was written once
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    r = _run(tmp_path, base, TARGETS[0])
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in out, out[-3000:]
    lines = [l for l in out.splitlines() if "Read-only file system" in l]
    assert len(lines) == 1 and lines[0] == (
      f"basedir {base} cannot be written: cannot write {base}/logs/workflow.lock: Read-only file system; the file "
      "system is read-only: point the config's basedir at a writable one and rerun"), out[-3000:]
    assert "rule download:" not in out and list((base / "logs").iterdir()) == []
    # a dry run (the audit's, of a received tree) still plans: nothing is written
    d = snakemake(tmp_path, "-n", str(base / TARGETS[0]), configfile=tmp_path / "config.yaml", check=False, timeout=300)
    assert d.returncode == 0 and "rule download:" in d.stdout + d.stderr, (d.stdout + d.stderr)[-3000:]
  finally:
    unmount(mnt)


def test_every_writer_names_the_inodes(tmp_path):
  """The writers' own lines on a tmpfs out of inodes: an atomic write (fileio), the space check (space.py), a
  download's (data/r2.py) and a job log opened by hand (snakejob.job_log: one line, exit 1, no traceback)."""
  import sys
  from mlperf_bert.data.r2 import download_write_error
  from mlperf_bert.fileio import atomic_path
  from mlperf_bert.space import check_space
  mnt = _mount(tmp_path / "disk", "size=16M,nr_inodes=32")
  try:
    (mnt / "out").mkdir()
    _fill_inodes(mnt / "filler")
    with pytest.raises(UserError, match=rf"^cannot write {re.escape(str(mnt))}/out/x: No space left on device: {INODES}"):
      with atomic_path(mnt / "out" / "x") as tmp: tmp.write_text("x")
    nothing = r": no file can be created there; delete files there"
    with pytest.raises(UserError, match=rf"^no room for the shard x in {re.escape(str(mnt))}/out: {INODES}{nothing}"):
      check_space({mnt / "out": 10}, what="the shard x", detail="", shrink="")
    with pytest.raises(OSError) as e:
      open(mnt / "out" / "y", "w")
    assert re.search(rf": cannot write y \(No space left on device\): {INODES}{nothing}",
                     str(download_write_error(e.value, mnt / "out" / "y")))
    p = subprocess.run([sys.executable, "-c", "from mlperf_bert.snakejob import job_log\n"
                        f"with job_log({str(mnt / 'out' / 'job.log')!r}): print('never')"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert re.search(rf"^error: cannot write \S+/out/job\.log: No space left on device: {INODES}", p.stderr), p.stderr
  finally:
    unmount(mnt)

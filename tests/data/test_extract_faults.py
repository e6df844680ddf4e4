"""Extraction faults: a damaged gzip is called corrupt (its CRC is checked), re-extracting unchanged bytes keeps
their modification times, and a killed extraction's staging folder is removed by the next one."""
from __future__ import annotations
import os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from conftest import DEMO, ROOT
from mlperf_bert.data.extract import extract_results
from mlperf_bert.errors import UserError

TARBALL = DEMO / "results_text.tar.gz"
MANIFEST = DEMO / "bert_reference_results_text_md5.txt"
quiet = lambda s: None


# 750324: the old reader stopped at a garbled tar header and blamed the manifest ("4 files ... not in the
# archive ... do not belong together"); the others it extracted without a word (garbled text, found only by md5)
@pytest.mark.parametrize("offset", [750324, 500216, 1000432, 1480648])
def test_a_flipped_byte_is_a_corrupt_archive(tmp_path, offset):
  data = bytearray(TARBALL.read_bytes())
  data[offset] ^= 0x01
  bad = tmp_path / "results_text.tar.gz"
  bad.write_bytes(bytes(data))
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "extract", "--tarball", str(bad), "--manifest",
                      str(MANIFEST), "--output", str(tmp_path / "results4")], capture_output=True, text=True,
                     timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
  assert p.returncode == 2, p.stderr
  err = p.stderr.strip()
  assert len(err.splitlines()) == 1 and "Traceback" not in err, err
  assert f"{bad}: the archive is corrupt" in err and "download it again" in err, err
  assert "do not belong together" not in err
  assert sorted(x.name for x in tmp_path.iterdir()) == ["results_text.tar.gz"]  # nothing extracted, no staging


def test_reextracting_the_same_bytes_keeps_modification_times(tmp_path):
  dest = tmp_path / "results4"
  names = extract_results(TARBALL, MANIFEST, dest, log=quiet)
  old = {n: (dest / n).stat().st_mtime_ns for n in names}
  edited = dest / "part-00002-of-00008"
  edited.write_bytes(edited.read_bytes() + b"x")  # a changed file must come back with a new time
  old[edited.name] = edited.stat().st_mtime_ns
  time.sleep(0.02)
  lines = []
  extract_results(TARBALL, MANIFEST, dest, listing=tmp_path / "results4.files", log=lines.append)
  new = {n: (dest / n).stat().st_mtime_ns for n in names}
  assert {n for n in names if new[n] != old[n]} == {edited.name}
  assert any(f"{len(names) - 1} of {len(names)} file(s) had the same bytes" in l for l in lines), lines


def test_a_killed_extractions_staging_folder_is_removed(tmp_path):
  code = ("import os, signal, sys\nfrom mlperf_bert.data import extract\n"
          "def killed(s):\n  if s.startswith('extracted'): os.kill(os.getpid(), signal.SIGKILL)\n"
          "extract.extract_results(sys.argv[1], sys.argv[2], sys.argv[3], log=killed)\n")
  p = subprocess.run([sys.executable, "-c", code, str(TARBALL), str(MANIFEST), str(tmp_path / "results4")],
                     env=dict(os.environ, PYTHONPATH=str(ROOT)))
  assert p.returncode == -signal.SIGKILL
  assert [x.name for x in tmp_path.iterdir() if x.name.endswith(".partial")]  # what the kill left
  extract_results(TARBALL, MANIFEST, tmp_path / "results4", log=quiet)
  assert sorted(x.name for x in tmp_path.iterdir()) == ["results4"]

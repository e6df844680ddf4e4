"""A shard damaged after it was built is refused by every consumer before any of its bytes is used: the features
dump, the training loader and the eval-set reader; value ranges are checked in the same pass. Real shards built
from the demo corpus with the real vocabulary; the damage is one flipped byte, as a bad disk or copy makes it."""
from __future__ import annotations
import struct, subprocess, sys, zlib
from pathlib import Path

import numpy as np
import pytest

from conftest import DEMO
from mlperf_bert.data.instances import build_shard
from mlperf_bert.data.loader import TrainLoader, eval_batches, open_shards
from mlperf_bert.data.shard_header import HEADER_SIZE, layout
from mlperf_bert.data.shards import Shard, read_features
from mlperf_bert.errors import UserError

SETTINGS = dict(max_seq_length=128, max_predictions_per_seq=20)


@pytest.fixture(scope="module")
def good(tmp_path_factory, demo_text) -> Path:
  out = tmp_path_factory.mktemp("integrity") / "part-00001-of-00008.shard"
  build_shard(demo_text / "part-00001-of-00008", DEMO / "vocab.txt", out, log=None, **SETTINGS)
  return out


def sections(path: Path) -> dict[str, tuple[int, int]]:
  """name -> (offset, byte length) of each section of a shard."""
  sh = Shard(path, check=False)
  width = 2 if sh._stream.dtype.itemsize == 2 else 4
  lay = layout(sh.n, sh.n_stream, sh.n_pred, width)
  sh.close()
  return {name: (off, lay[i + 1][3] - off) for i, (name, _, _, off) in enumerate(lay[:-1])}


def damaged(good: Path, out: Path, section: str, fix_crc: bool = False, value=None) -> Path:
  """A copy of `good` with one byte of `section` changed (or one element set to `value`), the CRCs kept or
  recomputed (fix_crc: what a writer bug, not a bad disk, would produce)."""
  data = bytearray(good.read_bytes())
  off, size = sections(good)[section]
  if value is None:
    data[off + size // 2] ^= 0x5A
  else:
    sh = Shard(good, check=False)
    dt = getattr(sh, "_" + section).dtype
    sh.close()
    n = size // dt.itemsize
    idx = {"stream": n // 2, "nsl": 3, "positions": 5, "inputs": 7}[section]
    data[off + idx * dt.itemsize: off + (idx + 1) * dt.itemsize] = np.array([value], dtype=dt).tobytes()
  if fix_crc:
    struct.pack_into("<I", data, 64, zlib.crc32(bytes(data[HEADER_SIZE:])))
    struct.pack_into("<I", data, HEADER_SIZE - 4, zlib.crc32(bytes(data[:HEADER_SIZE - 4])))
  out.write_bytes(bytes(data))
  return out


def test_built_shards_record_the_vocabulary_and_verify(good):
  sh = Shard(good)
  assert sh.vocab_size == 30522 and len(sh) > 1000
  sh.verify()
  assert sh.batch([0, 1])["input_ids"].max() < 30522


@pytest.mark.parametrize("section", ["starts", "lengths", "nsl", "stream", "positions", "inputs"])
def test_features_cli_refuses_a_flipped_byte(good, tmp_path, section):
  bad = damaged(good, tmp_path / "part-00001-of-00008.shard", section)
  npz = tmp_path / "out.npz"
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "features", str(bad), "--npz", str(npz)],
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 2, (section, p.stdout, p.stderr)
  err = p.stderr.strip()
  assert "Traceback" not in err and len(err.splitlines()) == 1, err
  assert str(bad) in err and f"snakemake --force {bad}" in err, err
  assert not npz.exists() and sorted(x.name for x in tmp_path.iterdir()) == [bad.name]


def test_training_loader_refuses_a_damaged_shard_before_its_first_batch(good, tmp_path):
  bad = damaged(good, tmp_path / "part-00002-of-00008.shard", "stream")
  shards = open_shards([good, bad], **SETTINGS)  # opening reads the header only
  with TrainLoader(shards, batch_size=8, seed=0, cycle_length=2) as loader:
    with pytest.raises(UserError, match=rf"{bad.name}: body checksum mismatch.*snakemake --force"):
      next(loader)


def test_eval_reader_refuses_a_damaged_eval_set(good, tmp_path):
  bad = damaged(good, tmp_path / "eval.shard", "nsl")
  ev = open_shards([bad], what="eval set", **SETTINGS)[0]
  with pytest.raises(UserError, match=r"eval.shard: body checksum mismatch"):
    next(eval_batches(ev, 16, 64))
  with pytest.raises(UserError, match="eval.shard"):
    ev[0]


@pytest.mark.parametrize("section,value,why", [
  ("nsl", 17, r"next-sentence label 17 \(expected 0 or 1\)"),
  ("stream", 32871, r"token id 32871 is outside the vocabulary of 30522"),
  ("inputs", 30522, r"masked input token id 30522 is outside the vocabulary"),
  ("positions", 200, r"a masked position lies outside its row"),
])
def test_value_ranges_are_checked_even_when_the_crc_matches(good, tmp_path, section, value, why):
  bad = damaged(good, tmp_path / "x.shard", section, fix_crc=True, value=value)
  with pytest.raises(UserError, match=rf"x.shard: {why}.*snakemake --force"):
    read_features(bad)


def test_opening_stays_cheap_and_the_check_runs_once(good):
  sh = Shard(good)
  assert not sh._verified  # opening reads the header and the small tables only
  sh[0]
  assert sh._verified
  sh.close()

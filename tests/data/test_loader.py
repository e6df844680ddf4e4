"""loader.py: seeded file order, round-robin interleave, resume from a position, prefetch thread, eval padding."""
import numpy as np
import pytest

from tiny_shards import tiny_instances

from mlperf_bert.errors import UserError
from mlperf_bert.data.loader import (TrainLoader, eval_batches, file_order, list_shards, open_shards, stream_indices)
from mlperf_bert.data.shards import Shard, write_shard

SEQ, PRED = 16, 3


@pytest.fixture
def shard_dir(tmp_path):
  rng = np.random.default_rng(0)
  for f, n in enumerate([7, 3, 11, 5, 2, 9]):
    write_shard(tmp_path / f"part-{f:05d}-of-00006.shard", tiny_instances(n, f + 1, rng), max_seq_length=SEQ,
                max_predictions_per_seq=PRED)
  return tmp_path


def _ident(batch):
  return [int(x) for x in batch["input_ids"][:, 1]]


def test_stream_covers_each_epoch_once_and_is_seeded():
  lengths = [7, 3, 11, 5, 2, 9]
  total = sum(lengths)
  picks = stream_indices(lengths, seed=5, count=2 * total)
  for e in range(2):
    ep = picks[e * total:(e + 1) * total]
    assert sorted(ep) == sorted((f, r) for f, n in enumerate(lengths) for r in range(n))
  assert picks[:total] != picks[total:]  # every epoch has its own order
  assert stream_indices(lengths, 5, 40) == stream_indices(lengths, 5, 40)
  assert stream_indices(lengths, 5, 40) != stream_indices(lengths, 6, 40)
  # round robin over the first cycle_length (8 > 6 files: all) files of the seeded order, rows in order per file
  order = file_order(len(lengths), 5, 0)
  assert [f for f, _ in picks[:6]] == order[:6]
  for f in range(len(lengths)):
    rows = [r for ff, r in picks[:total] if ff == f]
    assert rows == list(range(lengths[f]))


@pytest.mark.parametrize("start", [0, 1, 9, 20, 36, 37, 50, 111])
def test_skip_equals_taking(start):
  lengths = [7, 3, 11, 5, 2, 9]
  full = stream_indices(lengths, 3, start + 15, cycle_length=3)
  assert stream_indices(lengths, 3, 15, start=start, cycle_length=3) == full[start:]


def test_train_loader_batches_and_resume(shard_dir):
  shards = open_shards(list_shards(shard_dir), SEQ, PRED)
  with TrainLoader(shards, batch_size=4, seed=7) as it:
    first = [next(it) for _ in range(6)]
  assert [p for p, _ in first] == [4, 8, 12, 16, 20, 24]
  b = first[0][1]
  assert b["input_ids"].shape == (4, SEQ) and b["masked_lm_positions"].shape == (4, PRED)
  assert b["input_ids"].dtype == np.int32 and b["masked_lm_weights"].dtype == np.float32
  assert b["next_sentence_labels"].shape == (4, 1)
  expect = stream_indices([len(s) for s in shards], 7, 24)
  got = [x for _, bb in first for x in _ident(bb)]
  assert got == [(f + 1) * 1000 + r for f, r in expect]
  # resume at position 12 continues the same stream
  with TrainLoader(shards, batch_size=4, seed=7, position=12) as it:
    resumed = [next(it) for _ in range(3)]
  for (p1, b1), (p2, b2) in zip(first[3:], resumed):
    assert p1 == p2
    for k in b1: np.testing.assert_array_equal(b1[k], b2[k])


def test_eval_batches_count_exactly(shard_dir):
  sh = Shard(shard_dir / "part-00002-of-00006.shard")  # 11 rows
  batches = list(eval_batches(sh, 4, 10))
  assert len(batches) == 3
  masks = np.concatenate([m for _, m in batches])
  assert masks.sum() == 10 and masks.tolist() == [1] * 10 + [0] * 2
  assert all(b["input_ids"].shape == (4, SEQ) for b, _ in batches)
  assert [x for b, _ in batches for x in _ident(b)][:10] == [3000 + i for i in range(10)]
  with pytest.raises(UserError, match="eval set has 11 rows"):
    list(eval_batches(sh, 4, 12))


def test_bad_inputs_are_user_errors(shard_dir, tmp_path):
  (tmp_path / "nothing").mkdir()
  with pytest.raises(UserError, match="no \\*.shard files"):
    list_shards(tmp_path / "nothing")
  with pytest.raises(UserError, match="shard directory is empty"):
    open_shards([])
  with pytest.raises(UserError, match="max_seq_length 16.*configured for 128"):
    open_shards(list_shards(shard_dir), 128, PRED)
  p = shard_dir / "part-00000-of-00006.shard"
  data = p.read_bytes()
  p.write_bytes(data[:-10])
  with pytest.raises(UserError, match="truncated"):
    open_shards(list_shards(shard_dir), SEQ, PRED)


# ---- oracle: tinygrad's own batch_load_train_bert on the same files (needs the tinygrad mirror; CI skips) ----
TINYGRAD_MIRROR = __import__("pathlib").Path("/work/.mirror/tinygrad+tinygrad/repo")
TINYGRAD_COMMIT = "e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178"  # the last commit of the v5.1 scripts (tests/fixtures/tinygrad-parity)

_ORACLE = r"""
import json, random, sys
from examples.mlperf.dataloader import batch_load_train_bert
seed, n = int(sys.argv[1]), int(sys.argv[2])
random.seed(seed)  # the one change: tinygrad leaves Python's random unseeded
it = batch_load_train_bert(1)
print(json.dumps([int(next(it)["input_ids"].numpy()[0, 1]) for _ in range(n)]))
"""


@pytest.fixture(scope="module")
def tinygrad_checkout(tmp_path_factory):
  import subprocess
  if not TINYGRAD_MIRROR.is_dir(): pytest.skip(f"{TINYGRAD_MIRROR} absent: tinygrad's loader oracle needs the mirror")
  out = tmp_path_factory.mktemp("tinygrad")
  arch = subprocess.run(["git", "-C", str(TINYGRAD_MIRROR), "archive", TINYGRAD_COMMIT, "tinygrad", "extra", "examples"],
                        capture_output=True, check=True).stdout
  subprocess.run(["tar", "-x", "-C", str(out)], input=arch, check=True)
  return out


@pytest.mark.parametrize("seed,threads", [(0, 3), (5, 8), (12345, 4)])
def test_stream_equals_tinygrad_batch_load_train_bert(shard_dir, tmp_path, tinygrad_checkout, seed, threads):
  """The shards exported to tinygrad's pickle layout (inside this test only) and read by its own loader give the
  same sample stream as this project's loader, over a whole pass of the files."""
  import json, os, pickle, subprocess, sys
  shards = open_shards(list_shards(shard_dir), SEQ, PRED)
  (tmp_path / "train").mkdir()
  for sh in shards:  # tinygrad's layout: one pickle per file, a list of per-sample dicts of (1, ...) arrays
    b = sh.batch(np.arange(len(sh)))
    rows = [{k: v[i:i + 1] for k, v in b.items()} for i in range(len(sh))]
    with open(tmp_path / "train" / (sh.path.stem + ".pkl"), "wb") as f: pickle.dump(rows, f)
  total = sum(len(s) for s in shards)
  env = {**os.environ, "PYTHONPATH": str(tinygrad_checkout), "BASEDIR": str(tmp_path), "NUM_CPU_THREADS": str(threads),
         "DEV": "CPU", "CPU": "1",
         # its file listing is @diskcache'd: a private cache, or it returns another run's files
         "CACHEDB": str(tmp_path / "tinygrad-cache.db")}
  r = subprocess.run([sys.executable, "-c", _ORACLE, str(seed), str(total)], cwd=tinygrad_checkout, env=env,
                     capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  theirs = json.loads(r.stdout.strip().splitlines()[-1])
  ours = [(f + 1) * 1000 + row for f, row in stream_indices([len(s) for s in shards], seed, total, cycle_length=threads)]
  assert ours == theirs

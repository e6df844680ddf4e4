"""Shard format: exact round trip of the reference features, integrity checks, sidecars."""
import subprocess

import numpy as np
import pytest

from conftest import ORACLE
from feature_digest import digest
from mlperf_bert.errors import UserError
from mlperf_bert.constants import FEATURES
from mlperf_bert.data.shards import (Shard, read_features, write_sha256sums, write_shard,
                                write_shard_arrays, write_sidecar)

REF_DIGEST = "86fa9dff905a6f8a0f5c8339a0aa405aabb4a7e4adaa48d6958a353f733cdde6"


@pytest.fixture(scope="module")
def ref():
  with np.load(ORACLE / "ref_part-00000_512.npz", allow_pickle=False) as f:
    return {k: f[k] for k in FEATURES}


def unpadded(f):
  for i in range(len(f["input_ids"])):
    L, c = int(f["input_mask"][i].sum()), int(f["masked_lm_weights"][i].sum())
    yield {"input_ids": f["input_ids"][i, :L], "segment_ids": f["segment_ids"][i, :L],
           "masked_lm_positions": f["masked_lm_positions"][i, :c], "masked_lm_ids": f["masked_lm_ids"][i, :c],
           "next_sentence_label": int(f["next_sentence_labels"][i, 0])}


@pytest.fixture(scope="module")
def ref_shard(ref, tmp_path_factory):
  path = tmp_path_factory.mktemp("shards") / "ref.shard"
  stats = write_shard(path, unpadded(ref), max_seq_length=512, max_predictions_per_seq=76)
  return path, stats


def test_round_trip_reference_features(ref, ref_shard):
  path, stats = ref_shard
  assert stats["instances"] == 2673 and stats["bytes"] == path.stat().st_size
  assert stats["tokens"] == int(ref["input_mask"].sum())
  got = read_features(path)
  assert digest(got) == REF_DIGEST
  for k in FEATURES:
    assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape


def test_random_access_item_and_batch(ref, ref_shard):
  sh = Shard(ref_shard[0])
  assert len(sh) == 2673 and (sh.max_seq_length, sh.max_predictions_per_seq) == (512, 76)
  for i in (0, 1, 1000, 2672, -1):
    item = sh[i]
    for k in FEATURES:
      np.testing.assert_array_equal(item[k], ref[k][i])
      assert item[k].shape == ref[k].shape[1:]
  idx = [7, 3, 7, 2000]
  b = sh.batch(idx)
  for k in FEATURES:
    np.testing.assert_array_equal(b[k], ref[k][idx])
  b["input_ids"][0, :] = -5  # a repeated index must be an independent copy, and the file stays untouched
  assert (b["input_ids"][2] == ref["input_ids"][7]).all()
  assert (sh[7]["input_ids"] == ref["input_ids"][7]).all()
  with pytest.raises(IndexError):
    sh[2673]
  sh.verify()
  sh.close()


def test_size_and_determinism(ref, ref_shard, tmp_path):
  path, _ = ref_shard
  again = tmp_path / "again.shard"
  write_shard(again, unpadded(ref), max_seq_length=512, max_predictions_per_seq=76)
  assert again.read_bytes() == path.read_bytes()
  # generic instances (no shared stream) still take < 2 bytes per token plus 4 per prediction and tables
  assert path.stat().st_size < 2 * ref["input_mask"].sum() + 4 * ref["masked_lm_weights"].sum() + 64 * 2673


def test_truncated_and_corrupt_files_are_refused(ref_shard, tmp_path):
  data = ref_shard[0].read_bytes()
  cut = tmp_path / "cut.shard"
  cut.write_bytes(data[:-1000])
  with pytest.raises(UserError, match="cut.shard.*truncated"):
    Shard(cut)
  cut.write_bytes(data[:50])
  with pytest.raises(UserError, match="cut.shard"):
    Shard(cut)
  bad = tmp_path / "bad.shard"
  bad.write_bytes(data[:20] + bytes([data[20] ^ 1]) + data[21:])
  with pytest.raises(UserError, match="bad.shard.*checksum"):
    Shard(bad)
  flip = bytearray(data)
  flip[len(data) // 2] ^= 0xFF
  bad.write_bytes(bytes(flip))
  sh = Shard(bad)  # body damage is found by verify()
  with pytest.raises(UserError, match="bad.shard.*checksum"):
    sh.verify()
  sh.close()
  other = tmp_path / "text.shard"
  other.write_text("hello\n" * 100)
  with pytest.raises(UserError, match="text.shard.*not a shard"):
    Shard(other)
  with pytest.raises(UserError, match="missing.shard"):
    Shard(tmp_path / "missing.shard")


def test_failed_write_leaves_nothing(tmp_path):
  bad = [{"input_ids": [2, 5, 3], "segment_ids": [0, 1, 0], "masked_lm_positions": [], "masked_lm_ids": [],
          "next_sentence_label": 0}]
  with pytest.raises(ValueError):
    write_shard(tmp_path / "x.shard", bad, max_seq_length=8, max_predictions_per_seq=2)
  assert list(tmp_path.iterdir()) == []
  with pytest.raises(ValueError, match="max_seq_length"):
    write_shard(tmp_path / "y.shard", [{"input_ids": list(range(9)), "segment_ids": [0] * 9,
                                        "masked_lm_positions": [1], "masked_lm_ids": [4], "next_sentence_label": 1}],
                max_seq_length=8, max_predictions_per_seq=2)
  assert list(tmp_path.iterdir()) == []


def test_empty_wide_ids_and_framed_spans(tmp_path):
  st = write_shard(tmp_path / "e.shard", [], max_seq_length=16, max_predictions_per_seq=4)
  assert st["instances"] == 0 and len(Shard(tmp_path / "e.shard")) == 0
  assert read_features(tmp_path / "e.shard")["input_ids"].shape == (0, 16)
  # ids above 65535 switch the stream to 4-byte tokens
  inst = {"input_ids": [1, 70000, 2, 99999, 2], "segment_ids": [0, 0, 0, 1, 1], "masked_lm_positions": [1, 3],
          "masked_lm_ids": [123456, 5], "next_sentence_label": 1}
  write_shard(tmp_path / "w.shard", [inst], max_seq_length=8, max_predictions_per_seq=3)
  got = Shard(tmp_path / "w.shard")[0]
  assert got["input_ids"].tolist() == [1, 70000, 2, 99999, 2, 0, 0, 0]
  assert got["masked_lm_ids"].tolist() == [123456, 5, 0] and got["masked_lm_positions"].tolist() == [1, 3, 0]
  assert got["masked_lm_weights"].tolist() == [1.0, 1.0, 0.0] and got["next_sentence_labels"].tolist() == [1]
  assert got["segment_ids"].tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
  # span form: row = [CLS] stream[a] [SEP] stream[b] [SEP]
  write_shard_arrays(tmp_path / "f.shard", stream=[10, 11, 12, 13, 14], starts=[[0, 3]], lengths=[[3, 2]], nsl=[0],
                     pred_offsets=[0, 1], positions=[2], inputs=[103], max_seq_length=10, max_predictions_per_seq=2,
                     framed=True, cls_id=101, sep_id=102)
  got = Shard(tmp_path / "f.shard")[0]
  assert got["input_ids"].tolist() == [101, 10, 103, 12, 102, 13, 14, 102, 0, 0]
  assert got["segment_ids"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
  assert got["input_mask"].tolist() == [1] * 8 + [0] * 2
  assert got["masked_lm_ids"].tolist() == [11, 0]


def test_sidecars_and_sha256sums(ref_shard, tmp_path):
  a, b = tmp_path / "a.shard", tmp_path / "b.shard"
  a.write_bytes(b"alpha")
  b.write_bytes(ref_shard[0].read_bytes())
  sides = [write_sidecar(b), write_sidecar(a)]
  assert sides[1].read_text().startswith("8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8  a.shard")
  sums = write_sha256sums(tmp_path / "SHA256SUMS", sides)
  assert [l.split("  ")[1] for l in sums.read_text().splitlines()] == ["a.shard", "b.shard"]
  ok = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
  assert ok.returncode == 0, ok.stdout + ok.stderr
  a.write_bytes(b"alphA")
  assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True).returncode != 0
  (tmp_path / "junk.sha256").write_text("nonsense\n")
  with pytest.raises(UserError, match="junk.sha256"):
    write_sha256sums(tmp_path / "S2", [tmp_path / "junk.sha256"])

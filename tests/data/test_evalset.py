"""Eval set: eval.txt -> instances equal to the reference's eval_all, then rows picked as pick_eval_samples.py."""
import numpy as np
import pytest

from conftest import DEMO, ORACLE
from feature_digest import KEYS, digest
from mlperf_bert.cli import main
from mlperf_bert.data.evalset import build_evalset, pick_indices
from mlperf_bert.data.shards import Shard, read_features

EVAL_ALL = "818977e5fb6760f9362df2a0d89c914f9398309a2284bbd212d71202d31f10da"


@pytest.fixture(scope="module")
def ref_all():
  with np.load(ORACLE / "ref_eval_all_512.npz", allow_pickle=False) as f:
    return {k: f[k] for k in KEYS}


def test_pick_indices_match_reference_formula():
  assert pick_indices(2862, 10000)[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 2]
  assert pick_indices(2862, 10000)[-1] == 2861
  assert pick_indices(10, 4).tolist() == [0, 2, 5, 7]
  assert pick_indices(5, 5).tolist() == [0, 1, 2, 3, 4]
  n, N = 12345, 10000
  assert pick_indices(n, N).tolist() == [int(i * (n / N)) for i in range(N)]


def test_eval_set_is_picked_from_reference_instances(tmp_path, demo_text, ref_all):
  out = tmp_path / "eval.shard"
  logs = []
  with pytest.warns(UserWarning, match="gave 2862 instances for eval_examples=10000: 7138 rows of .*eval.shard repeat"):
    st = build_evalset(demo_text / "eval.txt", DEMO / "vocab.txt", out, num_examples=10000, log=logs.append)
  assert st["candidates"] == 2862 and st["instances"] == 10000
  assert any("10000 instances" in l for l in logs)
  assert (tmp_path / "eval.shard.sha256").read_text().split()[1] == "eval.shard"
  got = read_features(out)
  rows = [int(i * 2862 / 10000) for i in range(10000)]
  assert digest({k: v[rows] for k, v in ref_all.items()}) == digest(got)
  sh = Shard(out)  # repeated rows are independent copies
  a, b = sh.batch([0, 1])["input_ids"], sh[0]["input_ids"]
  a[0, :] = 0
  assert (b == ref_all["input_ids"][0]).all() and (sh[1]["input_ids"] == ref_all["input_ids"][0]).all()


def test_pre_pick_instances_equal_reference(tmp_path, demo_text):
  out = tmp_path / "all.shard"
  st = build_evalset(demo_text / "eval.txt", DEMO / "vocab.txt", out, num_examples=2862, log=None)
  assert st["instances"] == 2862
  assert digest(read_features(out)) == EVAL_ALL


def test_fewer_rows_than_instances_and_cli(tmp_path, demo_text, ref_all):
  out, npz = tmp_path / "e100.shard", tmp_path / "e100.npz"
  assert main(["evalset", "--input", str(demo_text / "eval.txt"), "--vocab", str(DEMO / "vocab.txt"),
               "--output", str(out), "--num-examples", "100", "--no-progress"]) == 0
  assert Shard(out).eval_set  # its header says it is the eval set: training refuses it as a shard
  assert main(["features", str(out), "--npz", str(npz)]) == 0
  with np.load(npz, allow_pickle=False) as f:
    got = {k: f[k] for k in KEYS}
  rows = [int(i * (2862 / 100)) for i in range(100)]
  for k in KEYS:
    np.testing.assert_array_equal(got[k], ref_all[k][rows])

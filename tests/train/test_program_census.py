"""The distinct programs of the train and eval steps (docs/benchmarks.md "Why 490 programs where tinygrad's step has
252"): the batch cut on the host into each device's rows is, bit for bit, what slicing it on the devices gave, and the
census fixture (tools/program_census.py: this project's step beside tinygrad's own train_step_bert, both on tinygrad
0.14 at tinybox_green's settings, compiled for sm_89) adds up. Its counts against the dress's own are checked in
tests/train/test_dress.py, beside the dress they need."""
import json

import numpy as np
import pytest
from tinygrad import Tensor

from conftest import FIXTURES
from mlperf_bert.errors import UserError
from mlperf_bert.train.trainer import devices_for, fake_batch, host_shard, step_inputs

CENSUS = FIXTURES / "program-census" / "tinybox_green-e0139fa-2layers.json"


def _device_bytes(t: Tensor) -> list[bytes]:
  real = (t.uop.src[0] if t.uop.op.name == "UNSHARD" else t.uop).base.realized
  return [b.as_memoryview().tobytes() for b in (real.bufs if hasattr(real, "bufs") else [real])]


@pytest.mark.parametrize("gpus", [1, 2, 3])
def test_the_host_cut_batch_is_what_device_slicing_gave_bit_for_bit(gpus):
  devices = devices_for("CPU", gpus)
  b = fake_batch(6, 16, 4, 120, np.random.default_rng(0))
  b["masked_lm_weights"] = np.random.default_rng(1).random((6, 4), dtype=np.float32)   # not just ones
  b["row_mask"] = np.array([1, 1, 0, 1, 0, 1], np.float32)
  keys = [*b]
  for k, cut in zip(keys, step_inputs(b, devices, keys)):
    sliced = Tensor(b[k]).shard(devices, axis=0) if gpus > 1 else Tensor(b[k]).to(devices[0])
    Tensor.realize(cut, sliced)
    assert cut.device == sliced.device and cut.shape == sliced.shape and cut.dtype == sliced.dtype, k
    assert _device_bytes(cut) == _device_bytes(sliced), k
    assert np.array_equal(cut.numpy(), b[k]), k


def test_a_batch_that_does_not_split_over_the_devices_is_one_line():
  with pytest.raises(UserError, match="does not split evenly over 4 devices"):
    host_shard(np.zeros((6, 3), np.int32), devices_for("CPU", 4))


def test_the_census_fixture_adds_up_and_names_its_tinygrad():
  r = json.loads(CENSUS.read_text())
  assert r["tinygrad_commit"].startswith("e0139fa") and r["tinygrad"] == "0.14.0" and r["target"] == "CUDA:sm_89"
  assert r["settings"] == {"GPUS": 6, "BS": 90, "EVAL_BS": 90, "DEFAULT_FLOAT": "half"} and r["layers"] == 2
  for side in ("project", "tinygrad"):
    for step in ("train", "eval"):
      assert r["counts"][side][step] == len(r["programs"][side][step])
  for step, d in r["diff"].items():
    for side in ("project", "tinygrad"):
      assert sum(c["count"] for c in d[side].values()) == r["counts"][side][step], (step, side)
      assert sum(c["common"] for c in d[side].values()) == d["common"], (step, side)
    # no program of this project's steps slices the batch on the first device any more; the per-device programs
    # (the gradients' all-reduce, each device's own chunks) are tinygrad's own, the same on both sides
    assert "first device only" not in d["project"], step
  pd = r["diff"]["train"]["project"]["per device"]
  assert pd["count"] == pd["common"] == r["diff"]["train"]["tinygrad"]["per device"]["count"] > 0

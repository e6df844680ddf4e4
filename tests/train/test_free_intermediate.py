"""FREE_INTERMEDIATE (train_bert's default at v5.1; tinybox_green and tinybox_red set it): freeing the captured
steps' intermediates around each eval must not change training. tinygrad 0.14's own CapturedJit.free_intermediates
frees every weight, the LAMB learning rates and the RNG counter too (mlperf_bert/train/jitmem.py): the loss after
the first eval went back to the untrained 11.02 and under HALF diverged. These runs train across two evals with it
on and off, on one device in fp32 and on two CPU devices in HALF, and must give the same losses and accuracies."""
import math

import numpy as np
import pytest
from tinygrad import Tensor

from test_train import data, make_run, cpu_kernels  # noqa: F401  (the module's fixtures and run factory)
from mlperf_bert.train import jitmem
from mlperf_bert.train.trainer import ModelTrainer

# training runs of minutes on 2 cores: scripts/test.sh --fast leaves them out, the full run (CI) has them
pytestmark = pytest.mark.slow


CASES = {"fp32-1dev": dict(devices=None),
         "half-2dev": dict(devices=("CPU", "CPU:1"), GPUS=2, DEFAULT_FLOAT="HALF", SUM_DTYPE="HALF", LOSS_SCALER=2.0 ** 11)}


@pytest.mark.full  # test_parity.py checks FREE_INTERMEDIATE 0 and 1 against tinygrad's numbers; the rehearsal runs it on 6 devices
@pytest.mark.parametrize("case", CASES)
def test_losses_after_two_evals_equal_with_and_without_free_intermediate(data, tmp_path, case):  # noqa: F811
  kw = dict(CASES[case], TRAIN_STEPS=9, EVAL_STEP_FREQ=3, INIT_BENCHMARK_STEPS=0, EVAL_SAMPLES=16, CKPT=False)
  off = make_run(data, tmp_path / "off", FREE_INTERMEDIATE=0, **kw).run()
  on = make_run(data, tmp_path / "on", FREE_INTERMEDIATE=1, **kw).run()
  assert [s for s, _ in on.accuracies] == [3, 6, 9]            # three evals: two with steps after them
  assert len(on.losses) == 9 and all(math.isfinite(x) for x in on.losses)
  assert on.losses == off.losses                               # bit for bit: only intermediates were freed
  assert on.accuracies == off.accuracies
  # and the steps after each eval continue where training was (the broken freeing restarted from zero weights)
  for s in (3, 6):
    assert on.losses[s] <= on.losses[s - 1] * 1.01 + 0.05


def test_free_keeps_the_training_state_and_frees_the_rest(data, tmp_path):  # noqa: F811
  run = make_run(data, tmp_path, INIT_BENCHMARK_STEPS=0)
  Tensor.manual_seed(0)
  steps = ModelTrainer(run.cfg, run.s, run.devices, seed=0)
  from mlperf_bert.train.trainer import fake_batch
  b = fake_batch(4, 32, 5, 128, np.random.default_rng(0))
  for _ in range(3): steps.train(b)                            # captured on the first call, then replayed
  keep = steps.persistent_tensors()
  before = [t.numpy().copy() for t in keep]
  freed = steps.free_intermediates(steps.train_step)
  assert freed > 10                                            # activations and gradients were freed
  for t, x in zip(keep, before):                               # every weight, LAMB state, lr and RNG counter kept
    np.testing.assert_array_equal(t.numpy(), x)
  # tinygrad's own free_intermediates would have taken these: the set this module protects is not empty
  written = {id(b) for u in steps.train_step.captured._written_uops
             if (b := __import__("tinygrad.uop.ops", fromlist=["buffers"]).buffers.get(u)) is not None}
  assert {id(b) for t in keep for b in jitmem._device_buffers(t)} & written

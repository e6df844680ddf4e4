"""How the steps hold their memory (train/jitmem.py, train/arena.py): captured on their first call, their
intermediates packed by lifetime, and under FREE_INTERMEDIATE 0 the eval's placed in the train step's arenas.

The packing is checked on random lifetimes; the steps on a tiny BERT on the CPU, where they run: the first call is
captured and computes what the old un-jitted first call did, bit for bit; it holds no more than the captured step; the
eval shares the train step's arenas and gives the same losses and counts as an eval in arenas of its own. The figures
at BERT-large are the dress's (tests/train/test_dress.py, docs/benchmarks.md "Headroom")."""
import random

import numpy as np
import pytest
from tinygrad import Tensor

from test_train import data, make_run, cpu_kernels  # noqa: F401  (the module's fixtures and run factory)
from mlperf_bert.train.arena import live_peak, pack
from mlperf_bert.train.trainer import ModelTrainer, fake_batch


def _overlap(a, b) -> bool: return a[0] <= b[1] and b[0] <= a[1]


@pytest.mark.parametrize("seed", range(20))
def test_packed_buffers_never_share_bytes_while_both_live(seed):
  rng = random.Random(seed)
  n = rng.randint(1, 200)
  sizes = [256 * rng.randint(1, 64) for _ in range(n)]
  lives = [(a, a + rng.randint(0, 60)) for a in (rng.randint(0, 400) for _ in range(n))]
  offsets, size = pack(sizes, lives)
  for i in range(n):
    assert offsets[i] % 256 == 0 and offsets[i] + sizes[i] <= size
    for j in range(i):
      if _overlap(lives[i], lives[j]):
        assert offsets[i] + sizes[i] <= offsets[j] or offsets[j] + sizes[j] <= offsets[i], (i, j)
  assert live_peak(sizes, lives) <= size


def test_a_step_shaped_plan_meets_the_live_peak():
  """A forward pass's activations kept for the backward, freed in reverse, with short-lived temporaries between:
  tinygrad's first-use-order TLSF left holes on such steps; largest-first packing needs no more than the live peak."""
  sizes, lives, t = [], [], 0
  for layer in range(12):
    sizes += [4096 * (1 + layer % 3), 1024]
    lives += [(t, 100 - t), (t, t + 1)]          # an activation until its backward; a temporary
    t += 2
  _, size = pack(sizes, lives)
  assert size == live_peak(sizes, lives)


def _trainer(run, share=True) -> ModelTrainer:
  Tensor.manual_seed(0)
  tr = ModelTrainer(run.cfg, run.s, run.devices, seed=0)
  tr.share_arenas = share
  return tr


def _bytes(fn) -> tuple[object, int, int]:
  """fn's result, the bytes allocated on the device when it returned and the most at any moment during it, both over
  what was allocated before (one device)."""
  from mlperf_bert.train.dress.measure import _watch_memory
  mem = _watch_memory()
  mem.reset()
  before = dict(mem)
  out = fn()
  return out, sum(mem[d] - before.get(d, 0) for d in mem), max(mem.peak[d] - before.get(d, 0) for d in mem.peak)


@pytest.mark.slow
def test_the_first_call_is_captured_and_computes_what_the_un_jitted_call_did(data, tmp_path):  # noqa: F811
  run = make_run(data, tmp_path, INIT_BENCHMARK_STEPS=0)
  b = [fake_batch(4, 32, 5, 128, np.random.default_rng(i)) for i in range(3)]
  old = _trainer(run)                           # (tinygrad's RNG state is global: one trainer at a time)
  old.train_step.cnt = 0                        # tinygrad's default: the first call runs un-jitted
  losses_old = [old.train(x)[0].item() for x in b]
  new = _trainer(run)
  (loss, _, _), held, peak = _bytes(lambda: new.train(b[0]))
  assert new.train_step.captured is not None    # captured by its first call
  assert [loss.item()] + [new.train(x)[0].item() for x in b[1:]] == losses_old
  assert peak <= held + 4096                    # nothing live during the call beyond what the captured step keeps


@pytest.mark.slow
def test_the_eval_in_the_train_step_s_arenas_gives_the_same_numbers_and_adds_almost_nothing(data, tmp_path):  # noqa: F811
  run = make_run(data, tmp_path, INIT_BENCHMARK_STEPS=0)
  rng = np.random.default_rng(0)
  b, e = fake_batch(4, 32, 5, 128, rng), fake_batch(4, 32, 5, 128, rng)   # the eval's lanes fit in the train's
  ones = np.ones(4, np.float32)
  out = {}
  for share in (True, False):                   # one trainer after the other (tinygrad's RNG state is global)
    tr = _trainer(run, share)
    tr.train(b)
    counts, added, _ = _bytes(lambda: tr.evaluate(e, ones))
    seq = [float(c.item()) for c in counts] + [tr.train(b)[0].item(), *(float(c.item()) for c in tr.evaluate(e, ones))]
    out[share] = (seq, added, tr)
  assert out[True][0] == out[False][0]          # the same eval counts and losses around it, bit for bit
  eval_arenas = sum(a.max_numel() for a, _ in out[False][2].plans["eval"].lanes.values())
  assert eval_arenas > 0 and out[True][1] < out[False][1] - 0.9 * eval_arenas
  shared = out[True][2].plans
  train_arenas = {id(a) for a, _ in shared["train"].lanes.values()}
  assert all(id(a) in train_arenas for a, _ in shared["eval"].lanes.values())

"""optim.py: schedule against the numpy formula, clipping, loss scaling, and LAMB steps against a numpy LAMB."""
import dataclasses

import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.helpers import Context

from mlperf_bert.train.hparams import resolve
from mlperf_bert.train.optim import CLIP_NORM, ScheduledLAMB, lr_at


def _settings(**fields):
  """The run's OptimizerSettings (the schema's defaults: LAMB's betas, epsilon, decay, power) with some fields set."""
  return dataclasses.replace(resolve({}, seed=0, eval_examples=10).optimizer, **fields)


def test_lr_formula_shape():
  lrs = lr_at(np.arange(0, 11), base_lr=1.0, warmup_steps=4, train_steps=10)
  np.testing.assert_allclose(lrs[:5], [0, .25, .5, .75, 1.0])
  # tinygrad's PolynomialDecayWithWarmup divides by train_steps - warmup + 1 (7 here): the last update k=9 has 2/7
  np.testing.assert_allclose(lrs[4:], [1.0, 6/7, 5/7, 4/7, 3/7, 2/7, 1/7])
  sq = lr_at(np.arange(4, 11), base_lr=2.0, warmup_steps=4, train_steps=10, power=2.0)
  np.testing.assert_allclose(sq, 2.0 * (np.array([7, 6, 5, 4, 3, 2, 1]) / 7) ** 2)


def _numpy_lamb(ws, gs, ms, vs, t, lr, b1, b2, eps, wd):
  out = []
  for i, (w, g) in enumerate(zip(ws, gs)):
    ms[i] = b1 * ms[i] + (1 - b1) * g
    vs[i] = b2 * vs[i] + (1 - b2) * g * g
    mh, vh = ms[i] / (1 - b1 ** t), vs[i] / (1 - b2 ** t)
    up = mh / (np.sqrt(vh) + eps) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(up)
    r = (r1 / r2) if (r1 > 0 and r2 > 0) else 1.0
    out.append(w - lr * r * up)
  return out


def _quad_problem(seed=0):
  rng = np.random.default_rng(seed)
  w0, b0 = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
  x, y = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
  return w0, b0, x, y


def _np_grads(w, b, x, y, scale=1.0):
  # loss = mean((x@w + b - y)^2) * scale
  r = x @ w + b - y
  n = r.size
  return (2 * x.T @ r / n) * scale, (2 * r.sum(0) / n) * scale, float((r ** 2).mean())


@pytest.mark.parametrize("loss_scaler,clip", [(1.0, 1.0), (2.0 ** 11, 1.0), (1.0, 0.05)])
def test_lamb_steps_match_numpy(loss_scaler, clip):
  w0, b0, x, y = _quad_problem()
  o = _settings(base_lr=0.1, train_steps=6, warmup_steps=2, beta_1=0.8, beta_2=0.95, epsilon=1e-6,
                weight_decay=0.05, loss_scaler=loss_scaler)
  W, B = Tensor(w0).contiguous().realize(), Tensor(b0).contiguous().realize()
  tr = ScheduledLAMB([W], [B], o, clip_norm=clip)  # the bias in the group without weight decay
  X, Y = Tensor(x), Tensor(y)

  ws, bs = w0.astype(np.float64), b0.astype(np.float64)
  mw, vw, mb, vb = [np.zeros_like(ws)], [np.zeros_like(ws)], [np.zeros_like(bs)], [np.zeros_like(bs)]
  for k in range(5):
    with Context(TRAINING=1):
      tr.zero_grad()
      loss = ((X @ W + B - Y) ** 2).mean()
      tr.backward(loss)
      norm, lr = tr.clip_and_step()
    gw, gb, _ = _np_grads(ws, bs, x, y)
    n = np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    np.testing.assert_allclose(norm.item(), n, rtol=1e-4)
    if n > clip: gw, gb = gw * clip / n, gb * clip / n
    want_lr = float(lr_at(k, 0.1, 2, 6))
    np.testing.assert_allclose(lr.item(), want_lr, rtol=1e-6, atol=1e-9)
    (ws,) = _numpy_lamb([ws], [gw], mw, vw, k + 1, want_lr, 0.8, 0.95, 1e-6, 0.05)
    (bs,) = _numpy_lamb([bs], [gb], mb, vb, k + 1, want_lr, 0.8, 0.95, 1e-6, 0.0)
    np.testing.assert_allclose(W.numpy(), ws, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(B.numpy(), bs, rtol=2e-4, atol=1e-5)
  assert tr.schedule.step.item() == 5


def test_schedule_on_device_matches_formula_with_power():
  o = _settings(base_lr=0.01, train_steps=12, warmup_steps=3, poly_power=0.5)
  P = Tensor([1.0, 2.0]).contiguous().realize()
  tr = ScheduledLAMB([P], [], o)
  got = []
  for _ in range(12):
    with Context(TRAINING=1):
      tr.zero_grad()
      (P * P).sum().backward()
      _, lr = tr.clip_and_step()
    got.append(lr.item())
  np.testing.assert_allclose(got, lr_at(np.arange(12), 0.01, 3, 12, power=0.5), rtol=1e-5, atol=1e-9)


def test_clipping_bounds_the_update_norm():
  # a huge gradient: after clipping the first moment (1-b1)*g_clipped has norm (1-b1)*clip
  o = _settings(base_lr=0.0, train_steps=10, warmup_steps=1, beta_1=0.5)
  P = Tensor([3.0, 4.0]).contiguous().realize()
  tr = ScheduledLAMB([P], [], o)  # CLIP_NORM, train_bert's 1.0
  assert CLIP_NORM == 1.0
  with Context(TRAINING=1):
    tr.zero_grad()
    (P * 1000.0).sum().backward()
    norm, _ = tr.clip_and_step()
  np.testing.assert_allclose(norm.item(), 1000.0 * np.sqrt(2), rtol=1e-5)
  m = tr.optimizer.optimizers[0].m[0].numpy()
  np.testing.assert_allclose(np.linalg.norm(m), 0.5, rtol=1e-5)
  np.testing.assert_allclose(m, 0.5 * np.array([1, 1]) / np.sqrt(2), rtol=1e-5)

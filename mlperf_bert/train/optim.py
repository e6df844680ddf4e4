"""LAMB in two parameter groups, the warmup + polynomial-decay learning rate, global grad-norm clipping, loss scaling.

The learning-rate schedule (step k counts optimizer updates from 0):
  k <  warmup:  lr = base_lr * k / warmup                     (the first update has lr 0, as the reference's)
  k >= warmup:  lr = (base_lr - end_lr) * (1 - (k - warmup) / (train_steps - warmup + 1)) ** power + end_lr
as tinygrad's PolynomialDecayWithWarmup (examples/mlperf/lr_schedulers.py) computes it: the `+ 1` means the last
update (k = train_steps - 1) still has a rate of 2/(train_steps - warmup + 1) of the peak, not 0. `lr_at` is the numpy formula, `Schedule` the same
computed on the device inside the jitted step (its counter is part of the training state). Every value comes from the
run's `OptimizerSettings` (train/settings.py; their defaults: schemas/platform.schema.yaml) but two constants of
train_bert that no platform sets: the rate the decay ends at (END_LR) and the global gradient norm clipped to
(CLIP_NORM).
"""
from __future__ import annotations

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.nn.optim import LAMB, OptimizerGroup

from mlperf_bert.train.settings import OptimizerSettings

END_LR = 0.0     # the learning rate the polynomial decay ends at (PolynomialDecayWithWarmup's end_lr)
CLIP_NORM = 1.0  # the global gradient norm the update is clipped to


def lr_at(step, base_lr: float, warmup_steps: int, train_steps: int, power: float = 1.0, end_lr: float = END_LR):
  """The schedule as a numpy formula (scalar or array of steps)."""
  k = np.asarray(step, dtype=np.float64)
  warm = base_lr * k / max(warmup_steps, 1)
  frac = np.clip(1.0 - (k - warmup_steps) / (train_steps - warmup_steps + 1), 0.0, 1.0)
  decay = (base_lr - end_lr) * frac ** power + end_lr
  return np.where(k < warmup_steps, warm, decay)


class Schedule:
  """Device-side schedule: `lr()` is the rate of the current update; `advance()` counts the update."""
  def __init__(self, o: OptimizerSettings, device):
    self.o = o
    self.step = Tensor.zeros((1,), dtype=dtypes.float32, device=device).contiguous().is_param_(False).realize()

  def lr(self) -> Tensor:
    o, k = self.o, self.step
    warm = k * (o.base_lr / max(o.warmup_steps, 1))
    frac = (1.0 - (k - o.warmup_steps) / (o.train_steps - o.warmup_steps + 1)).clip(0.0, 1.0)
    if o.poly_power == 1.0: shaped = frac
    else: shaped = (frac > 0).where(frac.maximum(1e-30) ** o.poly_power, 0.0)
    decay = shaped * (o.base_lr - END_LR) + END_LR
    return (k < o.warmup_steps).where(warm, decay)

  def advance(self) -> Tensor: return self.step.assign(self.step + 1)


class ScheduledLAMB:
  """LAMB in two groups (weight decay, none), its learning-rate schedule, global grad-norm clipping, loss scaling.

  Inside a `Context(TRAINING=1)` (and a TinyJit), after the forward pass: `zero_grad()`, `backward(loss)`, then
  `clip_and_step()`, which realizes the update and returns (global grad norm, lr of this update). `state_tensors()`
  is the training state a checkpoint holds. `clip_norm`: CLIP_NORM (another only in the tests).
  """
  def __init__(self, decay_params: list[Tensor], no_decay_params: list[Tensor], o: OptimizerSettings,
               clip_norm: float = CLIP_NORM):
    self.o, self.clip_norm = o, clip_norm
    groups = []
    if decay_params:
      groups.append(LAMB(decay_params, lr=o.base_lr, b1=o.beta_1, b2=o.beta_2, eps=o.epsilon,
                         weight_decay=o.weight_decay, adam=False))
    if no_decay_params:
      groups.append(LAMB(no_decay_params, lr=o.base_lr, b1=o.beta_1, b2=o.beta_2, eps=o.epsilon,
                         weight_decay=0.0, adam=False))
    self.optimizer = OptimizerGroup(*groups)
    self.schedule = Schedule(o, groups[0].device)
    for o in groups: o.lr.assign(self.schedule.lr().cast(o.lr.dtype)).realize()

  @property
  def params(self) -> list[Tensor]: return self.optimizer.params

  def zero_grad(self): self.optimizer.zero_grad()

  def backward(self, loss: Tensor):
    """Backward of the scaled loss (loss scaling for fp16)."""
    (loss * self.o.loss_scaler if self.o.loss_scaler != 1.0 else loss).backward()

  def clip_and_step(self) -> tuple[Tensor, Tensor]:
    """Unscale grads, clip by global norm, set this update's lr, LAMB step, advance the schedule."""
    params, scaler, clip = self.optimizer.params, self.o.loss_scaler, self.clip_norm
    if isinstance(params[0].device, tuple):
      # data parallel: materialize the (all-reduced) grads first. tinygrad 0.14 fails to compile the LAMB update of
      # a replicated parameter whose grad is a padded slice (the position embeddings) when fused with it.
      Tensor.realize(*[p.grad for p in params if p.grad is not None])
    norm_sq = None
    for p in params:
      assert p.grad is not None, f"no gradient for a parameter of shape {p.shape}"
      if scaler != 1.0: p.grad = p.grad * (1.0 / scaler)
      s = p.grad.float().square().sum()
      norm_sq = s if norm_sq is None else norm_sq + s
    global_norm = norm_sq.sqrt().contiguous()
    for p in params:
      p.grad = (global_norm > clip).where((p.grad * (clip / global_norm)).cast(p.grad.dtype), p.grad)
    lr = self.schedule.lr()
    for o in self.optimizer.optimizers: o.lr.assign(lr.cast(o.lr.dtype))
    outs = self.optimizer.schedule_step()
    outs.append(self.schedule.advance())
    Tensor.realize(*outs, global_norm, lr)
    return global_norm, lr

  # ---- training state (for checkpoints): name -> tensor, all of them ----
  def state_tensors(self) -> dict[str, Tensor]:
    st: dict[str, Tensor] = {"schedule.step": self.schedule.step}
    for gi, o in enumerate(self.optimizer.optimizers):
      st[f"opt{gi}.b1_t"], st[f"opt{gi}.b2_t"], st[f"opt{gi}.lr"] = o.b1_t, o.b2_t, o.lr
      for i, (m, v) in enumerate(zip(o.m, o.v)):
        st[f"opt{gi}.m.{i}"], st[f"opt{gi}.v.{i}"] = m, v
    return st


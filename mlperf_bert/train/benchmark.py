"""BENCHMARK=n (`train --benchmark N`): n steps on real data from a fresh model and the estimated time to TRAIN_STEPS,
as train_bert's BENCHMARK; and the one timed step it shares with the training loop (train/run.py).

    t, (position, next_batch) = timed_step(trainer, batch, loader, index, devices, say)
    figures = benchmark(build, shards, s, n, devices, say)      # build(): a fresh, seeded ModelTrainer
"""
from __future__ import annotations
import dataclasses, time
from typing import Callable

import numpy as np
from tinygrad.helpers import GlobalCounters

from mlperf_bert.data.loader import TrainLoader
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.trainer import ModelTrainer


@dataclasses.dataclass
class StepTiming:
  """One timed train step: seconds in total, enqueuing (python), fetching the next batch, waiting for the device."""
  loss: float
  lr: float
  total_s: float
  python_s: float
  fetch_s: float
  device_s: float
  ops: int
  mem: int
  end: float               # time.perf_counter() when the step finished


def timed_step(trainer: ModelTrainer, data: dict[str, np.ndarray], loader: TrainLoader, index: int,
               devices: tuple[str, ...], say: Callable[[str], None]
               ) -> tuple[StepTiming, tuple[int, dict[str, np.ndarray]]]:
  """One train step on `data` while the loader fetches the next batch, timed and printed as train_bert prints it;
  returns the timing and the loader's (position, next batch)."""
  st = time.perf_counter()
  GlobalCounters.reset()
  loss_t, _, lr_t = trainer.train(data)
  pt = time.perf_counter()
  fetched = next(loader)
  dt = time.perf_counter()
  loss, lr = loss_t.item(), lr_t.item()
  cl = time.perf_counter()
  t = StepTiming(loss, lr, cl - st, pt - st, dt - pt, cl - dt, GlobalCounters.global_ops, GlobalCounters.global_mem, cl)
  dev = devices[0] if len(devices) == 1 else f"{devices[0]} * {len(devices)}"
  say(f"{index:5} {t.total_s * 1e3:7.2f} ms run, {t.python_s * 1e3:7.2f} ms python, {t.fetch_s * 1e3:6.2f} ms "
      f"fetch data, {t.device_s * 1e3:7.2f} ms {dev}, {loss:5.2f} loss, {lr:.6f} LR, "
      f"{GlobalCounters.mem_used / 1e9:.2f} GB used, {t.ops * 1e-9 / t.total_s:9.2f} GFLOPS")
  return t, fetched


def benchmark(build: Callable[[], ModelTrainer], shards, s: Settings, n: int, devices: tuple[str, ...],
              say: Callable[[str], None]) -> dict[str, float]:
  """n steps on the shards from the model `build()` makes; prints the estimated time to TRAIN_STEPS and returns the
  figures (median and first step, GFLOPS, fetch time, samples/s, the estimate)."""
  t0 = time.perf_counter()
  trainer = build()
  loader = TrainLoader(shards, s.batch_size, seed=s.seed, cycle_length=s.num_cpu_threads)
  times, fetch, ops, mem = [], [], 0, 0
  first = None
  try:
    _, data = next(loader)
    for i in range(n):
      t, (_, data) = timed_step(trainer, data, loader, i, devices, say)
      if first is None: first = t.end - t0
      times.append(t.total_s); fetch.append(t.fetch_s)
      ops, mem = t.ops, t.mem
  finally:
    loader.close()
  med = sorted(times)[len(times) // 2]
  train_steps = s.optimizer.train_steps
  est = int(med * train_steps / 60)
  print(f"Estimated training time: {est // 60}h{est % 60}m")
  print(f"epoch global_ops: {train_steps * ops:_}, epoch global_mem: {train_steps * mem:_}")
  return {"median_step_s": med, "first_step_s": first or float("nan"), "gflops": ops * 1e-9 / med,
          "median_fetch_ms": float(np.median(fetch) * 1e3), "samples_per_s": s.batch_size / med,
          "estimated_total_min": med * train_steps / 60}

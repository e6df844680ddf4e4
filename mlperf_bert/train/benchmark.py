"""BENCHMARK=n (`train --benchmark N`): n steps on real data from a fresh model and the estimated time to TRAIN_STEPS,
as train_bert's BENCHMARK.

    figures = benchmark(build, shards, s, n, devices, say)      # build(): a fresh, seeded ModelTrainer
"""
from __future__ import annotations
import time
from typing import Callable

import numpy as np

from mlperf_bert.data.loader import TrainLoader
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.step import timed_step
from mlperf_bert.train.trainer import ModelTrainer


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

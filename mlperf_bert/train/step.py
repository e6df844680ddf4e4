"""The train step as the RUN loop (train/run.py), BENCHMARK (train/benchmark.py) and the audit's re-executed segments
(train/segment.py) take it: one step on a batch while the loader fetches the next, timed and printed as train_bert
prints it.

    t, (end, next_batch) = timed_step(trainer, batch, loader, index, devices, say)   # t: StepTiming

`end` is the loader's position just after the batch fetched (what a checkpoint of the step after it resumes from).
"""
from __future__ import annotations
import dataclasses, time
from typing import Callable

import numpy as np
from tinygrad.helpers import GlobalCounters

from mlperf_bert.data.loader import TrainLoader
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

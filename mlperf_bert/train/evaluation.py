"""The eval: the eval set's masked-LM accuracy on the trainer's weights, batch by batch, and the metric.

    acc, secs, entry = eval_at(trainer, step, eval_shard, s, devices)          # the RUN loop's (train/run.py)
    acc, secs, entry = evaluate(trainer, eval_shard, s, devices, evals_done)   # one eval
    batches = run_eval(trainer, eval_shard, s.eval, evals_done)               # [(index, EvalBatch(correct, total, accuracy))]
    acc = eval_accuracy([b for _, b in batches], s.eval.metric)               # the number the log's eval_accuracy says

EVAL_METRIC tinygrad: the mean of the per-batch accuracies of MAX_EVAL_STEPS batches that continue where the previous
eval stopped (`evals_done` evals ago from row 0), as train_bert; pooled: correct / total over the first EVAL_SAMPLES
rows (MLCommons). The eval runs each batch through the trainer's own jitted eval step (ModelTrainer.evaluate) and
keeps, per batch, the three numbers it returns: correct and total (masked-LM weights; pooled sums them) and
tinygrad's per-batch accuracy (tinygrad averages them). `eval_accuracy` is the only place either metric is computed
from them, so the train run and the audit's re-execution (train/evidence.py) cannot disagree about the formula.
Reading the counts changes nothing the run computes (.item() of values the step realized anyway). `entry` is the
train record's `last_eval`: the batches' counts, what the audit re-executes. Importing this module does not import
tinygrad (the audit's worker imports it before exporting its environment).
"""
from __future__ import annotations
import dataclasses, time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from mlperf_bert.train.settings import Settings

if TYPE_CHECKING:
  from mlperf_bert.train.trainer import ModelTrainer


@dataclasses.dataclass(frozen=True)
class EvalBatch:
  """One eval batch's counts, as the trainer's eval step returns them."""
  correct: float
  total: float
  accuracy: float

  def as_list(self) -> list[float]:
    return [self.correct, self.total, self.accuracy]


# ------------------------------------------------------------------------------------------------ the batches
def eval_inputs(shard, e, evals_done: int) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
  """(batch, row mask) of the eval after `evals_done` earlier evals, in order: tinygrad's wrapping window of
  MAX_EVAL_STEPS batches (EVAL_METRIC tinygrad) or the first EVAL_SAMPLES rows (pooled). `e`: EvalSettings."""
  from mlperf_bert.data.loader import eval_batches, eval_window
  if e.metric == "tinygrad":
    n, bs = e.max_steps, e.batch_size
    ones = np.ones(bs, np.float32)
    return ((b, ones) for b in eval_window(shard, bs, n, (evals_done * n * bs) % len(shard)))
  return eval_batches(shard, e.batch_size, e.samples)


def run_eval(trainer, shard, e, evals_done: int, only: set[int] | None = None) -> list[tuple[int, EvalBatch]]:
  """Each batch of the eval (or of `only` these indices) through trainer.evaluate: [(index, EvalBatch)]."""
  out = []
  for i, (b, mask) in enumerate(eval_inputs(shard, e, evals_done)):
    if only is not None and i not in only: continue
    c, t, a = trainer.evaluate(b, mask)
    out.append((i, EvalBatch(c.item(), t.item(), a.item())))
  return out


def eval_accuracy(batches: list[EvalBatch], metric: str) -> float:
  """The eval's accuracy from its batches, as the log states it: the mean of tinygrad's per-batch accuracies, or
  correct / total summed over the batches (pooled)."""
  if metric == "tinygrad":
    accs = [b.accuracy for b in batches]
    return sum(accs) / len(accs)
  correct = total = 0.0
  for b in batches: correct, total = correct + b.correct, total + b.total
  return correct / total if total else 0.0


# ------------------------------------------------------------------------------------------------ the run's eval
def eval_entry(batches: list[tuple[int, EvalBatch]], *, step: int, evals_done: int, settings, devices) -> dict:
  """The train record's `last_eval`: what the audit needs to re-execute any of its batches."""
  return {"step": step, "evals_done": evals_done, "metric": settings.eval.metric,
          "batch_size": settings.eval.batch_size, "device": devices[0].split(":")[0], "devices": len(devices),
          "float_type": settings.float_type, "batches": [b.as_list() for _, b in batches]}


def evaluate(trainer: ModelTrainer, eval_shard, s: Settings, devices: tuple[str, ...], evals_done: int = 0,
             step: int = 0) -> tuple[float, float, dict]:
  """(masked-LM accuracy, seconds, the record's last_eval entry of `step`) of one eval."""
  st = time.perf_counter()
  batches = run_eval(trainer, eval_shard, s.eval, evals_done)
  entry = eval_entry(batches, step=step, evals_done=evals_done, settings=s, devices=devices)
  return eval_accuracy([b for _, b in batches], s.eval.metric), time.perf_counter() - st, entry


def eval_at(trainer: ModelTrainer, step: int, eval_shard, s: Settings, devices: tuple[str, ...]
            ) -> tuple[float, float, dict]:
  """The training loop's eval after `step` steps (train/run.py logs eval_start before it, eval_stop and
  eval_accuracy after it): the window of the evals before it, and FREE_INTERMEDIATE freeing the train step's
  intermediates before it and the eval step's after it, as train_bert. Returns evaluate's (accuracy, seconds,
  last_eval entry)."""
  if s.free_intermediate: trainer.free_intermediates(trainer.train_step)  # room for the eval's buffers
  out = evaluate(trainer, eval_shard, s, devices, evals_done=(step - 1) // s.eval.step_freq, step=step)
  if s.free_intermediate: trainer.free_intermediates(trainer.eval_step)
  return out

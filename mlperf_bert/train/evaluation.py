"""The RUN phase's eval: the eval set's masked-LM accuracy on the trainer's weights.

    acc, secs, entry = evaluate(trainer, eval_shard, s, devices, evals_done)   # one eval
    acc, secs, entry = eval_at(trainer, step, eval_shard, s, devices)          # the training loop's (train/run.py)

EVAL_METRIC tinygrad: the mean of the per-batch accuracies of MAX_EVAL_STEPS batches that continue where the previous
eval stopped (`evals_done` evals ago from row 0), as train_bert; pooled: correct / total over the first EVAL_SAMPLES
rows (MLCommons). `entry` is the train record's `last_eval`: the batches' counts (train/evidence.py).
"""
from __future__ import annotations
import time

from mlperf_bert.train.evidence import eval_accuracy, eval_entry, run_eval
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.trainer import ModelTrainer


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

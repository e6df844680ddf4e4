"""What tinygrad's train_bert at e0139fa can run, checked when the workflow is planned (plan.py), before any job.

    train = eval_overrides(resolved, overrides)   # the eval widened to train_bert's 10,000 samples where needed
    check_settings(resolved)                      # a one-line UserError with the fix
    tinygrad_size(s)                              # train_bert's BERT_SIZE of the model: large or tiny
"""
from __future__ import annotations
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.train.settings import Settings

# tinygrad's BERT_SIZE (examples/mlperf/helpers.py get_mlperf_bert_config): (hidden, heads, intermediate)
SIZES = {"large": (1024, 16, 4096), "tiny": (128, 2, 512)}
EVAL_ROWS = 10000   # train_bert asserts EVAL_BS * MAX_EVAL_STEPS >= 10000


def tinygrad_size(s: Settings) -> str:
  m = s.model
  dims = (m.hidden_size or 1024, m.num_heads or 16, m.intermediate_size or 4096)
  for name, d in SIZES.items():
    if d == dims: return name
  raise UserError(f"model hidden/heads/intermediate {dims}: tinygrad's train_bert builds only BERT_SIZE large "
                  f"{SIZES['large']} or tiny {SIZES['tiny']}; set BERT_HIDDEN_SIZE, BERT_NUM_HEADS and "
                  f"BERT_INTERMEDIATE_SIZE to one of them or use trainer: project")


def eval_overrides(s: Settings, train: dict[str, Any]) -> dict[str, Any]:
  """The `train` overrides (the config's, a flat mapping) with the eval train_bert needs: where the platform
  evaluates fewer than 10,000 samples (the demo: 8 batches of 64) and `train` sets neither EVAL_BS nor EVAL_SAMPLES,
  100 batches of 100 (the whole eval set each eval, which train_bert's assert asks for; both trainers then read the
  same rows)."""
  if s.eval.batch_size * s.eval.max_steps >= EVAL_ROWS or {"EVAL_BS", "EVAL_SAMPLES"} & set(train): return dict(train)
  return {**train, "EVAL_BS": 100, "EVAL_SAMPLES": EVAL_ROWS}


def check_settings(s: Settings) -> None:
  """What train_bert at e0139fa cannot run, refused before any job (one line with the fix)."""
  tinygrad_size(s)
  if s.eval.batch_size * s.eval.max_steps < EVAL_ROWS:
    raise UserError(f"EVAL_BS={s.eval.batch_size} x {s.eval.max_steps} eval steps: tinygrad's train_bert asserts at "
                    f"least {EVAL_ROWS} eval samples; with trainer: tinygrad set e.g. --config "
                    f"train='{{EVAL_BS: 100, EVAL_SAMPLES: 10000}}'")

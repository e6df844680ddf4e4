"""The pre-flight check of MLCommons' BERT README: "the masked lm accuracy after loading the initial weights and
before any training should be very close to 0.34085".

    result = preflight(settings, eval_path=..., bert_config=..., init_weights=..., max_seq_length=512,
                       max_predictions_per_seq=76, out=".../preflight/tinybox_green.json")

loads the initial weights (checkpoint/model.safetensors) into the model the trainer builds for the platform
(its float type, devices, layout settings), evaluates every row of the eval set with MLCommons' pooled metric
(correct / total over the masked positions, weighted by masked_lm_weights: TrainRun's EVAL_METRIC pooled) and
compares it with REFERENCE. Outside the band it raises a one-line UserError and writes nothing, so the train rule,
which takes the JSON as an input, does not start. The band is only checked where the figure applies: MLPerf's
checkpoint, in the checkpoint's own model, on MLPerf's eval set (10,000 rows, max_seq_length 512, 76 predictions).
Otherwise (no checkpoint: a seeded random init; a smaller model; another eval set) the result says why the band was
skipped, and the accuracy is reported when there was a checkpoint to evaluate.
"""
from __future__ import annotations
import dataclasses, json, os, time
from pathlib import Path
from typing import Any

import numpy as np

from mlperf_bert.constants import EVAL_SAMPLES
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path
from mlperf_bert.train.settings import Settings


@dataclasses.dataclass(frozen=True)
class Reference:
  """The accuracy a checkpoint must show on an eval set of this shape, within +-band."""
  accuracy: float
  band: float
  rows: int
  max_seq_length: int
  max_predictions_per_seq: int


# MLCommons' figure for model.ckpt-28252 on its 10,000-row eval set. The band, +-0.002 absolute (0.33885-0.34285),
# is this project's reading of "very close": the pooled accuracy counts hits over the eval set's masked positions
# (up to 10,000 x 76), so one prediction flipped by rounding (fp16 against fp32, another summation order) moves it
# by about 1.4e-6, and a few hundred such flips stay below 0.0005; a fault in what is evaluated (kernels not
# transposed, a layer missing, LayerNorm or GELU of another form, other vocabulary, masking or rows) changes which
# token wins at a large share of the positions, far beyond 0.002. Not measured on the real checkpoint here.
MLCOMMONS = Reference(accuracy=0.34085, band=0.002, rows=EVAL_SAMPLES, max_seq_length=512, max_predictions_per_seq=76)


@dataclasses.dataclass
class PreflightResult:
  accuracy: float | None     # None: no checkpoint was evaluated
  correct: float
  total: float
  rows: int
  checked: bool              # whether the band was checked (and held: a miss raises)
  reason: str                # why the band was skipped ("" when checked)
  reference: float
  band: float
  seconds: float

  def line(self) -> str:
    """The one line the rule's log and the CLI print."""
    if self.accuracy is None: return f"preflight: {self.reason}; band skipped"
    acc = f"preflight: masked-LM accuracy {self.accuracy:.5f} ({self.correct:.0f}/{self.total:.0f} over {self.rows} rows)"
    if self.checked: return f"{acc}: within {self.reference} +- {self.band}, PASS"
    return f"{acc}; band {self.reference} +- {self.band} skipped: {self.reason}"


def band_skip_reason(model_cfg, ckpt_cfg, rows: int, max_seq_length: int, max_predictions_per_seq: int,
                     ref: Reference = MLCOMMONS) -> str:
  """Why the reference figure does not apply to this evaluation ("" when it does)."""
  if model_cfg != ckpt_cfg:
    diff = {k: v for k, v in dataclasses.asdict(model_cfg).items() if dataclasses.asdict(ckpt_cfg)[k] != v}
    return f"the platform's model is not the checkpoint's ({diff}), the figure is for the full checkpoint"
  shape = (rows, max_seq_length, max_predictions_per_seq)
  if shape != (ref.rows, ref.max_seq_length, ref.max_predictions_per_seq):
    return (f"the figure is for MLPerf's eval set ({ref.rows} rows, max_seq_length {ref.max_seq_length}, "
            f"{ref.max_predictions_per_seq} predictions); this one has {rows} rows, {max_seq_length}, "
            f"{max_predictions_per_seq}")
  return ""


def pooled_accuracy(model, eval_shard, batch_size: int, devices: tuple[str, ...]) -> tuple[float, float]:
  """(correct, total) over every row of `eval_shard`: sum(w * [argmax == id]) and sum(w), the padding rows of the
  last batch masked out (the model's accuracy_parts, batch by batch in one jitted step, summed in float64)."""
  from tinygrad import Context, Tensor, TinyJit
  from mlperf_bert.constants import FEATURES
  from mlperf_bert.data.loader import eval_batches

  def place(t: Tensor) -> Tensor:
    return t.shard(devices, axis=0) if len(devices) > 1 else t.to(devices[0])

  @TinyJit
  def step(input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, _ns_labels, row_mask):
    with Context(TRAINING=0):
      input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, row_mask = (
        place(t) for t in (input_ids, input_mask, segment_ids, positions, lm_ids, lm_weights, row_mask))
      mlm, _ = model.forward(input_ids, input_mask, segment_ids, positions)
      c, t = model.accuracy_parts(mlm, lm_ids, lm_weights, row_mask)
      Tensor.realize(c, t)
      return c, t

  correct = total = 0.0
  for b, mask in eval_batches(eval_shard, batch_size, len(eval_shard)):
    c, t = step(*[Tensor(b[k]) for k in FEATURES], Tensor(mask))
    correct, total = correct + c.item(), total + t.item()
  return correct, total


def _evaluate(s: Settings, eval_shard, bert_config, init_weights, devices) -> tuple[float, float, Any]:
  """(correct, total, model config): the platform's model with the checkpoint loaded, over the whole eval set."""
  from tinygrad import Context
  from mlperf_bert.train.init_weights import load_weights
  from mlperf_bert.train.trainer import model_config, new_model

  cfg = model_config(bert_config, s.model)
  model = new_model(cfg, s, seed=s.seed)
  load_weights(model, init_weights, log=lambda s: print(s, flush=True))
  for p in model.parameters(): p.to_(devices if len(devices) > 1 else devices[0])
  with Context(**({"BEAM": s.eval.beam} if s.eval.beam is not None else {})):
    correct, total = pooled_accuracy(model, eval_shard, s.eval.batch_size, devices)
  return correct, total, cfg


def preflight(s: Settings, *, eval_path: str | os.PathLike, bert_config: str | os.PathLike,
              init_weights: str | os.PathLike | None, max_seq_length: int, max_predictions_per_seq: int,
              out: str | os.PathLike, devices: tuple[str, ...] | None = None,
              ref: Reference = MLCOMMONS) -> PreflightResult:
  """Evaluate the initial weights (resolved settings `s`, as the train rule's) and write the result as JSON to
  `out`; outside ref's band (where it applies) raise UserError and write nothing."""
  from mlperf_bert.data.loader import open_shards
  from mlperf_bert.train.model import BertConfig

  st = time.perf_counter()
  eval_shard = open_shards([eval_path], max_seq_length, max_predictions_per_seq, what="eval set")[0]
  rows = len(eval_shard)
  if init_weights is None:
    res = PreflightResult(None, 0.0, 0.0, rows, False, "no initial weights (the run starts from a seeded random "
                          "init; the config downloads no model.ckpt-28252)", ref.accuracy, ref.band, 0.0)
  else:
    if not Path(init_weights).is_file():
      raise UserError(f"{init_weights}: initial weights not found; run the convert_init_weights rule first")
    from mlperf_bert.train.trainer import devices_for
    devices = devices or devices_for(s.tinygrad.dev, s.gpus)
    correct, total, cfg = _evaluate(s, eval_shard, bert_config, init_weights, devices)
    if total <= 0:
      raise UserError(f"{eval_path}: the eval set has no weighted masked positions; rebuild the eval set")
    acc = correct / total
    reason = band_skip_reason(cfg, BertConfig.from_json(bert_config), rows, max_seq_length, max_predictions_per_seq, ref)
    res = PreflightResult(acc, correct, total, rows, not reason, reason, ref.accuracy, ref.band,
                          time.perf_counter() - st)
    if not reason and abs(acc - ref.accuracy) > ref.band:
      raise UserError(
        f"{init_weights}: masked-LM accuracy {acc:.5f} on {eval_path} ({rows} rows) before any training, expected "
        f"{ref.accuracy} +- {ref.band} (MLCommons' BERT README); the checkpoint, its conversion or the eval set is "
        f"not MLPerf's: re-download model.ckpt-28252, convert it again and rebuild the eval set")
  with atomic_path(out) as tmp:
    tmp.write_text(json.dumps(dataclasses.asdict(res), indent=1) + "\n")
  print(res.line(), flush=True)
  return res

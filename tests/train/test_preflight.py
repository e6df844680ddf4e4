"""The pre-flight check (mlperf_bert/train/preflight.py) on a tiny TF checkpoint converted as the workflow converts
MLPerf's: its pooled masked-LM accuracy equals Hugging Face BertForPreTraining's on the same weights and rows; the
band passes, fails with one line and no output, or is skipped with its reason."""
from __future__ import annotations
import json

import numpy as np
import pytest

from mlperf_bert.data.shards import Shard, write_shard
from mlperf_bert.errors import UserError
from mlperf_bert.train.init_weights import convert_tf_checkpoint
from mlperf_bert.train.hparams import resolve
from mlperf_bert.train.preflight import MLCOMMONS, Reference, preflight

from test_init_weights import write_tiny_checkpoint
from test_model import hf_forward

pytest.importorskip("tensorflow", reason="needs tensorflow: the `tf` extra (pip install -e '.[tf]'; scripts/test.sh installs it)")
pytest.importorskip("transformers", reason="needs transformers: the `test` extra (pip install -e '.[test]')")
pytestmark = pytest.mark.slow  # about a minute on 2 cores: TensorFlow, the tiny model's kernels, HF's forward

SEQ, PRED, ROWS = 32, 5, 37  # 37 rows: the last batch of 8 is padded (its padding rows must not count)
HIT_RATE = 0.34


def _instances(rng, vocab, labels=None):
  out = []
  for i in range(ROWS):
    L = int(rng.integers(10, SEQ + 1))
    la = int(rng.integers(3, L - 3))
    n = int(rng.integers(1, PRED + 1))  # fewer than PRED predictions: masked_lm_weights 0 in the padding
    ids = [int(x) for x in rng.integers(5, vocab, L)]
    ids[0], ids[la - 1], ids[L - 1] = 1, 2, 2
    pos = sorted(rng.choice(np.arange(1, L - 1), size=n, replace=False).tolist())
    for p in pos: ids[p] = 3  # the model sees [MASK]; the labels come separately
    lab = labels[i][:n] if labels is not None else [4] * n
    out.append({"input_ids": ids, "segment_ids": [0] * la + [1] * (L - la), "masked_lm_positions": pos,
                "masked_lm_ids": lab, "next_sentence_label": i % 2})
  return out


def hf_accuracy(weights, cfg, batch) -> tuple[float, float]:
  """(correct, total) from transformers' BertForPreTraining: argmax at the masked positions, weighted."""
  logits, _ = hf_forward(weights, cfg, batch)
  w = batch["masked_lm_weights"]
  return float((w * (logits.argmax(-1) == batch["masked_lm_ids"])).sum()), float(w.sum())


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  """A converted tiny checkpoint and an eval set whose labels are HF's own prediction at ~34 % of the positions."""
  d = tmp_path_factory.mktemp("preflight")
  cfg, cfg_path, prefix, weights = write_tiny_checkpoint(d, seed=5)
  ckpt = d / "converted" / "model.safetensors"  # (TF writes a file named checkpoint in d)
  convert_tf_checkpoint(prefix, cfg_path, ckpt, log=lambda s: None)

  draft = d / "draft.shard"
  write_shard(draft, _instances(np.random.default_rng(1), cfg.vocab_size), max_seq_length=SEQ, max_predictions_per_seq=PRED)
  with Shard(draft) as s: batch = s.batch(np.arange(ROWS))
  pred = hf_forward(weights, cfg, batch)[0].argmax(-1)
  rng = np.random.default_rng(2)
  hit = rng.random(pred.shape) < HIT_RATE
  labels = np.where(hit, pred, (pred + rng.integers(1, cfg.vocab_size - 5, pred.shape)) % cfg.vocab_size)
  labels = np.where(labels < 5, labels + 5, labels)  # no special token ids as labels
  eval_path = d / "eval.shard"
  write_shard(eval_path, _instances(np.random.default_rng(1), cfg.vocab_size, labels.tolist()),
              max_seq_length=SEQ, max_predictions_per_seq=PRED)
  with Shard(eval_path) as s: batch = s.batch(np.arange(ROWS))
  assert (batch["input_ids"] == _input_ids(draft)).all()  # the labels changed, not what the model sees
  correct, total = hf_accuracy(weights, cfg, batch)
  assert 0.2 < correct / total < 0.5, (correct, total)
  return {"cfg_path": cfg_path, "ckpt": ckpt, "eval": eval_path, "correct": correct, "total": total}


def _input_ids(path):
  with Shard(path) as s: return s.batch(np.arange(ROWS))["input_ids"]


def _hp(**over):
  base = dict(DEV="CPU", BS=8, EVAL_BS=8, SUBMISSION_DIVISION="closed", CACHE_CLEAR=False)
  return resolve({}, {**base, **over}, seed=0, eval_examples=ROWS)


def _run(setup, tmp_path, ref=MLCOMMONS, init=True, **over):
  return preflight(_hp(**over), eval_path=setup["eval"], bert_config=setup["cfg_path"],
                   init_weights=setup["ckpt"] if init else None, max_seq_length=SEQ, max_predictions_per_seq=PRED,
                   out=tmp_path / "preflight" / "p.json", ref=ref)


def test_accuracy_equals_huggingface_and_band_passes(setup, tmp_path):
  acc = setup["correct"] / setup["total"]
  ref = Reference(accuracy=round(acc, 3), band=0.002, rows=ROWS, max_seq_length=SEQ, max_predictions_per_seq=PRED)
  res = _run(setup, tmp_path, ref)
  assert (res.correct, res.total) == (setup["correct"], setup["total"])  # the same hits at the same positions
  assert res.accuracy == pytest.approx(acc, abs=1e-12) and res.rows == ROWS
  assert res.checked and res.reason == "" and res.line().endswith("PASS")
  assert json.loads((tmp_path / "preflight" / "p.json").read_text())["checked"] is True


def test_outside_the_band_is_one_line_and_writes_nothing(setup, tmp_path):
  acc = setup["correct"] / setup["total"]
  ref = Reference(accuracy=acc + 0.01, band=0.002, rows=ROWS, max_seq_length=SEQ, max_predictions_per_seq=PRED)
  with pytest.raises(UserError) as e:
    _run(setup, tmp_path, ref)
  msg = str(e.value)
  assert "\n" not in msg and f"accuracy {acc:.5f}" in msg and "model.safetensors" in msg and "+- 0.002" in msg
  assert not (tmp_path / "preflight").exists() or not any((tmp_path / "preflight").iterdir())


def test_band_skipped_off_mlperf_eval_set_and_for_a_smaller_model(setup, tmp_path):
  res = _run(setup, tmp_path)  # the MLCommons figure: the tiny eval set is not MLPerf's
  assert not res.checked and "MLPerf's eval set (10000 rows" in res.reason
  assert res.correct == setup["correct"] and "skipped" in res.line()
  ref = Reference(accuracy=0.0, band=0.0, rows=ROWS, max_seq_length=SEQ, max_predictions_per_seq=PRED)
  res = _run(setup, tmp_path, ref, BERT_LAYERS=1)  # a model of fewer layers than the checkpoint: the figure is not its
  assert not res.checked and "not the checkpoint's" in res.reason and "num_hidden_layers" in res.reason


def test_no_checkpoint_reports_and_skips(setup, tmp_path):
  res = _run(setup, tmp_path, init=False)
  assert res.accuracy is None and not res.checked and "no initial weights" in res.line()
  assert "band skipped" in res.line()
  assert json.loads((tmp_path / "preflight" / "p.json").read_text())["accuracy"] is None


def test_data_parallel_on_two_cpu_devices_counts_the_same(setup, tmp_path):
  """GPUS=2 (the tinybox platforms' layout: the batch sharded over the devices, the weights replicated)."""
  ref = Reference(accuracy=0.5, band=0.5, rows=ROWS, max_seq_length=SEQ, max_predictions_per_seq=PRED)
  res = _run(setup, tmp_path, ref, GPUS=2)
  assert (res.correct, res.total) == (setup["correct"], setup["total"]) and res.checked

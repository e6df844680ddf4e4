"""TF checkpoint -> safetensors -> tinygrad model, checked against Hugging Face on the same weights.

The checkpoint is written with TensorFlow's v1 Saver, so its variable names are exactly Google's
(`bert/...`, `cls/...`), with Adam slots and global_step as in MLPerf's model.ckpt-28252.
"""
from __future__ import annotations
import json

import numpy as np
import pytest

from mlperf_bert.train.init_weights import convert_tf_checkpoint, is_optimizer_variable, load_weights
from mlperf_bert.cli import main as cli_main
from mlperf_bert.errors import UserError
from mlperf_bert.train.model import BertConfig, BertForPretraining, parameter_shapes

from test_model import TINY, hf_forward, random_batch, run_forward

tf = pytest.importorskip("tensorflow", reason="needs tensorflow: the `tf` extra (pip install -e '.[tf]'; scripts/test.sh installs it)")

CONFIG = {**TINY, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
          "hidden_act": "gelu"}


def random_weights(cfg: BertConfig, seed=0) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  out = {}
  for name, shape in parameter_shapes(cfg).items():
    v = (rng.standard_normal(shape) * (0.2 if ("LayerNorm" in name or "bias" in name) else 0.05)).astype(np.float32)
    out[name] = v + 1.0 if name.endswith("gamma") else v
  return out


def save_tf_checkpoint(prefix_dir, variables: dict[str, np.ndarray], step=28252, adam_for=None) -> str:
  """Save `variables` (plus Adam slots for `adam_for` names and global_step) with tf.compat.v1's Saver."""
  v1 = tf.compat.v1
  with tf.Graph().as_default():
    made = [v1.get_variable(name, initializer=tf.constant(val)) for name, val in variables.items()]
    for name in (adam_for or []):
      for slot in ("adam_m", "adam_v"):
        made.append(v1.get_variable(f"{name}/{slot}", initializer=tf.zeros(variables[name].shape)))
    made.append(v1.train.get_or_create_global_step())
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(v1.assign(v1.train.get_global_step(), step))
      return v1.train.Saver(made).save(sess, str(prefix_dir / "model.ckpt"), global_step=step)


def write_tiny_checkpoint(d, seed=0, adam_for=None):
  """CONFIG's bert_config.json and a TF checkpoint of seeded random weights in `d`: (config, its path, the
  checkpoint's prefix, the weights)."""
  cfg_path = d / "bert_config.json"
  cfg_path.write_text(json.dumps(CONFIG))
  cfg = BertConfig.from_json(cfg_path)
  weights = random_weights(cfg, seed=seed)
  return cfg, cfg_path, save_tf_checkpoint(d, weights, adam_for=adam_for), weights


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
  slots_for = ["bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel",
               "cls/predictions/output_bias"]
  cfg, cfg_path, prefix, weights = write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt"), adam_for=slots_for)
  return cfg, cfg_path, prefix, weights, len(slots_for) * 2 + 1


def test_tf_checkpoint_names_are_google_names(tiny_ckpt):
  _, _, prefix, weights, _ = tiny_ckpt
  assert prefix.endswith("model.ckpt-28252")
  names = dict(tf.train.list_variables(prefix))
  assert "bert/encoder/layer_1/attention/self/query/kernel" in names and "global_step" in names
  assert "cls/predictions/output_bias/adam_m" in names


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_convert_then_load_matches_huggingface(tiny_ckpt, tmp_path):
  cfg, cfg_path, prefix, weights, n_opt = tiny_ckpt
  out = tmp_path / "checkpoint" / "model.safetensors"
  lines = []
  stats = convert_tf_checkpoint(prefix, cfg_path, out, log=lines.append)
  assert stats["model_variables"] == len(weights)
  assert stats["optimizer_variables_skipped"] == n_opt
  assert stats["other_variables_skipped"] == 0
  assert stats["parameters"] == sum(v.size for v in weights.values())
  assert any("skipping 7 optimizer variables" in l for l in lines)

  # the file is plain safetensors with Google names and layouts
  from safetensors.numpy import load_file
  loaded = load_file(out)
  assert set(loaded) == set(weights)
  for name, v in weights.items():
    np.testing.assert_array_equal(loaded[name], v)

  model = BertForPretraining(cfg, seed=123)
  info = load_weights(model, out)
  assert info == {"loaded": len(weights), "extra": 0, "parameters": stats["parameters"]}
  batch = random_batch(cfg, seed=11)
  mlm, nsp = run_forward(model, batch)
  ref_mlm, ref_nsp = hf_forward(weights, cfg, batch)
  np.testing.assert_allclose(mlm.numpy(), ref_mlm, atol=1e-4, rtol=1e-4)
  np.testing.assert_allclose(nsp.numpy(), ref_nsp, atol=1e-4, rtol=1e-4)

  # fewer layers (BERT_LAYERS): the first layers load, the rest of the file is counted as extra
  small = BertForPretraining(BertConfig.from_json(cfg_path, num_hidden_layers=1), seed=0)
  info = load_weights(small, out)
  assert info["extra"] == 16 and info["loaded"] == len(weights) - 16
  np.testing.assert_array_equal(small.state_dict()["bert/encoder/layer_0/output/dense/kernel"].numpy(),
                                weights["bert/encoder/layer_0/output/dense/kernel"])


def test_missing_variable_is_a_user_error_and_leaves_no_output(tiny_ckpt, tmp_path):
  cfg, cfg_path, _, weights, _ = tiny_ckpt
  partial = {k: v for k, v in weights.items() if k != "bert/encoder/layer_1/intermediate/dense/kernel"}
  prefix = save_tf_checkpoint(tmp_path, partial)
  out = tmp_path / "out" / "model.safetensors"
  with pytest.raises(UserError, match=r"model\.ckpt-28252.*'bert/encoder/layer_1/intermediate/dense/kernel'.*\[48, 96\].*missing"):
    convert_tf_checkpoint(prefix, cfg_path, out, log=lambda s: None)
  assert not out.parent.exists() or not any(out.parent.iterdir())


def test_wrong_shape_is_a_user_error(tiny_ckpt, tmp_path):
  cfg, cfg_path, _, weights, _ = tiny_ckpt
  bad = dict(weights)
  bad["cls/seq_relationship/output_weights"] = bad["cls/seq_relationship/output_weights"].T.copy()  # (H, 2)
  prefix = save_tf_checkpoint(tmp_path, bad)
  out = tmp_path / "model.safetensors"
  with pytest.raises(UserError, match=r"'cls/seq_relationship/output_weights' has shape \[48, 2\].*implies \[2, 48\]"):
    convert_tf_checkpoint(prefix, cfg_path, out, log=lambda s: None)
  assert not out.exists() and not list(tmp_path.glob(".model.safetensors*"))


def test_config_checkpoint_mismatch_and_missing_files(tiny_ckpt, tmp_path):
  cfg, cfg_path, prefix, _, _ = tiny_ckpt
  fewer = tmp_path / "bert_config.json"
  fewer.write_text(json.dumps({**CONFIG, "num_hidden_layers": 1}))
  with pytest.raises(UserError, match=r"layer_1.*not described by"):
    convert_tf_checkpoint(prefix, fewer, tmp_path / "a.safetensors", log=lambda s: None)
  with pytest.raises(UserError, match=r"\.index is missing"):
    convert_tf_checkpoint(tmp_path / "model.ckpt-1", cfg_path, tmp_path / "b.safetensors", log=lambda s: None)
  assert not list(tmp_path.glob("*.safetensors*")) and not list(tmp_path.glob(".*.part"))


def test_interrupted_write_leaves_nothing(tiny_ckpt, tmp_path, monkeypatch):
  # a failure while streaming (here: the disk "fills" on the third tensor) removes the partial file
  import mlperf_bert.train.init_weights as iw
  cfg, cfg_path, prefix, _, _ = tiny_ckpt
  real = iw._write_safetensors_streaming
  def failing(path, shapes, get, metadata):
    calls = iter(range(10**6))
    def get2(n):
      if next(calls) == 2: raise OSError(28, "No space left on device")
      return get(n)
    real(path, shapes, get2, metadata)
  monkeypatch.setattr(iw, "_write_safetensors_streaming", failing)
  from mlperf_bert.errors import UserError
  with pytest.raises(UserError, match="model.safetensors.*(No space|disk)"):  # one line naming the path
    convert_tf_checkpoint(prefix, cfg_path, tmp_path / "model.safetensors", log=lambda s: None)
  assert list(tmp_path.iterdir()) == []


def test_load_weights_is_strict(tiny_ckpt, tmp_path):
  cfg, _, _, weights, _ = tiny_ckpt
  from safetensors.numpy import save_file
  model = BertForPretraining(cfg, seed=0)
  p = tmp_path / "w.safetensors"
  save_file({k: v for k, v in weights.items() if k != "bert/pooler/dense/bias"}, p)
  with pytest.raises(UserError, match=r"w\.safetensors.*'bert/pooler/dense/bias'.*missing"):
    load_weights(model, p)
  save_file({**weights, "bert/pooler/dense/bias": np.zeros(7, np.float32)}, p)
  with pytest.raises(UserError, match=r"'bert/pooler/dense/bias' has shape \[7\].*expects \[48\]"):
    load_weights(model, p)
  p.write_bytes(b"not safetensors")
  with pytest.raises(UserError, match="not a readable safetensors"):
    load_weights(model, p)
  with pytest.raises(UserError, match="not found"):
    load_weights(model, tmp_path / "none.safetensors")


def test_optimizer_variable_names():
  for n in ("global_step", "bert/embeddings/word_embeddings/adam_m", "cls/predictions/output_bias/adam_v",
            "bert/pooler/dense/kernel/Momentum", "beta1_power", "bert/x/LAMB_1"):
    assert is_optimizer_variable(n), n
  for n in ("bert/embeddings/word_embeddings", "cls/seq_relationship/output_weights", "bert/pooler/dense/bias"):
    assert not is_optimizer_variable(n), n


def test_cli_convert(tiny_ckpt, tmp_path, capsys):
  _, cfg_path, prefix, weights, _ = tiny_ckpt
  out = tmp_path / "m.safetensors"
  assert cli_main(["convert-checkpoint", "--checkpoint", prefix, "--bert-config", str(cfg_path), "--output", str(out)]) == 0
  assert json.loads(capsys.readouterr().out)["model_variables"] == len(weights)
  assert cli_main(["convert-checkpoint", "--checkpoint", str(tmp_path / "nope"), "--bert-config", str(cfg_path),
                   "--output", str(out)]) == 2


def test_weights_that_would_not_fit_are_refused_before_tensorflow_loads(tiny_ckpt, tmpfs, tmp_path):
  # 4 bytes a parameter of bert_config.json and the header (train/footprint.py weights_bytes): the file converted, and
  # the refusal on a 16 kB tmpfs
  from mlperf_bert.train.footprint import weights_bytes
  cfg, cfg_path, prefix, _, _ = tiny_ckpt
  planned = weights_bytes(json.loads(cfg_path.read_text()))
  assert convert_tf_checkpoint(prefix, cfg_path, tmp_path / "m.safetensors", log=lambda s: None)["bytes"] == \
    pytest.approx(planned, rel=0.01)
  mnt = tmpfs("16k")
  with pytest.raises(UserError, match=r"^not enough disk space for converting model\.ckpt-28252: it writes \d+ kB "
                                      r"\(BERT's .* of float32 weights.*has 16\.4 kB free.*--no-space-check"):
    convert_tf_checkpoint(prefix, cfg_path, mnt / "model.safetensors", log=lambda s: None)
  assert list(mnt.iterdir()) == []

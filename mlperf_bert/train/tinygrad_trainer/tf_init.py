"""The tinygrad trainer's initial weights: a TensorFlow checkpoint in INIT_CKPT_DIR, which train_bert's RUN process loads
with tensorflow (load_from_pretrained).

    index = write_tf_init_weights(out_dir, init_model_config(bert_config, s), seed, safetensors=None)

MLPerf's initial weights (its TF checkpoint, converted) where the config downloads it, else this project's seeded random init for SEED (the
same weights this project's trainer starts from).
"""
from __future__ import annotations
import os
from pathlib import Path

import numpy as np

from mlperf_bert.train.settings import Settings


def write_tf_init_weights(out_dir: str | os.PathLike, cfg, seed: int, safetensors: str | os.PathLike | None = None) -> Path:
  """A TF v1 checkpoint (Google's names) of the initial weights in out_dir, with its `checkpoint` state file, so
  that tf.train.list_variables(out_dir) finds it; returns the .index file. From `safetensors` (the converted MLPerf
  checkpoint) when given, else this project's seeded init of `cfg` for `seed`."""
  import tensorflow as tf  # the `tf` extra: train_bert itself needs it to read the checkpoint
  from mlperf_bert.train.model import _init_value, parameter_shapes
  if safetensors is not None:
    from safetensors.numpy import load_file
    weights = load_file(str(safetensors))
  else:
    rng = np.random.default_rng(seed)
    weights = {n: _init_value(n, s, cfg.initializer_range, rng) for n, s in parameter_shapes(cfg).items()}
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  v1 = tf.compat.v1
  with tf.Graph().as_default():
    made = [v1.get_variable(n, initializer=tf.constant(np.asarray(v, np.float32))) for n, v in weights.items()]
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      prefix = v1.train.Saver(made).save(sess, str(out / "model.ckpt"))
  return Path(prefix + ".index")


def init_model_config(bert_config: str | os.PathLike, s: Settings):
  """bert_config.json with the platform's size keys (BERT_LAYERS, BERT_HIDDEN_SIZE, ...): the model both trainers
  build for these settings."""
  from mlperf_bert.train.trainer import model_config
  return model_config(bert_config, s.model)

"""The initial weights: MLPerf's TensorFlow checkpoint `model.ckpt-28252` -> safetensors, and loading them into the
model.

The safetensors file keeps Google's variable names and layouts (dense kernels are (in, out), as the model
in mlperf_bert.train.model uses them), float32. Optimizer state in the checkpoint (adam_m/adam_v slots,
global_step, ...) is skipped and counted. TensorFlow is imported only by `convert_tf_checkpoint`.

The output is streamed tensor by tensor into the safetensors layout, so the peak memory is TensorFlow plus
the largest single variable (the word embeddings), not a second copy of the whole model.
"""
from __future__ import annotations
import dataclasses, json, math, os, re, struct, time
from pathlib import Path
from typing import Callable

import numpy as np

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path, file_digest
from mlperf_bert.train.model import BertConfig, parameter_shapes

# last name component (or whole name) of optimizer state in BERT checkpoints (Adam, LAMB, momentum, AMP)
_SLOT_SUFFIX = re.compile(r"/(adam_m|adam_v|lamb_m|lamb_v|Adam(_\d+)?|LAMB(_\d+)?|Momentum|Adagrad|RMSProp(_\d+)?)$")
_OPT_NAMES = re.compile(r"^(global_step|beta[12]_power(_\d+)?|loss_scale\w*|good_steps|current_loss_scale)$")


def is_optimizer_variable(name: str) -> bool:
  """True for optimizer state (slots, step counters, loss-scale state) rather than model weights."""
  return bool(_SLOT_SUFFIX.search(name) or _OPT_NAMES.match(name))


def _tf_checkpoint_files(prefix: Path) -> list[Path]:
  return [Path(f"{prefix}.index"), Path(f"{prefix}.data-00000-of-00001")]


def convert_tf_checkpoint(ckpt_prefix: str | os.PathLike, bert_config_path: str | os.PathLike,
                          out_path: str | os.PathLike, log: Callable[[str], None] = print,
                          space_check: bool = True) -> dict:
  """Convert a Google-BERT TensorFlow checkpoint into a float32 safetensors file; return statistics.

  Every variable of the model described by `bert_config_path` must be in the checkpoint with the shape the
  config implies. Returns {"model_variables", "parameters", "optimizer_variables_skipped",
  "other_variables_skipped", "other_variables", "bytes", "sha256", "seconds"}. With `space_check`, the weights (4
  bytes a parameter) must fit where they go before TensorFlow is loaded.
  """
  t0 = time.monotonic()
  prefix = Path(ckpt_prefix)
  config = BertConfig.from_json(bert_config_path)
  if space_check:
    from mlperf_bert.data.footprint import SHRINK
    from mlperf_bert.space import check_space, human
    from mlperf_bert.train.footprint import weights_bytes
    need = weights_bytes(dataclasses.asdict(config))
    check_space({Path(out_path).parent: need}, what=f"converting {prefix.name}", shrink=SHRINK,
                detail=f"BERT's {human(need)} of float32 weights, from {Path(bert_config_path).name}")
  import tensorflow as tf  # the `tf` extra; only this stage needs it

  for f in _tf_checkpoint_files(prefix):
    if not f.is_file():
      raise UserError(f"{prefix}: checkpoint file {f} is missing; download all of model.ckpt-28252.* "
                      f"(pass the prefix without the .index/.data suffix)")
  try:
    reader = tf.train.load_checkpoint(str(prefix))
  except Exception as e:  # tf.errors.* (DataLossError, NotFoundError, ...)
    raise UserError(f"{prefix}: TensorFlow cannot read this checkpoint ({type(e).__name__}: {e}); "
                    f"re-download the model.ckpt-28252.* files") from None
  shapes_in_ckpt = reader.get_variable_to_shape_map()
  dtypes_in_ckpt = reader.get_variable_to_dtype_map()

  expected = parameter_shapes(config)
  for name, shape in expected.items():
    if name not in shapes_in_ckpt:
      raise UserError(f"{prefix}: variable {name!r} (expected shape {list(shape)}) is missing from the checkpoint; "
                      f"use MLPerf's model.ckpt-28252 with the bert_config.json that came with it ({bert_config_path})")
    actual = tuple(shapes_in_ckpt[name])
    if actual != shape:
      raise UserError(f"{prefix}: variable {name!r} has shape {list(actual)}, but {bert_config_path} implies "
                      f"{list(shape)}; use the bert_config.json that matches this checkpoint")
    if not dtypes_in_ckpt[name].is_floating:
      raise UserError(f"{prefix}: variable {name!r} has dtype {dtypes_in_ckpt[name].name}, expected a float type; "
                      f"this is not a BERT weight checkpoint")

  optimizer, other = [], []
  for name in sorted(shapes_in_ckpt):
    if name in expected: continue
    if is_optimizer_variable(name): optimizer.append(name)
    elif name.startswith(("bert/", "cls/")):
      raise UserError(f"{prefix}: model variable {name!r} (shape {list(shapes_in_ckpt[name])}) is not described by "
                      f"{bert_config_path}; use the bert_config.json that matches this checkpoint")
    else: other.append(name)

  log(f"converting {prefix}: {len(expected)} model variables, skipping {len(optimizer)} optimizer variables"
      + (f" and {len(other)} others: {', '.join(other)}" if other else ""))
  metadata = {"source": prefix.name, "layout": "google-bert names; dense kernels (in, out)",
              "bert_config": json.dumps(dataclasses.asdict(config), sort_keys=True)}
  with atomic_path(out_path) as tmp:
    _write_safetensors_streaming(tmp, expected, lambda n: reader.get_tensor(n), metadata)
  stats = {
    "model_variables": len(expected),
    "parameters": sum(math.prod(s) for s in expected.values()),
    "optimizer_variables_skipped": len(optimizer),
    "other_variables_skipped": len(other),
    "other_variables": other,
    "bytes": Path(out_path).stat().st_size,
    "sha256": file_digest(out_path, "sha256"),
    "seconds": round(time.monotonic() - t0, 2),
  }
  log(f"wrote {out_path}: {stats['parameters']:,} parameters, {stats['bytes']:,} bytes, sha256 {stats['sha256']}")
  return stats


def _write_safetensors_streaming(path: Path, shapes: dict[str, tuple[int, ...]], get: Callable[[str], np.ndarray],
                                 metadata: dict[str, str]) -> None:
  """Write float32 tensors in the safetensors format, fetching and writing one tensor at a time."""
  header: dict = {"__metadata__": metadata}
  offset = 0
  for name, shape in shapes.items():
    n = 4 * math.prod(shape)
    header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
    offset += n
  blob = json.dumps(header, separators=(",", ":")).encode()
  blob += b" " * (-len(blob) % 8)  # the format pads the header to 8 bytes
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(blob)))
    f.write(blob)
    for name, shape in shapes.items():
      arr = np.ascontiguousarray(np.asarray(get(name), dtype="<f4"))
      assert arr.shape == shape, (name, arr.shape, shape)  # shapes were checked against the reader's map
      f.write(arr.tobytes())
      del arr


def _open_weights(path: Path):
  from safetensors import SafetensorError, safe_open
  if not path.is_file():
    raise UserError(f"{path}: weights file not found; run the convert_init_weights rule "
                    f"(python -m mlperf_bert convert-checkpoint) first")
  try:
    return safe_open(str(path), framework="numpy")
  except (SafetensorError, OSError) as e:
    raise UserError(f"{path}: not a readable safetensors file ({e}); delete it and convert the checkpoint again") from None


def _check_shapes(path: Path, f, expected: dict[str, tuple[int, ...]]) -> None:
  keys = set(f.keys())
  for name, want in expected.items():
    if name not in keys:
      raise UserError(f"{path}: parameter {name!r} (shape {list(want)}) is missing; the file does not match "
                      f"the model config, convert the checkpoint with the matching bert_config.json")
    shape = tuple(f.get_slice(name).get_shape())
    if shape != tuple(want):
      raise UserError(f"{path}: parameter {name!r} has shape {list(shape)}, the model expects {list(want)}; "
                      f"use the bert_config.json the checkpoint was converted with")


def check_weight_shapes(safetensors_path: str | os.PathLike, config: BertConfig) -> None:
  """Every parameter of the model `config` describes is in the converted file with its shape (read from the
  file's header alone: no tensor is loaded, nothing is compiled); UserError (one line) naming the first that is
  missing or shaped otherwise (e.g. a transposed kernel). train checks this before it writes or compiles anything."""
  path = Path(safetensors_path)
  with _open_weights(path) as f:
    _check_shapes(path, f, parameter_shapes(config))


def load_weights(model, safetensors_path: str | os.PathLike, log: Callable[[str], None] | None = None) -> dict:
  """Assign every parameter of `model` (a BertForPretraining) from a converted safetensors file, strictly.

  Each model parameter must be in the file with the same shape. Extra entries are allowed (e.g. layers
  beyond a reduced `num_hidden_layers`) and counted. Load before moving or sharding the model.
  Returns {"loaded", "extra", "parameters"}.
  """
  from tinygrad import Tensor

  path = Path(safetensors_path)
  with _open_weights(path) as f:
    keys = set(f.keys())
    params = model.state_dict()
    _check_shapes(path, f, {name: tuple(t.shape) for name, t in params.items()})
    for name, t in params.items():
      arr = f.get_tensor(name)
      t.assign(Tensor(np.ascontiguousarray(arr, dtype=np.float32), device=t.device).cast(t.dtype)).realize()
  extra = sorted(keys - set(params))
  if log: log(f"loaded {len(params)} parameters from {path}" + (f"; {len(extra)} unused entries" if extra else ""))
  return {"loaded": len(params), "extra": len(extra), "parameters": sum(math.prod(t.shape) for t in params.values())}

"""Resume checkpoints of a training run: save, find and load the whole training state (no pickle).

A checkpoint (`ckpt_<step>.safetensors` in the run's checkpoint folder) holds the weights, the LAMB state and the
schedule's step (ModelTrainer.state_tensors), tinygrad's RNG counters, and as metadata the step, the loader's
position, the seed and the fingerprint of the settings that change the run's numbers: a checkpoint of other
settings is never resumed. (train/init_weights.py converts MLPerf's TF checkpoint, the initial weights.)
"""
from __future__ import annotations
import os, re
from pathlib import Path
from typing import Any, Callable

import numpy as np
from safetensors import SafetensorError, safe_open
from tinygrad import Tensor, dtypes

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import save_safetensors
from mlperf_bert.train.trainer import ModelTrainer

CKPT_RE = re.compile(r"^ckpt_(\d{8})\.safetensors$")
FORMAT = "mlperf-bert-train-state-1"


def to_numpy(t: Tensor) -> np.ndarray:
  if isinstance(t.device, tuple): t = t.to(t.device[0])
  return t.numpy()


def rng_state() -> dict[str, np.ndarray]:
  """tinygrad's RNG counters, one per device (or device tuple), named rng/<device>."""
  return {f"rng/{d if isinstance(d, str) else '|'.join(d)}": to_numpy(c).astype(np.uint32)
          for d, c in Tensor._device_rng_counters.items()}


def on_kind(name: str, kind: str | None) -> str:
  """A run's device name (or several joined by '|', a multi-device tensor's) as the same device of another kind:
  NV:1 -> CPU:1, NV|NV:1 -> CPU|CPU:1 (`kind` None: unchanged). The audit re-executing a run on another device kind
  with the run's device count restores and compares the RNG counters so: tinygrad's device seeds follow the order
  devices are first used, not their names, so the same draws follow."""
  if not kind: return name
  return "|".join(kind + d[len(d.split(":", 1)[0]):] for d in name.split("|"))


def restore_rng(saved: dict[str, np.ndarray], kind: str | None = None):
  """The RNG counters of rng_state back in place; `kind`: on the same devices of that kind (on_kind)."""
  for k, v in saved.items():
    name = on_kind(k[len("rng/"):], kind)
    dev: Any = tuple(name.split("|")) if "|" in name else name
    if dev not in Tensor._device_rng_counters: Tensor._next_counter(dev, 0)
    c = Tensor._device_rng_counters[dev]
    c.assign(Tensor(v.astype(np.uint32), dtype=dtypes.uint32, device=c.device)).realize()


def list_checkpoints(ckpt_dir: str | os.PathLike) -> list[tuple[int, Path]]:
  """(step, path) of every checkpoint in the folder, oldest first."""
  d = Path(ckpt_dir)
  if not d.is_dir(): return []
  return sorted((int(m.group(1)), p) for p in d.iterdir() if (m := CKPT_RE.match(p.name)))


def state_arrays(trainer: ModelTrainer) -> dict[str, np.ndarray]:
  """The whole training state as host arrays: the trainer's state tensors (model/..., optim/...) and rng/<device>."""
  arrays = {k: np.ascontiguousarray(to_numpy(t)) for k, t in trainer.state_tensors().items()}
  arrays.update(rng_state())
  return arrays


def write_state(trainer: ModelTrainer, path: Path, *, step: int, position: int, seed: int, fingerprint: str,
                extra: dict[str, str] | None = None) -> Path:
  """The training state after `step` steps (the loader at sample `position`) to `path`, atomically; `extra`: more
  metadata. A full disk is one line (fileio.save_safetensors) and leaves no file."""
  meta = {"step": str(step), "position": str(position), "seed": str(seed), "fingerprint": fingerprint,
          "format": FORMAT, **(extra or {})}
  save_safetensors(state_arrays(trainer), path, meta)
  return path


def save_state(trainer: ModelTrainer, ckpt_dir: Path, *, step: int, position: int, seed: int, fingerprint: str,
               keep: int) -> Path:
  """Write the checkpoint of `step` (atomically) and remove all but the newest `keep`."""
  path = write_state(trainer, ckpt_dir / f"ckpt_{step:08d}.safetensors", step=step, position=position, seed=seed,
                     fingerprint=fingerprint)
  for _, old in list_checkpoints(ckpt_dir)[:-keep]: old.unlink(missing_ok=True)
  return path


def _open_state(path: Path):
  try: return safe_open(str(path), framework="numpy")
  except (SafetensorError, OSError) as e:
    raise UserError(f"{path}: not a readable training state ({e}); delete it to start over") from None


def find_resume(ckpt_dir: Path, fingerprint: str, say: Callable[[str], None]) -> tuple[Path, dict] | None:
  """The newest checkpoint of these settings and its metadata; checkpoints of other settings (or unreadable ones)
  are removed."""
  found = None
  for _, p in reversed(list_checkpoints(ckpt_dir)):
    try:
      with safe_open(str(p), framework="numpy") as f: meta = f.metadata() or {}
    except (SafetensorError, OSError) as e:
      say(f"ignoring unreadable checkpoint {p} ({e}); removing it"); p.unlink(missing_ok=True); continue
    if meta.get("fingerprint") != fingerprint:
      say(f"removing checkpoint {p}: it was written with other settings"); p.unlink(missing_ok=True); continue
    if found is None: found = (p, meta)
  return found


def load_state(trainer: ModelTrainer, path: Path, rng_kind: str | None = None):
  """The training state and RNG counters of a checkpoint into `trainer` (UserError when it does not fit);
  `rng_kind`: the RNG counters restored on the same devices of that kind (restore_rng)."""
  targets = trainer.state_tensors()
  with _open_state(path) as f:
    keys = set(f.keys())
    missing = [k for k in targets if k not in keys]
    if missing: raise UserError(f"{path}: checkpoint lacks {missing[:3]}...; delete it to start over")
    for k, t in targets.items():
      arr = f.get_tensor(k)
      if tuple(arr.shape) != tuple(t.shape):
        raise UserError(f"{path}: {k} has shape {arr.shape}, expected {t.shape}; delete the checkpoint to start over")
      src = Tensor(np.ascontiguousarray(arr)).cast(t.dtype)
      t.assign(src.to(t.device)).realize()
    restore_rng({k: f.get_tensor(k) for k in keys if k.startswith("rng/")}, rng_kind)

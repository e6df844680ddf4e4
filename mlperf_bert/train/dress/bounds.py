"""The dress's bound: a setting that cannot fit the card by far, or whose per-device batch the target cannot launch,
refused in one line before the capture (seconds, no tinygrad), instead of a capture that grows for minutes and
gigabytes of RAM and ends in tinygrad's own error.

    why = dress_refusal(settings, bert_config, "CUDA:sm_89")   # '' when the dress may run
    check_dress_bounds(settings, bert_config, "CUDA:sm_89")    # the same, as a UserError

Memory: the activations a device holds, estimated from bert_config at sequence 512 as Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (arXiv:2205.05198), section 4.1, count them: a transformer layer
keeps s*b*h*(34 + 5*a*s/h) bytes of 16-bit activations for its backward (s sequence, b batch, h hidden, a heads),
twice that in float32. A train step holds every layer's at once (no recomputation here); an eval step at least one
layer's. Weights, optimizer state, gradients, the heads and the allocator's slack come on top, so the estimate is below
what the dress measures (tests/train/test_dress_bounds.py checks it against every recorded dress of tinybox_green) and
a setting is refused only where the estimate alone exceeds FAR times the card's whole memory: the dress itself names
the largest batch that fits for anything closer.

Launch: tinygrad places a kernel's axes on the target's grid, and an axis longer than a grid dimension is split only
by its divisors (tinygrad 0.14.0 codegen/gpudims.py `_split_dims`: "cannot limit dim"). The per-device batch is an
axis of the step's kernels, so one with a prime factor above the smallest grid dimension cannot always be launched.
"""
from __future__ import annotations
import json, os
from dataclasses import dataclass
from pathlib import Path

from mlperf_bert.errors import UserError
from mlperf_bert.train.dress.report import CARDS
from mlperf_bert.train.dress.setup import SEQ
from mlperf_bert.train.settings import Settings

FAR = 2.0  # the estimate (below what the dress measures) must exceed the card's whole memory this many times


@dataclass(frozen=True)
class Grid:
  dims: tuple[int, int, int]   # the most blocks a launch has in x, y, z
  source: str


# the grid a target's kernels launch on, as tinygrad 0.14.0 limits it (tinygrad/renderer/cstyle.py CUDARenderer and
# HIPRenderer `global_max`; llvmir.py AMDLLVMRenderer takes HIP's)
GRIDS = {
  # NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": maximum x-dimension of a
  # grid of thread blocks 2^31-1, y- and z-dimension 65535 (every compute capability since 3.0)
  "CUDA": Grid((2**31 - 1, 65535, 65535),
               "CUDA C++ Programming Guide, technical specifications per compute capability"),
  # AMD HIP: tinygrad limits y and z to 65535 on every AMD target ("only really needed on gfx12, even though gfx11
  # reports the same limitation", HIPRenderer); x to 2^31-1
  "AMDLLVM": Grid((2**31 - 1, 65535, 65535), "tinygrad 0.14.0 renderer/cstyle.py HIPRenderer.global_max"),
}
FLOAT_BYTES = {"half": 2, "bfloat16": 2, "float32": 4}


def layer_activation_bytes(hidden: int, heads: int, seq: int = SEQ, float_bytes: int = 2) -> int:
  """Bytes of activations one transformer layer keeps for one sequence (Korthikanti et al. 2022, section 4.1:
  s*h*(34 + 5*a*s/h) at 16 bits), scaled to the float's width."""
  return int(seq * hidden * (34 + 5 * heads * seq / hidden) * float_bytes / 2)


def _model(settings: Settings, bert_config: str | os.PathLike) -> tuple[int, int, int]:
  """(hidden size, heads, layers) of bert_config.json with the platform's size overrides (read without tinygrad)."""
  try:
    cfg = json.loads(Path(bert_config).read_text())
    hidden, heads, layers = int(cfg["hidden_size"]), int(cfg["num_attention_heads"]), int(cfg["num_hidden_layers"])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise UserError(f"{bert_config}: expected a BERT config JSON with hidden_size, num_attention_heads and "
                    f"num_hidden_layers ({e}); use resources/demo/bert_config.json (MLPerf's)") from None
  m = settings.model
  return m.hidden_size or hidden, m.num_heads or heads, layers


def _largest_prime_factor(n: int) -> int:
  big, d = 1, 2
  while d * d <= n:
    while n % d == 0: big, n = d, n // d
    d += 1
  return max(big, n)


def _launch_refusal(name: str, per_device: int, target: str) -> str:
  grid = GRIDS.get(target.split(":", 1)[0])
  if grid is None: return ""
  least = min(grid.dims)
  if per_device <= least or (p := _largest_prime_factor(per_device)) <= least: return ""
  return (f"{name} {per_device:,} a device has the prime factor {p:,}, more than the {least:,} blocks of the "
          f"{target} grid's y and z dimensions ({grid.source}): tinygrad splits a launch axis only by its divisors, so "
          f"a kernel that puts it there cannot be launched (tinygrad: \"cannot limit dim\")")


def dress_refusal(settings: Settings, bert_config: str | os.PathLike, target: str, layers: int | None = None) -> str:
  """'' when a dress of `settings` (BS, EVAL_BS, GPUS, the float, the model size overrides) on `target` may run;
  else why not, one sentence: its activations cannot fit the card by far, or its per-device batch cannot be launched.
  `layers`: the depth the verdict is for (default: bert_config's). Seconds: no tinygrad."""
  hidden, heads, depth = _model(settings, bert_config)
  depth = layers or depth
  gpus = max(1, settings.gpus)
  per_layer = layer_activation_bytes(hidden, heads, SEQ, FLOAT_BYTES.get(settings.float_type, 4))
  steps = (("BS", -(-settings.batch_size // gpus), depth), ("EVAL_BS", -(-settings.eval.batch_size // gpus), 1))
  card = CARDS.get(target)
  for name, per_device, kept_layers in steps:
    need = per_device * kept_layers * per_layer
    if card is not None and need > FAR * card.memory:
      fits = int(FAR * card.memory // (kept_layers * per_layer)) * gpus
      return (f"{name} {per_device * gpus:,} ({per_device:,} a device on {gpus}) holds an estimated "
              f"{need / 1e9:,.0f} GB of activations a device ({kept_layers} layer(s) x {per_layer / 1e6:.1f} MB a "
              f"sample at sequence {SEQ}, Korthikanti et al. 2022), more than {FAR:g} x the "
              f"{card.memory / 2**30:.0f} GiB of the {card.name} (the bound lets {name} up to {fits:,} through to the "
              f"dress, which measures what fits)")
  for name, per_device, _ in steps:
    if why := _launch_refusal(name, per_device, target): return why
  return ""


def check_dress_bounds(settings: Settings, bert_config: str | os.PathLike, target: str, layers: int | None = None,
                       where: str = "the dress") -> None:
  """UserError (one line) for a setting dress_refusal refuses."""
  if why := dress_refusal(settings, bert_config, target, layers):
    raise UserError(f"{where}: refused before the capture: {why}; lower it (--set {why.split(' ', 1)[0]}=...)")

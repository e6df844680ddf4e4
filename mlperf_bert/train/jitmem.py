"""FREE_INTERMEDIATE: free a jitted step's intermediate buffers around an eval, and never its training state.

train_bert (tinygrad e0139fa, the v5.1 submission) calls `CapturedJit.free_intermediates()` on the captured train
step before each eval and on the eval step after it, so that the eval's buffers fit beside the model. tinygrad 0.14's
`free_intermediates` deallocates every buffer that some kernel of the captured step writes without reading it in
the same kernel. In this project's train step that set holds, besides the real intermediates (activations,
gradients, the returned loss), every weight of the model (LAMB's update writes each weight from a kernel that does
not read it), both LAMB groups' learning-rate tensors (assigned from the schedule) and tinygrad's RNG counter
(docs/parity.md, rows 21-22). After the eval the next step reallocates them as new, uninitialized memory: on CPU that
memory reads as zeros, so the model restarted from zero weights (the loss back at ln(30522) + ln 2 = 11.02) with a
zero learning rate, and under HALF it diverged. tinygrad itself turned the setting off for BERT after v5.1
(6cad622f59, PR 13684: it hung on tinybox green after 90 minutes).

`free_intermediates(captured, keep)` frees what tinygrad's does, except the buffers of the tensors in `keep`
(the step's whole training state: `ModelTrainer.persistent_tensors()`, the same tensors a checkpoint saves, plus the RNG
state). Freed buffers are reallocated by the next call of the step. It reads tinygrad 0.14.0's CapturedJit
internals, so it refuses any other version with a one-line error.
"""
from __future__ import annotations
from importlib.metadata import version
from typing import Any, Iterable

from tinygrad import Tensor

from mlperf_bert.errors import UserError

TINYGRAD = "0.14.0"  # the CapturedJit internals (_written_uops, the graph cache) this module reads are 0.14.0's


def _device_buffers(t: Tensor) -> list[Any]:
  """The device Buffers behind a realized tensor (one, or one per device of a multi-device tensor)."""
  from tinygrad.device import MultiBuffer
  real = t.uop.base.realized
  if real is None: return []
  return list(real.bufs) if isinstance(real, MultiBuffer) else [real]


def free_intermediates(captured, keep: Iterable[Tensor]) -> int:
  """Deallocate the buffers `captured` (a tinygrad CapturedJit) writes without reading them in the same kernel,
  except those of `keep` (and views of them); drop its graph runners as tinygrad does. Returns how many device
  buffers were freed."""
  if (have := version("tinygrad")) != TINYGRAD:
    raise UserError(f"platform key FREE_INTERMEDIATE: written for tinygrad {TINYGRAD}'s JIT, found tinygrad {have}; "
                    f"install tinygrad=={TINYGRAD} or set FREE_INTERMEDIATE: 0")
  from tinygrad.device import MultiBuffer
  from tinygrad.engine.realize import graph_cache
  from tinygrad.uop.ops import Ops, buffers
  kept = {id(b) for t in keep for b in _device_buffers(t)}
  for call in captured.linear.src:
    if call.src[0].op is Ops.CUSTOM_FUNCTION and call.src[0].arg == "graph": graph_cache.pop(call.src[0], None)
  freed = 0
  for u in captured._written_uops:
    if (buf := buffers.get(u)) is None: continue
    for b in (buf.bufs if isinstance(buf, MultiBuffer) else (buf,)):
      base = b._base
      if id(b) in kept or (base is not None and id(base) in kept): continue
      if b.is_initialized():
        b.deallocate()
        freed += 1
      if base is not None and base.allocated_views == 0 and base.is_allocated(): base.deallocate()
  return freed

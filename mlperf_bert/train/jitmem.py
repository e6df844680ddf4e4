"""How a jitted step's buffers are held: captured on its first call, planned tightly, shared, and (FREE_INTERMEDIATE)
freed around an eval, never its training state.

    capture_on_first_call(jit)                   # no un-jitted call: its buffers would all be live at once
    with planned(jit, into=arenas) as rec: ...   # a capture's intermediates packed by train/arena.py (into `arenas`)
    free_intermediates(captured, keep)           # FREE_INTERMEDIATE

**The first call.** tinygrad's TinyJit runs a function plainly on its first call and captures it on the second. A plain
realize gives each CONTIGUOUS of the graph its own buffer, held for the whole realize (tinygrad/tensor.py
`transform_to_call` makes them call arguments, which schedule/memory.py does not plan): at tinybox_green's BS 90 the
attention probabilities, dropout masks and GELU activations of every layer at once, 1.6 GB a device above the captured
step, where the JIT packs the same buffers by lifetime. So the steps are captured on their first call, after the
training state they update is realized (ModelTrainer.__init__): a capture must find every state tensor a real buffer
(a lazy LAMB moment or RNG counter would be captured as its initial value and reset at every replay).

**The plan.** During a capture `planned` replaces the JIT's memory planner (tinygrad.engine.jit's
`memory_plan_rewrite`) with `plan_memory`: the same lifetimes and lanes, the offsets from train/arena.py's packing
instead of tinygrad's TLSF allocator, which left its arenas 0.15-0.19 GB above the live peak, a different amount on
each device. With `into` (the train step's arenas), an eval step captured with FREE_INTERMEDIATE 0 places its
intermediates inside the train step's arena of the same device and lane: the two steps never run at once (tinygrad
orders each device's submissions on its timeline, and the loop reads the loss before an eval and each eval batch's
counts before the next step), so the eval no longer adds 4.9 GB a device on top of the train step.

**FREE_INTERMEDIATE.**

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
import contextlib, dataclasses, functools
from importlib.metadata import version
from typing import Any, Iterable, Iterator

from tinygrad import Tensor

from mlperf_bert.constants import TINYGRAD_PINNED
from mlperf_bert.errors import UserError
from mlperf_bert.train.arena import pack

BLOCK = 256          # tinygrad's planner rounds every buffer to this many bytes (schedule/memory.py block_size)


def _check_version(what: str):
  if (have := version("tinygrad")) != TINYGRAD_PINNED:
    raise UserError(f"{what}: written for tinygrad {TINYGRAD_PINNED}'s JIT, found tinygrad {have}; install "
                    f"tinygrad=={TINYGRAD_PINNED}")


def capture_on_first_call(jit) -> None:
  """Make a fresh TinyJit capture on its first call instead of running it plainly first (the module doc)."""
  _check_version("the train and eval steps")
  if jit.cnt == 0: jit.cnt = 1


def _lifetimes(linear, held: set) -> tuple[dict, dict, set]:
  """first and last call index of each plannable buffer, and the buffers some COPY uses: as memory_plan_rewrite."""
  from tinygrad.schedule.memory import _can_plan, _collect_bufs
  from tinygrad.uop.ops import Ops
  first: dict = {}
  last: dict = {}
  copies: set = set()
  for i, call in enumerate(linear.src):
    bufs = [b for src in call.src[1:] for b in _collect_bufs(src) if _can_plan(b, held)]
    for b in bufs:
      first.setdefault(b, i)
      last[b] = i
    if call.src[0].op is Ops.COPY: copies.update(bufs)
  return first, last, copies


@dataclasses.dataclass
class Plan:
  """The memory plan of one capture: its number of calls and, for each lane (device, copies?), the arena and the
  buffers planned into it, {buffer: (offset, first call, last call)}."""
  calls: int = 0
  lanes: dict = dataclasses.field(default_factory=dict)

  def arenas(self) -> dict:
    """{lane: (arena, size)}: what plan_memory's `into` takes."""
    return {lane: (arena, arena.max_numel()) for lane, (arena, _) in self.lanes.items()}


def plan_memory(linear, held_bufs=None, *, into: dict | None = None, record: Plan | None = None):
  """tinygrad's memory_plan_rewrite (schedule/memory.py) with train/arena.py's offsets: the same lanes (a device's
  copy buffers apart from its compute buffers) and lifetimes (a copy's buffer held as long again after its last use),
  each lane one arena, or the arena `into` holds for that lane when it is large enough. `record` gets the plan."""
  from tinygrad.dtype import dtypes
  from tinygrad.helpers import NO_MEMORY_PLANNER, round_up
  from tinygrad.uop.ops import UOp
  if NO_MEMORY_PLANNER: return linear
  first, last, copies = _lifetimes(linear, held_bufs or set())
  lanes: dict = {}
  for b in first: lanes.setdefault((b.device, b in copies), []).append(b)
  replace = {}
  for lane, bufs in lanes.items():
    hold = [last[b] - first[b] + 1 if lane[1] else 0 for b in bufs]
    offsets, size = pack([round_up(b.max_numel() * b.dtype.itemsize, BLOCK) for b in bufs],
                         [(first[b], last[b] + h) for b, h in zip(bufs, hold)])
    host = (into or {}).get(lane)
    arena = host[0] if host is not None and host[0].max_numel() >= size else UOp.new_buffer(lane[0], size, dtypes.int8)
    for b, off in zip(bufs, offsets): replace[b] = arena[off:off + b.nbytes()].bitcast(b.dtype)
    if record is not None: record.lanes[lane] = (arena, {b: (off, first[b], last[b]) for b, off in zip(bufs, offsets)})
  if record is not None: record.calls = len(linear.src)
  return linear.substitute(replace, name="memory plan", walk=True)


@contextlib.contextmanager
def planned(jit, into: dict | None = None) -> Iterator[Plan | None]:
  """While a call of `jit` runs: if the call captures it, its memory is planned by plan_memory (into `into`); yields
  the Plan, filled once the call returns, or None when the call does not capture."""
  if jit.cnt != 1:
    yield None
    return
  _check_version("the train and eval steps")
  import tinygrad.engine.jit as tj
  record = Plan()
  tinygrad_plan = tj.memory_plan_rewrite
  tj.memory_plan_rewrite = functools.partial(plan_memory, into=into, record=record)
  try: yield record
  finally: tj.memory_plan_rewrite = tinygrad_plan


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
  _check_version("platform key FREE_INTERMEDIATE")
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

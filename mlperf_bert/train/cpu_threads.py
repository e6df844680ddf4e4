"""Run tinygrad's per-core slices of a CPU kernel at the same time (platform key CPU_THREADS).

tinygrad 0.14 splits the first global dimension of a CPU kernel into one slice per core (its THREADS, on by
default; the slice count is its NUM_CPU_THREADS, the process's CPU count), the slice index being the kernel's
`core_id` argument, and then calls the slices one after another on the calling thread
(`CPUProgram.__call__`), so a training step uses one core however many the machine has. `enable()` makes that
call hand the slices to a pool of threads (ctypes releases the GIL during each call) and wait for all of them.

The values do not change: each slice computes and writes its own part of the output, as in the serial loop. A
kernel with atomic adds would sum in an order that varies between runs; tinygrad 0.14's only one in this model
(nn.Embedding's backward under USE_ATOMICS, `embedding_bwd`) is not split into slices, and kernels of that name
are run serially anyway. Measured effect: CHANGELOG.md ("the CPU demo about five times faster": CPU_THREADS);
parity: docs/parity.md row 17.
"""
from __future__ import annotations
import ctypes, time
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version

from mlperf_bert.constants import TINYGRAD_PINNED
from mlperf_bert.errors import UserError

SERIAL = frozenset({"embedding_bwd"})  # kernels with atomic float adds: serial, so their sums keep one order


def enabled() -> bool:
  from tinygrad.runtime.ops_cpu import CPUProgram
  return getattr(CPUProgram.__call__, "parallel_slices", False)


def enable() -> int:
  """Make every CPU kernel with per-core slices run them in parallel in this process; idempotent. Returns the
  number of threads (tinygrad's slice count)."""
  if (have := version("tinygrad")) != TINYGRAD_PINNED:
    raise UserError(f"platform key CPU_THREADS: written for tinygrad {TINYGRAD_PINNED}'s CPU runtime, found tinygrad {have}; "
                    f"install tinygrad=={TINYGRAD_PINNED} or set CPU_THREADS: false")
  from tinygrad.helpers import NUM_CPU_THREADS
  from tinygrad.runtime.ops_cpu import CPUProgram
  threads = NUM_CPU_THREADS.value
  if enabled() or threads < 2: return threads
  serial_call = CPUProgram.__call__
  pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="tinygrad-cpu")

  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, timeout=None):
    slot = self.runtimevars.get("core_id")
    if slot is None or self.lvp or global_size[0] < 2 or self.name in SERIAL:
      return serial_call(self, *bufs, global_size=global_size, local_size=local_size, vals=vals, wait=wait,
                         timeout=timeout)
    st = time.perf_counter()
    args = [b.va_addr for b in bufs] + list(vals)

    def run_slice(tid: int):
      a = list(args)
      a[slot] = tid
      self.fxn(*[ctypes.c_uint64(x) for x in a])

    pending = [pool.submit(run_slice, tid) for tid in range(1, global_size[0])]
    run_slice(0)
    for p in pending: p.result()
    return time.perf_counter() - st if wait else None

  __call__.parallel_slices = True
  CPUProgram.__call__ = __call__
  return threads

"""Offsets for a captured step's intermediate buffers in one arena, placed once every buffer's lifetime is known.

    offsets, size = pack(sizes, lives)          # lives[i] = (first, last) call index using buffer i, inclusive
    peak = live_peak(sizes, lives)              # the most bytes live at once: no arena can be smaller

tinygrad 0.14's JIT (schedule/memory.py `memory_plan_rewrite`) places the buffers of a captured step in one arena a
device and lane, in the order they are first used, with a TLSF allocator that frees each at its last use. With the
thousands of buffers of a BERT step freed in another order than they were taken, that leaves holes: at tinybox_green's
BS 90 its arenas were 124 MB (the compute lane) and 21-62 MB (the copy lane, a different amount on each device) larger
than the most bytes live at once (docs/benchmarks.md, "Headroom"). Here the buffers are placed largest first, each at
the lowest offset that is free for its whole lifetime: the "greedy by size" solution of the offline dynamic storage
allocation problem, which meets the lower bound `live_peak` on those steps. Nothing here imports tinygrad.
"""
from __future__ import annotations

import numpy as np


def live_peak(sizes: list[int], lives: list[tuple[int, int]]) -> int:
  """The most bytes live at any call index (a buffer is live from its first to its last call, both included)."""
  if not sizes: return 0
  t = 1 + max(last for _, last in lives)
  delta = np.zeros(t + 1, np.int64)
  for n, (first, last) in zip(sizes, lives):
    delta[first] += n
    delta[last + 1] -= n
  return int(np.cumsum(delta).max())


def pack(sizes: list[int], lives: list[tuple[int, int]]) -> tuple[list[int], int]:
  """(offset of each buffer, arena size): two buffers whose lifetimes overlap never overlap in the arena. Largest
  buffers first (ties: the earlier first use), each at the lowest offset that no placed buffer of an overlapping
  lifetime covers. Offsets are multiples of the sizes' own alignment when the sizes share one (tinygrad's 256)."""
  n = len(sizes)
  offsets = [0] * n
  placed_first = np.empty(n, np.int64); placed_last = np.empty(n, np.int64)
  placed_lo = np.empty(n, np.int64); placed_hi = np.empty(n, np.int64)
  k, size = 0, 0
  for i in sorted(range(n), key=lambda i: (-sizes[i], lives[i][0], i)):
    first, last = lives[i]
    clash = (placed_first[:k] <= last) & (placed_last[:k] >= first)
    lo, hi = placed_lo[:k][clash], placed_hi[:k][clash]
    off = 0
    if lo.size:
      order = np.argsort(lo, kind="stable")
      lo, hi = lo[order], np.maximum.accumulate(hi[order])
      # the gap before each clashing buffer (after all that start below it), then the space after the last one
      gaps = lo - np.concatenate(([0], hi[:-1]))
      fit = np.flatnonzero(gaps >= sizes[i])
      off = int(0 if fit.size and fit[0] == 0 else hi[fit[0] - 1] if fit.size else hi[-1])
    offsets[i] = off
    placed_first[k], placed_last[k], placed_lo[k], placed_hi[k] = first, last, off, off + sizes[i]
    k += 1
    size = max(size, off + sizes[i])
  return offsets, size

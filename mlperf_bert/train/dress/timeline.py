"""Where a captured step's memory goes on one device: what `dress --timeline` prints and the dress's JSON holds.

    tl = timeline(plan, captured_calls, device)       # plan: jitmem.Plan of the step's capture
    print(format_timeline("train", tl))

A captured step holds two kinds of buffers on a device: those the JIT does not plan (the training state, the step's
inputs and outputs, anything a live tensor holds) and its intermediates, which jitmem.plan_memory packs into one arena
a lane (the device's own buffers, the multi-device buffers, each with the copies apart). For each lane: the arena, the
live bytes through the step (at TIMELINE_POINTS call indices), the moment of the peak (call i of N, the kernel there)
and the buffers alive then, grouped by the call that first writes them (a kernel's name, or a copy) and largest first.
Only call_names imports tinygrad (after the dress exported its settings: run.py).
"""
from __future__ import annotations
import collections
from typing import Any

TIMELINE_POINTS = 24
TOP_GROUPS = 8
SMALL = 1 << 20         # a lane's arena under this many bytes gets one line


def call_names(calls: list) -> list[str]:
  """A short name for each call of a captured step (its opened linear): the kernel's name or `copy -> DEVICE`."""
  from tinygrad.helpers import ansistrip
  from tinygrad.uop.ops import Ops
  out = []
  for call in calls:
    ast = call.src[0]
    if ast.op is Ops.PROGRAM: out.append(ansistrip(ast.arg.name))
    elif ast.op is Ops.COPY: out.append(f"copy -> {call.src[1].device}")
    else: out.append(ast.op.name.lower())
  return out


def _on(lane_device, device: str) -> bool:
  return lane_device == device or (isinstance(lane_device, tuple) and device in lane_device)


def _lane(lane, arena, bufs: dict, names: list[str]) -> dict[str, Any]:
  """One lane on one device: sizes from each buffer's share of that device (a multi-device buffer's per-device size);
  `names` has one entry a call of the step (the planned linear's calls, in order)."""
  device, copies = lane
  nbytes = {b: b.max_numel() * b.dtype.itemsize for b in bufs}
  hold = {b: (last - first + 1 if copies else 0) for b, (_, first, last) in bufs.items()}
  n = max(len(names), 1 + max((last + hold[b] for b, (_, _, last) in bufs.items()), default=0))
  live = [0] * (n + 1)
  for b, (_, first, last) in bufs.items():
    live[first] += nbytes[b]
    live[last + hold[b] + 1] -= nbytes[b]
  for i in range(1, n + 1): live[i] += live[i - 1]
  at = max(range(n), key=lambda i: live[i]) if n else 0
  groups: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for b, (_, first, last) in bufs.items():
    if first <= at <= last + hold[b]:
      g = groups[names[first] if first < len(names) else "?"]
      g[0] += 1; g[1] += nbytes[b]
  step = max(1, n // TIMELINE_POINTS)
  return {"lane": ("multi-device " if isinstance(device, tuple) else "") + ("copies" if copies else "compute"),
          "arena": arena.max_numel(), "buffers": len(bufs), "peak": live[at], "calls": n, "peak_at": at,
          "peak_call": names[at] if at < len(names) else "?",
          "through": [[i, live[i]] for i in range(0, n, step)],
          "at_peak": [{"made_by": k, "buffers": c, "bytes": v}
                      for k, (c, v) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:TOP_GROUPS]]}


def timeline(plan, calls: list, device: str) -> list[dict[str, Any]]:
  """The lanes of one device in a capture's jitmem.Plan, largest arena first. `calls` (the captured linear's, graph
  batches opened) name the kernels when they are the planned calls, in order."""
  names = call_names(calls)
  if len(names) != plan.calls: names = [f"call {i}" for i in range(plan.calls)]
  lanes = [_lane(lane, arena, bufs, names) for lane, (arena, bufs) in plan.lanes.items() if _on(lane[0], device)]
  return sorted(lanes, key=lambda x: -x["arena"])


def _gb3(n: float) -> str: return f"{n / 1e9:.3f} GB"  # to the MB: a timeline tells buffers apart


def format_timeline(step: str, device: str, lanes: list[dict[str, Any]]) -> str:
  """A few lines a lane: arena against its live peak, where the peak is, what lives there, the live bytes through."""
  lines = [f"{step} step on {device}: intermediates planned into {len(lanes)} arena(s)"]
  for ln in lanes:
    lines.append(f"  {ln['lane']:22s} arena {_gb3(ln['arena'])}, live peak {_gb3(ln['peak'])} at call {ln['peak_at']} "
                 f"of {ln['calls']} ({ln['peak_call']}), {ln['buffers']} buffers")
    if ln["arena"] < SMALL: continue
    for g in ln["at_peak"]:
      lines.append(f"      {_gb3(g['bytes']):>11s} in {g['buffers']:4d} buffer(s) made by {g['made_by']}")
    lines.append("      live through the step: " + " ".join(f"{v / 1e9:.2f}" for _, v in ln["through"]))
  return "\n".join(lines)

"""An event simulation of one step (mlperf_bert/train/cost/): every device's compute queue and copy queue, the
captured graph's calls in their order (train/dress/measure.py `call_records`).

  - a kernel runs on each of its devices' compute queue, in order, after the kernel before it there and after every
    copy that wrote a buffer it reads or writes (each device's buffers are named by the dress); it costs the launch gap
    (hardware.py) and its time (kernel.py);
  - a copy runs on the sender's copy queue, in order, after whatever wrote its source (the producer kernel, or the
    copy before it in a ring) and after whatever last wrote its destination; it costs the copy engine's start and its
    bytes over the link between the two cards (tinygrad's ring all-reduce: n-1 scatter-reduce and n-1 all-gather
    transfers, each a peer-to-peer copy, plus an add kernel on the receiver);
  - the host's time a step (the python step, the loss read back) comes first and does not overlap the GPU's; a kernel
    on a device that is not one of the box's cards (tinygrad's own step cuts its batch on the host's CPU, a few
    hundred kB) is taken as part of it: its outputs are ready when the host's time ends.

The step ends when the last queue of any device is done. Copies before the step's first tensor-core kernel move the
inputs (kind "copy"); the ones after it are the gradients' all-reduce (kind "allreduce").
"""
from __future__ import annotations
from dataclasses import dataclass, field

from mlperf_bert.train.cost.events import Event
from mlperf_bert.train.cost.hardware import Box
from mlperf_bert.train.cost.kernel import copy_ms, kernel_time


@dataclass
class Simulated:
  ms: float                                   # the step: host + the last queue's end
  events: list[Event]
  breakdown_ms: dict[str, float]              # the critical device's compute queue: busy by kind, waits by cause
  critical_device: str
  busy_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # each device: matmul, other, launch, copy queue


def _index(devices: list[str]) -> dict[str, str]:
  return {d: str(i) for i, d in enumerate(devices)}


def simulate(calls: list[dict], box: Box, devices: list[str] | None = None, host_ms: float | None = None) -> Simulated:
  """The timeline of one step of `calls` on `box`'s cards (devices: the dress's device names, in order; default
  the order they first appear)."""
  if devices is None:
    devices = []
    for c in calls:
      for d in (c["devices"] if c["k"] == "kernel" else c["src"] + c["dst"]):
        if d not in devices: devices.append(d)
  idx = _index(devices)
  host = box.host_ms if host_ms is None else host_ms
  launch = box.launch_us / 1e3
  compute = {d: host for d in devices}
  copyq = {d: host for d in devices}
  ready: dict[int, tuple[float, str]] = {}     # buffer -> (written by then, "kernel" | "copy" | "allreduce")
  events = [Event("host", "host", 0.0, host, "host", "the python step and the loss read back")] if host else []
  acct = {d: {"matmul": 0.0, "other": 0.0, "launch": 0.0, "wait_copies": 0.0, "wait_allreduce": 0.0} for d in devices}
  copy_busy = {d: 0.0 for d in devices}
  seen_tc = False
  for c in calls:
    if c["k"] == "kernel":
      kind = "matmul" if c["tc"] else "other"
      seen_tc = seen_tc or kind == "matmul"
      kt = kernel_time(box.card, c["flops"], c["bytes"], c["global"], c["local"], c["tc"])
      for j, d in enumerate(c["devices"]):
        deps = [ready[b] for b in c["ins"][j] + c["outs"][j] if b in ready]
        dep_t, dep_kind = max(deps, default=(0.0, "kernel"))
        if d not in compute:       # the host's CPU: within the host's time
          for b in c["outs"][j]: ready[b] = (max(host, dep_t), "kernel")
          continue
        start = max(compute[d], dep_t)
        if start > compute[d] and dep_kind != "kernel":
          acct[d]["wait_allreduce" if dep_kind == "allreduce" else "wait_copies"] += start - compute[d]
        end = start + launch + kt.ms
        acct[d][kind] += kt.ms
        acct[d]["launch"] += launch
        events.append(Event(idx[d], "compute", start + launch, end, kind, c["name"]))
        compute[d] = end
        for b in c["outs"][j]: ready[b] = (end, "kernel")
    elif c["k"] == "copy":
      kind = "allreduce" if seen_tc else "copy"
      src, dst = c["src"][0], c["dst"][0]
      sender = src if src in copyq else dst
      deps = [ready[b][0] for b in c["ins"] + c["outs"] if b in ready]
      start = max([copyq[sender], *deps])
      end = start + copy_ms(box, c["bytes"])
      copy_busy[sender] += end - start
      events.append(Event(idx[sender], "copy", start, end, kind, f"copy {c['bytes']} B {idx.get(src, src)}->{idx.get(dst, dst)}"))
      copyq[sender] = end
      for b in c["outs"]: ready[b] = (end, kind)
  ms = max([host, *compute.values(), *copyq.values()])
  crit = max(devices, key=lambda d: compute[d]) if devices else "host"
  a = acct.get(crit, {})
  tail = ms - compute.get(crit, ms)          # copies still running after the critical device's last kernel
  breakdown = {"matmul": a.get("matmul", 0.0), "other": a.get("other", 0.0), "copies": a.get("wait_copies", 0.0),
               "allreduce": a.get("wait_allreduce", 0.0) + tail, "launch_host": a.get("launch", 0.0) + host}
  busy = {idx[d]: {**{k: round(v, 3) for k, v in acct[d].items()}, "copy_queue": round(copy_busy[d], 3)} for d in devices}
  return Simulated(ms, events, breakdown, idx.get(crit, crit), busy)


def critical_path(sim: Simulated) -> str:
  """One sentence: which device ends the step and what its compute queue spent the step on."""
  b = sim.breakdown_ms
  parts = sorted(((v, k) for k, v in b.items() if v > 0), reverse=True)
  names = {"matmul": "tensor-core kernels", "other": "other kernels", "copies": "waiting for input copies",
           "allreduce": "waiting for the all-reduce", "launch_host": "launch gaps and host"}
  return f"device {sim.critical_device}'s compute queue: " + ", ".join(f"{names[k]} {v:.1f} ms" for v, k in parts)

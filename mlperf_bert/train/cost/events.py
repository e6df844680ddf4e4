"""One step's simulated timeline (mlperf_bert/train/cost/): what each device's compute and copy queues run, when."""
from __future__ import annotations
from dataclasses import dataclass

KINDS = ("matmul", "other", "copy", "allreduce", "launch", "host")


@dataclass(frozen=True)
class Event:
  device: str        # "0".."N-1" (device index as a string) or "host"
  queue: str         # "compute" | "copy" | "host"
  start_ms: float
  end_ms: float
  kind: str          # one of KINDS
  name: str          # kernel or copy name, as the dress lists it

"""The machine this process runs on, as the train record names it and the audit compares it: host name, CPU model,
the SIMD flags that matter to the CPU kernels, and the cores the process may use.

    m = this_machine()      # {"host": ..., "cpu": "AMD EPYC 7B13", "flags": "avx avx2 fma", "cores": 2}
    same_kind(m, recorded)  # the same CPU model and cores: a step costs the same CPU seconds on both
    device_kind("cpu:1")    # "CPU": a DEV value's device kind, as tinygrad reads it
"""
from __future__ import annotations
import os, platform, re
from pathlib import Path

FLAGS = ("sse4_2", "pclmulqdq", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_model_and_flags() -> tuple[str, str]:
  """(CPU model, the FLAGS it has, space-separated) from /proc/cpuinfo; platform.processor() and '' elsewhere."""
  try:
    cpu = Path("/proc/cpuinfo").read_text()
    model = re.search(r"model name\s*:\s*(.*)", cpu).group(1).strip()
    flags = set(re.search(r"flags\s*:\s*(.*)", cpu).group(1).split())
    return model, " ".join(f for f in FLAGS if f in flags)
  except (OSError, AttributeError):
    return platform.processor() or "?", ""


def usable_cores() -> int:
  """The cores this process may run on (its affinity mask), else the machine's count."""
  try: return len(os.sched_getaffinity(0))
  except (AttributeError, OSError): return os.cpu_count() or 1


def this_machine() -> dict[str, object]:
  model, flags = cpu_model_and_flags()
  return {"host": platform.node(), "cpu": model, "flags": flags, "cores": usable_cores()}


def same_kind(a: dict | None, b: dict | None) -> bool:
  """Two machines whose CPU model, flags and cores are the same (a CPU step costs the same CPU seconds on both)."""
  if not isinstance(a, dict) or not isinstance(b, dict): return False
  keys = ("cpu", "flags", "cores")
  return all(a.get(k) not in (None, "", "?") for k in ("cpu", "cores")) and all(a.get(k) == b.get(k) for k in keys)


def device_kind(dev: object) -> str:
  """The device kind a DEV value (or a device name) names, as tinygrad reads it: the part before the first ':',
  upper-cased (tinygrad's Device.canonicalize): cpu, CPU:1 -> CPU; NV:0 -> NV; NULL:CUDA:sm_89 -> NULL; '' for none."""
  return str(dev or "").split(":", 1)[0].strip().upper()


def describe_machine(m: dict) -> str:
  return f"{m.get('cpu')}, {m.get('cores')} cores ({m.get('host')})"

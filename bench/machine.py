"""The machine a benchmark ran on, as every bench/ script prints it (a figure is only meaningful with its machine):
CPU model, the SIMD flags that matter here, cores, memory, clang, Python and the load average at the start."""
import os, platform, re, subprocess
from pathlib import Path

from mlperf_bert.machine import cpu_model_and_flags


def machine() -> dict:
  info = {"cpu": platform.processor() or "?", "python": platform.python_version(), "cores": os.cpu_count()}
  info["cpu"], info["flags"] = cpu_model_and_flags()
  try:
    mem = re.search(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text())
    info["mem_gb"] = round(int(mem.group(1)) / 2**20, 1)
  except (OSError, AttributeError):
    pass
  try:
    info["clang"] = subprocess.run(["clang", "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[0]
  except (OSError, IndexError):
    info["clang"] = "none"
  try:
    info["load_avg_at_start"] = os.getloadavg()
  except OSError:
    pass
  return info


def describe(info: dict | None = None) -> str:
  """One line: `CPU; N cores; M GB; flags ...; clang ...; python ...; load average ...`."""
  m = info or machine()
  return (f"{m.get('cpu')}; {m.get('cores')} cores; {m.get('mem_gb')} GB; flags {m.get('flags')}; {m.get('clang')}; "
          f"python {m['python']}; load average at start {m.get('load_avg_at_start')}")

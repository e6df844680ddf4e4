"""The conda environments of the workflow's rules (envs/*.yaml, used with --software-deployment-method conda),
generated from the lock: each lists the Python packages its jobs import and everything they need, at the lock's
versions (lock/py3.11.txt; the environments run Python 3.11), so a rule run in its conda environment runs the software
scripts/setup.sh installs. `write_envs` writes them (bash scripts/lock.sh calls it after the lock); `env_pins` reads
one back (tests/test_lock.py compares them with the lock)."""
from __future__ import annotations
import re
from pathlib import Path

import yaml

from mlperf_bert.fileio import atomic_path
from mlperf_bert.lock import canonical, Locked

ENV_PYTHON = "3.11"  # the Python of every environment, whose lock they take their versions from
# name: (what it is for, conda packages beside python and pip, the Python packages its jobs import)
ENVS = {
  "audit": ("Provenance, audit, submission package and report jobs.", ["git"],
            ["numpy", "pyyaml", "pandas", "scipy", "matplotlib", "mlperf-logging", "snakemake"]),
  "data": ("Download, extract, verify, shard and eval-set jobs.", [],
           ["numpy", "tokenizers", "numba", "tqdm", "gdown", "requests", "pyyaml", "jsonschema"]),
  "dress": ("The dress (rules/dress.smk): the training environment plus NVIDIA's nvrtc, which compiles the CUDA "
            "targets' kernels.\n# AMD targets need LLVM 19 on the host (Debian libllvm19; scripts/setup.sh dress "
            "installs it).", ["clang"],
            ["numpy", "tinygrad", "safetensors", "tqdm", "pyyaml", "mlperf-logging", "nvidia-cuda-nvrtc-cu12"]),
  "init_weights": ("convert_init_weights: TensorFlow reads the MLPerf checkpoint;\n# the model's parameter names and "
                   "shapes come from mlperf_bert.model (tinygrad).", [],
                   ["numpy", "safetensors", "tensorflow-cpu", "tinygrad"]),
  "tinygrad": ("trainer: tinygrad (rules/tinygrad.smk): git for the checkout; tinygrad's own train_bert runs with the "
               "checkout's\n# tinygrad package on PYTHONPATH (none installed here), clang for its CPU backend, "
               "TensorFlow for the initial\n# checkpoint it loads, mlperf-logging for its log.", ["git", "clang"],
               ["numpy", "tqdm", "pyyaml", "safetensors", "tensorflow-cpu", "mlperf-logging"]),
  "train": ("Training jobs (tinygrad on CPU or GPU, MLPerf logging).\n# The CPU backend needs a C compiler (clang); GPU "
            "backends need the vendor driver on the host.", ["clang"],
            ["numpy", "tinygrad", "safetensors", "tqdm", "pyyaml", "mlperf-logging"]),
}


def env_path(repo: str | Path, name: str) -> Path:
  return Path(repo) / "envs" / f"{name}.yaml"


def render_env(name: str, closure: list[Locked]) -> str:
  """envs/<name>.yaml: its packages (`closure`: every locked requirement its top-level packages need), pinned."""
  what, conda, _ = ENVS[name]
  doc = {"channels": ["conda-forge", "nodefaults"],
         "dependencies": [f"python ={ENV_PYTHON}", "pip", *conda,
                          {"pip": [f"{l.name}=={l.version}" for l in sorted(closure, key=lambda l: canonical(l.name))]}]}
  return (f"# {what}\n# With --software-deployment-method conda. Generated from lock/py{ENV_PYTHON}.txt by "
          f"`bash scripts/lock.sh` (mlperf_bert/envs.py); do not edit.\n" + yaml.safe_dump(doc, sort_keys=False))


def env_pins(path: str | Path) -> tuple[str | None, dict[str, str]]:
  """(its conda python spec, {canonical name: version} of its pip section) of an environment file."""
  doc = yaml.safe_load(Path(path).read_text()) or {}
  py, pins = None, {}
  for dep in doc.get("dependencies", []):
    if isinstance(dep, str) and dep.startswith("python"): py = dep.split("=", 1)[-1].strip()
    if isinstance(dep, dict):
      for req in dep.get("pip", []):
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", str(req))
        pins[canonical(m[1]) if m else str(req)] = m[2] if m else ""
  return py, pins


def write_envs(repo: str | Path, closures: dict[str, list[Locked]]) -> list[Path]:
  out = []
  for name, closure in closures.items():
    p = env_path(repo, name)
    with atomic_path(p) as tmp: tmp.write_text(render_env(name, closure))
    out.append(p)
  return out


def refresh_envs(repo: str | Path, uv: str, uv_args: list[str]) -> list[Path]:
  """Resolve each environment's packages within the lock (its versions as constraints) and write envs/*.yaml."""
  import tempfile
  from mlperf_bert.lock import _compile, lock_path, read_lock
  lock = read_lock(lock_path(repo, ENV_PYTHON))
  closures = {}
  with tempfile.TemporaryDirectory() as tmp:
    t = Path(tmp)
    cons = t / "lock.txt"; cons.write_text("".join(f"{l.name}=={l.version}\n" for l in lock.values()))
    for name, (_, _, top) in ENVS.items():
      src = t / f"{name}.in"; src.write_text("\n".join(top) + "\n")
      closures[name] = [lock[k] for k in _compile(uv, uv_args, ENV_PYTHON, [src], t / f"{name}.txt", cons)]
  return write_envs(repo, closures)

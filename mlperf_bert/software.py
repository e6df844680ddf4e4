"""The software a result was made with, as its provenance records it (`software_record`): the lock the checkout
installs from (its path and sha256), every installed Python distribution whose version is not the lock's (an
editable or local install says so), and the versions of the Debian packages the project installs (clang, LLVM 19,
SLURM) that dpkg says are installed. The audit compares it with the lock of the run's commit (audit/software.py)."""
from __future__ import annotations
import json, subprocess
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.lock import canonical, lock_digest, lock_path, read_lock, LOCK_DIR

# the packages that can change a result's bytes or verdict, each with what it changes (docs/reproducibility.md):
# the audit names one that ran at another version than its commit's lock in a WARN row
SHAPING = {
  "tinygrad": "every kernel of training and evaluation: the numbers of the run",
  "numpy": "shard creation (masking draws, packing) and the eval set's rows; the checks' arithmetic",
  "tokenizers": "WordPiece tokenization of the text: every token id of every shard",
  "numba": "the shard writer's compiled loops (the instances each topic gives)",
  "safetensors": "the bytes of the initial and final weights as written and read",
  "mlperf-logging": "the compliance checker and result summarizer: the audit's verdicts and scores",
  "snakemake": "the workflow's DAG and its rerun decisions: which jobs run, the audit's dry run",
}
# the Debian packages scripts/setup.sh (clang, libllvm19) and scripts/slurm-cluster.sh (SLURM) install
APT_PATTERNS = ("clang", "clang-[0-9]*", "libllvm19", "libclang-cpp19", "slurm-wlm", "slurmd", "slurmctld",
                "slurm-client")


def installed() -> dict[str, dict[str, str]]:
  """{canonical name: {name, version, install}} of every distribution this Python sees; `install` is 'editable
  <url>' or 'local <url>' for one installed from a directory or file rather than an index, else ''."""
  out = {}
  for d in distributions():
    name = d.metadata.get("Name")
    if not name: continue
    how = ""
    try: direct = json.loads(d.read_text("direct_url.json") or "null")
    except ValueError: direct = None
    if isinstance(direct, dict):
      url = str(direct.get("url", ""))
      if (direct.get("dir_info") or {}).get("editable"): how = f"editable {url}"
      elif url.startswith("file:"): how = f"local {url}"
    seen = out.get(canonical(name))
    if seen is None: out[canonical(name)] = {"name": name, "version": d.version, "install": how}
    # the first on sys.path is the one imported; an editable install's own record may come after the metadata its
    # build left in the checkout (mlperf_bert.egg-info, seen from the checkout's directory)
    elif not seen["install"] and seen["version"] == d.version: seen["install"] = how
  return out


def apt_versions(patterns: tuple[str, ...] = APT_PATTERNS) -> dict[str, str]:
  """{package: version} of the installed Debian packages matching `patterns` ({'error': why} without dpkg-query)."""
  try:
    p = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package} ${Version}\\n", *patterns],
                       capture_output=True, text=True, timeout=60)
  except (OSError, subprocess.TimeoutExpired) as e:
    return {"error": f"dpkg-query not usable: {e}"}
  out = {}
  for line in p.stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[0] == "ii": out[parts[1]] = parts[2]
  return out


def software_record(repo_dir: str | Path) -> dict[str, Any]:
  """The provenance's `software`: {lock, lock_sha256, differs: {name: {installed, lock, install}}, apt}."""
  path = lock_path(repo_dir)
  rec: dict[str, Any] = {"lock": f"{LOCK_DIR}/{path.name}", "lock_sha256": None, "differs": {}}
  try:
    lock = read_lock(path)
    rec["lock_sha256"] = lock_digest(path)
  except UserError as e:
    lock = {}
    rec["lock_error"] = str(e)
  for key, dist in sorted(installed().items()):
    want = lock[key].version if key in lock else None
    if dist["version"] != want or dist["install"]:
      rec["differs"][dist["name"]] = {"installed": dist["version"], "lock": want,
                                      **({"install": dist["install"]} if dist["install"] else {})}
  rec["apt"] = apt_versions()
  return rec

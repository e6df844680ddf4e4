"""Provenance of a result log: one JSON record beside it that says what produced it, from which bytes.

`write_provenance` records the resolved config and platform file, the seed, the project's git commit and
whether the tree was dirty, the versions of the software that matters (and the lock's digest, every installed version
that differs from the lock, the Debian packages' versions: software.py), the md5 and sha256 of every input on
the log's chain (downloads, manifest, vocab, bert_config, initial weights, every shard, the eval set), the
command line, host and platform, and the log's own hashes. `verify_provenance` re-hashes everything a record
names and reports each difference; the audit of a workflow basedir calls it.

A record is relocatable: files under the basedir are named relative to it, and every absolute path of the
checkout, the working directory or the basedir is written as `<checkout>/...`, `<workdir>/...`, `<basedir>/...`
(`relocatable`), so a moved or handed-over tree verifies and compares as it did where it was built.
"""
from __future__ import annotations
import datetime as _dt, getpass, hashlib, json, os, platform as _platform, re, socket, subprocess, sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable

import yaml

from mlperf_bert.constants import platform_path
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path
from mlperf_bert.software import software_record

PROVENANCE_SCHEMA = "mlperf-bert/provenance/1"
PACKAGES = ("mlperf-bert", "tinygrad", "numpy", "snakemake", "mlperf-logging", "gdown", "tensorflow", "tensorflow-cpu",
            "tokenizers", "safetensors", "jsonschema", "pyyaml", "matplotlib", "numba")


def hashes(path: str | os.PathLike, chunk: int = 1 << 22) -> dict[str, Any]:
  """md5 and sha256 of a file in one read, and its size."""
  md5, sha = hashlib.md5(), hashlib.sha256()
  n = 0
  with open(path, "rb") as f:
    while block := f.read(chunk):
      md5.update(block); sha.update(block); n += len(block)
  return {"bytes": n, "md5": md5.hexdigest(), "sha256": sha.hexdigest()}


def size_differs(path: str | os.PathLike, recorded_bytes) -> str:
  """Why `path` need not be hashed to know it changed: '' when its size is the recorded one (or none is recorded),
  else both sizes. Checked before every hash of a recorded file, so a huge (or sparse) file in place of a small one
  is one row at once, never minutes of hashing."""
  if isinstance(recorded_bytes, bool) or not isinstance(recorded_bytes, int): return ""
  size = os.stat(path).st_size
  return "" if size == recorded_bytes else f"{size} bytes, the record says {recorded_bytes}"


def versions() -> dict[str, str]:
  """Python and the installed versions of the packages that shape a result (those not installed are left out)."""
  out = {"python": _platform.python_version()}
  for name in PACKAGES:
    try: out[name] = version(name)
    except PackageNotFoundError: pass
  return out


def git_state(repo_dir: str | os.PathLike) -> dict[str, Any]:
  """The repository's HEAD commit and whether tracked or untracked (not ignored) files differ from it."""
  def git(*args):
    return subprocess.run(["git", "-C", str(repo_dir), *args], capture_output=True, text=True, timeout=60)
  try:
    head = git("rev-parse", "HEAD")
  except (OSError, subprocess.TimeoutExpired) as e:
    return {"commit": None, "dirty": None, "error": f"git not usable: {e}"}
  if head.returncode != 0:
    return {"commit": None, "dirty": None, "error": head.stderr.strip() or "not a git repository"}
  status = git("status", "--porcelain", "--untracked-files=normal")
  changed = [l[3:] for l in status.stdout.splitlines() if l.strip()]
  return {"commit": head.stdout.strip(), "dirty": bool(changed), "changed": changed[:50],
          "changed_count": len(changed)}


def host_info() -> dict[str, Any]:
  """The machine the record is written on: the audit compares a train record's machine (host, CPU model, flags,
  cores) with it (audit/claims.py)."""
  from mlperf_bert.machine import cpu_model_and_flags
  try: user = getpass.getuser()
  except Exception: user = None
  cpu, flags = cpu_model_and_flags()
  return {"hostname": socket.gethostname(), "user": user, "platform": _platform.platform(),
          "machine": _platform.machine(), "processor": _platform.processor(), "cpu_count": os.cpu_count(),
          "cpu": cpu, "cpu_flags": flags, "python_executable": sys.executable}


def _anchors(repo_dir=None, basedir=None, workdir=None) -> list[tuple[str, str]]:
  """(absolute prefix, placeholder), longest first; each as given and resolved (symlinks)."""
  out = {}
  for path, name in ((repo_dir, "<checkout>"), (workdir, "<workdir>"), (basedir, "<basedir>")):
    if path is None: continue
    for form in {os.path.abspath(path), str(Path(path).resolve())}:
      if len(form) > 1: out[form] = name
  return sorted(out.items(), key=lambda kv: -len(kv[0]))


def relocatable(obj, repo_dir=None, basedir=None, workdir=None):
  """`obj` (JSON-like) with every absolute path under the checkout, the working directory or the basedir
  written as `<checkout>/...`, `<workdir>/...` or `<basedir>/...` (the basedir wins when it lies inside another)."""
  anchors = _anchors(repo_dir, basedir, workdir)
  pats = [(re.compile(re.escape(a) + r"(?=/|$|[\s'\",;:=])"), ph) for a, ph in anchors]

  def fix(x):
    if isinstance(x, str):
      for pat, ph in pats:
        x = pat.sub(ph, x)
      return x
    if isinstance(x, dict): return {k: fix(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)): return [fix(v) for v in x]
    return x
  return fix(obj)


def _relative_to(path: Path, base: Path | None) -> str | None:
  if base is None: return None
  try: return str(path.resolve().relative_to(base.resolve()))
  except ValueError: return None


def file_record(path: str | os.PathLike, basedir: str | os.PathLike | None = None) -> dict[str, Any]:
  p = Path(path)
  if not p.is_file():
    raise UserError(f"{p}: input of the provenance record not found; it must exist when the record is written")
  rec = {"path": str(p), **hashes(p)}
  side = p.with_name(p.name + ".sha256")  # written when the file was accepted (downloads, shards)
  if side.is_file():
    rec["accepted_sha256"] = (side.read_text().split() or [None])[0]
  r = _relative_to(p, Path(basedir) if basedir else None)
  if r is not None: rec.update(path=f"<basedir>/{r}", basedir_path=r)  # never where the basedir was
  return rec


def load_platform_file(repo_dir: str | os.PathLike, platform: str) -> dict[str, Any] | None:
  """platforms/<platform>/platform.yaml (with its sha256) if the repository has one."""
  f = platform_path(repo_dir, platform)
  if not f.is_file(): return None
  return {"path": str(f), "sha256": hashes(f)["sha256"], "values": yaml.safe_load(f.read_text()) or {}}


def trainer_entry(trainer: dict, checkout_records: Iterable[str | os.PathLike] = ()) -> dict[str, Any]:
  """The provenance's `trainer`: the workflow's {name, commit, source} with the git tree the checkout rule verified
  (tinygrad/checkout.json; mlperf_bert/train/tinygrad_trainer/source.py)."""
  out = dict(trainer)
  for p in checkout_records:
    rec = json.loads(Path(p).read_text())
    if rec.get("commit") != out.get("commit"):
      raise UserError(f"{p}: the checkout is commit {rec.get('commit')}, the config names {out.get('commit')}; rerun "
                      f"rule tinygrad_checkout (snakemake --forcerun tinygrad_checkout)")
    out["tree"] = rec.get("tree")
  return out


def build_provenance_record(*, log_path, inputs: dict[str, Iterable], config: dict, seed, platform: str, command,
                            repo_dir, platform_file: dict | None = None, extra: dict | None = None,
                            basedir: str | os.PathLike | None = None, trainer: dict | None = None) -> dict[str, Any]:
  basedir = basedir if basedir is not None else config.get("basedir")
  log_path = Path(log_path)
  if not log_path.is_file():
    raise UserError(f"{log_path}: result log not found; the provenance record describes an existing log")
  rec = {
    "schema": PROVENANCE_SCHEMA,
    "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    "log": file_record(log_path, basedir),
    "seed": int(seed) if str(seed).lstrip("-").isdigit() else seed,
    "platform": platform,
    # the platform file (records before 2026-12-03 name it `platform_profile`, at profiles/<platform>/platform.yaml)
    "platform_file": platform_file if platform_file is not None else load_platform_file(repo_dir, platform),
    "config": config,
    "git": git_state(repo_dir),
    "versions": versions(),
    # the lock installed from (lock/py<X.Y>.txt, its sha256), what differs from it, the Debian packages (software.py)
    "software": software_record(repo_dir),
    "inputs": {group: [file_record(p, basedir) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
               for group, paths in inputs.items()},
    "command": list(command) if isinstance(command, (list, tuple)) else str(command),
    "cwd": os.getcwd(),
    "host": host_info(),
    # who trained: this project's trainer, or tinygrad's own model_train.py at a verified commit (trainer_entry)
    "trainer": trainer or {"name": "project"},
  }
  if extra: rec["extra"] = extra
  return relocatable(rec, repo_dir=repo_dir, basedir=basedir, workdir=os.getcwd())


def write_provenance(out_path, *, log_path, inputs: dict[str, list], config: dict, seed, platform: str, command,
                     repo_dir, platform_file: dict | None = None, extra: dict | None = None,
                     basedir: str | os.PathLike | None = None, trainer: dict | None = None) -> dict[str, Any]:
  """Write the provenance record of `log_path` to `out_path` (atomically) and return it.

  inputs: group name -> paths, e.g. {"downloads": [...], "shards": [...], "eval": [...], "init_weights": [...]}.
  config: the resolved workflow config (must be JSON-serialisable). command: argv list or a string.
  basedir: the run's basedir (default: config["basedir"]); files under it are recorded relative to it.
  """
  rec = build_provenance_record(log_path=log_path, inputs=inputs, config=config, seed=seed, platform=platform,
                                command=command, repo_dir=repo_dir, platform_file=platform_file, extra=extra,
                                basedir=basedir, trainer=trainer)
  try:
    text = json.dumps(rec, indent=2, sort_keys=False, default=str) + "\n"
  except (TypeError, ValueError) as e:
    raise UserError(f"{out_path}: the provenance record is not JSON-serialisable ({e}); pass plain config values")
  with atomic_path(out_path) as tmp:
    tmp.write_text(text)
  return rec


def listed_shards(sums_path: str | os.PathLike) -> list[str]:
  """The shards SHA256SUMS lists, as paths beside it, sorted by name: the provenance rule's shards (the workflow
  writes SHA256SUMS from every topic's sidecar, so the rule needs no input that waits on the extract rule,
  which made Snakemake build each provenance job twice while planning). UserError (one line) for a line that is not
  `<sha256>  <name>.shard` or a listed shard that is missing."""
  sums = Path(sums_path)
  names = []
  try:
    lines = sums.read_text(encoding="utf-8").splitlines()
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"{sums}: cannot read it ({e}); rebuild it (rule shard_checksums)") from None
  for n, line in enumerate(lines, 1):
    h, sep, name = line.partition("  ")
    if not sep or not re.fullmatch(r"[0-9a-f]{64}", h) or not re.fullmatch(r"[^/\\]+\.shard", name):
      raise UserError(f"{sums}:{n}: not '<sha256>  <name>.shard' ({line[:80]!r}); rebuild it (rule shard_checksums)")
    names.append(name)
  paths = [str(sums.parent / name) for name in sorted(names)]
  for q in paths:
    if not Path(q).is_file():
      raise UserError(f"{sums}: lists {Path(q).name}, which is missing; rebuild the shards (snakemake all)")
  return paths


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
  try:
    rec = json.loads(Path(path).read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: not a readable provenance record ({e}); rebuild it with the workflow's provenance rule")
  if not isinstance(rec, dict) or rec.get("schema") != PROVENANCE_SCHEMA:
    raise UserError(f"{path}: not a {PROVENANCE_SCHEMA} record; rebuild it with the workflow's provenance rule")
  return rec


def locate(entry: dict, basedir: str | os.PathLike | None, repo_dir: str | os.PathLike | None = None,
           workdir: str | os.PathLike | None = None) -> Path:
  """Where a recorded file is now: under `basedir` if it was recorded inside the basedir, else its path (with
  `<checkout>`, `<workdir>`, `<basedir>` standing for the current ones)."""
  if basedir is not None and entry.get("basedir_path"):
    return Path(basedir) / entry["basedir_path"]
  path = entry["path"]
  for ph, now in (("<checkout>", repo_dir), ("<workdir>", workdir or os.getcwd()), ("<basedir>", basedir)):
    if now is not None and (path == ph or path.startswith(ph + "/")):
      return Path(str(now) + path[len(ph):])
  return Path(path)


def verify_provenance(rec: dict, basedir: str | os.PathLike | None = None, hasher=hashes,
                      repo_dir: str | os.PathLike | None = None) -> list[tuple[str, str, str]]:
  """Re-hash the log and every input a record names.

  Returns (status, path, reason) per file: PASS when md5, sha256 and size match, FAIL when a file is missing or
  differs. `basedir` relocates files recorded inside the run's basedir (so a moved tree still verifies);
  `hasher(path) -> {bytes, md5, sha256}` lets a caller share one hashing pass between several checks.
  """
  out = []
  entries = [("log", rec["log"])] + [(g, e) for g, es in rec.get("inputs", {}).items() for e in es]
  for group, e in entries:
    p = locate(e, basedir, repo_dir)
    name = e.get("basedir_path") or e["path"]
    if not p.is_file():
      out.append(("FAIL", name, f"{group}: recorded file is missing ({p})"))
      continue
    if why := size_differs(p, e.get("bytes")):
      out.append(("FAIL", name, f"{group}: {why} (not hashed)"))
      continue
    h = hasher(p)
    diffs = [k for k in ("bytes", "md5", "sha256") if e.get(k) != h[k]]
    if diffs:
      out.append(("FAIL", name, f"{group}: {', '.join(diffs)} differ from the provenance record "
                  f"(sha256 now {h['sha256'][:12]}..., recorded {str(e.get('sha256'))[:12]}...)"))
    else:
      out.append(("PASS", name, f"{group}: md5 and sha256 match"))
  return out

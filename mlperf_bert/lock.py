"""The lock: every Python dependency of the package and of each extra, at one exact version with its files' sha256.

One file per supported Python, `lock/py<major>.<minor>.txt`, for Linux x86_64 (manylinux_2_28), one requirement a
line in pip's requirements format, each with the groups that need it after `#`:

    numpy==2.4.6 --hash=sha256:89cd...  # base
    torch==2.13.0+cpu --hash=sha256:6746...  # test

`base` is the package's own dependencies, `tf`, `test`, `dress`, `slurm` its extras (each group lists its whole
closure), `setup` what scripts/setup.sh installs the rest with (uv) and the package's build backend (setuptools).
scripts/setup.sh installs the lines of `base`, `setup` and the extras asked for, hashes required (uv pip sync, or pip
--require-hashes --no-deps). `bash scripts/lock.sh` refreshes the lock (`refresh`: uv pip compile, the current lock's
versions preferred) and the conda environments envs/*.yaml from it (`write_envs`); tests/test_lock.py checks both
against pyproject.toml.
"""
from __future__ import annotations
import hashlib, json, re, subprocess, sys, tempfile, tomllib
from dataclasses import dataclass
from pathlib import Path

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path

LOCK_DIR = "lock"
# the Pythons locked, each resolved at its lowest patch release the lock's packages accept (soupsieve 4.1.4, which
# gdown needs, requires Python >= 3.11.5), for the platform of the manylinux wheels Linux x86_64 installs
PYTHONS = {"3.11": "3.11.5", "3.12": "3.12.0"}
PLATFORM = "x86_64-manylinux_2_28"
BASE, SETUP = "base", "setup"
# setup's own tools, locked beside the rest: uv (scripts/setup.sh installs it with pip, hash-checked) and the build
# backend pyproject.toml's [build-system] names (the editable install builds without isolation, offline)
SETUP_REQUIREMENTS = ("uv", "setuptools>=68")
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})*)"
                   r"\s*#\s*(?P<groups>[a-z0-9 _-]+?)\s*$")


def canonical(name: str) -> str:
  """A distribution's name as PEP 503 normalises it (Jinja2, jinja2 and jinja_2 are one package)."""
  return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Locked:
  name: str
  version: str
  hashes: tuple[str, ...]
  groups: tuple[str, ...]

  def line(self) -> str:
    return f"{self.name}=={self.version} " + " ".join(f"--hash=sha256:{h}" for h in self.hashes) + \
      "  # " + " ".join(self.groups)


def lock_path(repo: str | Path, python: str | None = None) -> Path:
  """lock/py3.11.txt for Python 3.11 (`python`: 'major.minor'; default: the running one)."""
  return Path(repo) / LOCK_DIR / f"py{python or '%d.%d' % sys.version_info[:2]}.txt"


def parse_lock(text: str, where: str = "the lock") -> dict[str, Locked]:
  """{canonical name: Locked} of a lock file's text; UserError (one line) for a line that is not a locked
  requirement with its hashes and groups."""
  out = {}
  for n, raw in enumerate(text.splitlines(), 1):
    if not raw.strip() or raw.startswith("#"): continue
    m = _LINE.match(raw)
    if not m or not m["hashes"]:
      raise UserError(f"{where}:{n}: not '<name>==<version> --hash=sha256:<hex>...  # <groups>' "
                      f"({raw[:60]!r}); restore it from git or refresh it (bash scripts/lock.sh)")
    out[canonical(m["name"])] = Locked(m["name"], m["version"], tuple(re.findall(r"sha256:([0-9a-f]{64})", m["hashes"])),
                                       tuple(m["groups"].split()))
  return out


def read_lock(path: str | Path) -> dict[str, Locked]:
  try: text = Path(path).read_text()
  except OSError as e: raise UserError(f"{path}: cannot read the lock ({e.strerror}); restore it from git") from None
  return parse_lock(text, str(path))


def lock_digest(path: str | Path) -> str:
  return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def requirements_of(pyproject: str | Path) -> dict[str, list[str]]:
  """{group: [requirement strings]} of pyproject.toml: `base` (its dependencies) and each extra."""
  project = tomllib.loads(Path(pyproject).read_text())["project"]
  return {BASE: list(project.get("dependencies", [])), **project.get("optional-dependencies", {})}


def requirements_digest(pyproject: str | Path) -> str:
  """sha256 of pyproject.toml's dependencies and extras (what the lock was resolved from), as canonical JSON."""
  return hashlib.sha256(json.dumps(requirements_of(pyproject), sort_keys=True).encode()).hexdigest()


def recorded_requirements_digest(path: str | Path) -> str | None:
  m = re.search(r"^# pyproject requirements sha256: ([0-9a-f]{64})$", Path(path).read_text(), re.M)
  return m[1] if m else None


# ---------------------------------------------------------------------------------------------------- refresh

def _compile(uv: str, uv_args: list[str], python: str, src: list[Path], out: Path, constraint: Path | None,
             extra: str | None = None, prefer: Path | None = None,
             all_extras: bool = False) -> dict[str, tuple[str, str, tuple[str, ...]]]:
  """uv pip compile of `src` (with one extra, or all) for one Python on PLATFORM, hashes generated, the pins of
  `prefer` preferred: {canonical name: (name, version, sha256s)}."""
  if prefer is not None and prefer.is_file(): out.write_text(prefer.read_text())  # uv keeps an output file's pins
  cmd = [uv, "pip", "compile", *map(str, src), "--python-version", PYTHONS[python], "--python-platform", PLATFORM,
         "--generate-hashes", "--no-header", "--no-annotate", "-q", "-o", str(out), *uv_args]
  if extra: cmd += ["--extra", extra]
  if all_extras: cmd += ["--all-extras"]
  if constraint: cmd += ["-c", str(constraint)]
  try: p = subprocess.run(cmd, capture_output=True, text=True)
  except OSError as e:
    raise UserError(f"{uv}: cannot run uv pip compile ({e.strerror}); bash scripts/setup.sh installs uv into .venv") from None
  if p.returncode != 0:
    tail = " | ".join(l for l in p.stderr.strip().splitlines()[-3:])
    raise UserError(f"uv pip compile {' '.join(s.name for s in src)} for Python {python}{f' [{extra}]' if extra else ''} failed: {tail}")
  reqs, cur = {}, None
  for line in out.read_text().splitlines():
    if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
      cur = canonical(m[1]); reqs[cur] = (m[1], m[2], [])
    for h in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
      reqs[cur][2].append(h)
  return {k: (n, v, tuple(hs)) for k, (n, v, hs) in reqs.items()}


def refresh(repo: str | Path, uv: str, uv_args: list[str], pythons: list[str] | None = None,
            constraint: Path | None = None) -> list[Path]:
  """Resolve pyproject.toml (each extra, and setup's tools) into lock/py<X.Y>.txt for each Python; the current
  lock's versions are kept where pyproject still allows them (delete a line, or the file, to move it on).
  `constraint`: a requirements file whose versions the running Python's lock must take (e.g. `pip freeze` of a venv,
  to lock what it has); the other Pythons' locks prefer the versions of the first one written."""
  repo = Path(repo)
  pyproject = repo / "pyproject.toml"
  groups = list(requirements_of(pyproject))
  written, here = [], "%d.%d" % sys.version_info[:2]
  todo = sorted(pythons or list(PYTHONS), key=lambda py: py != here)  # this Python's first: `constraint` is its
  unknown = [py for py in todo if py not in PYTHONS]
  if unknown: raise UserError(f"no lock for Python {unknown[0]}: add it to PYTHONS (mlperf_bert/lock.py)")
  first: dict[str, Locked] = {}
  with tempfile.TemporaryDirectory() as tmp:
    t = Path(tmp)
    for py in todo:
      path = lock_path(repo, py)
      prefer = t / f"prefer-{py}.txt"
      # its own pins, else those of the lock just written, else another Python's lock
      others = [read_lock(lock_path(repo, o)) for o in PYTHONS if o != py and lock_path(repo, o).is_file()]
      old = {k: v for lock in [*others, first, read_lock(path) if path.is_file() else {}] for k, v in lock.items()}
      prefer.write_text("".join(f"{l.name}=={l.version}\n" for l in old.values()))
      setup_in = t / "setup.in"; setup_in.write_text("\n".join(SETUP_REQUIREMENTS) + "\n")
      # the package with all its extras, and setup's tools: one resolution, which each group's is constrained to
      full = _compile(uv, uv_args, py, [pyproject, setup_in], t / f"all-{py}.txt",
                      constraint if py == here else None, prefer=prefer, all_extras=True)
      cons = t / f"cons-{py}.txt"; cons.write_text("".join(f"{n}=={v}\n" for n, v, _ in full.values()))
      member: dict[str, list[str]] = {k: [] for k in full}
      for g in groups + [SETUP]:
        src = setup_in if g == SETUP else pyproject
        part = _compile(uv, uv_args, py, [src], t / f"{g}-{py}.txt", cons, extra=None if g in (BASE, SETUP) else g)
        for k in part: member.setdefault(k, []).append(g)
      lines = [Locked(n, v, hs, tuple(member[k])) for k, (n, v, hs) in sorted(full.items())]
      path.parent.mkdir(exist_ok=True)
      with atomic_path(path) as tmp: tmp.write_text(
        f"# The lock for Python {py} on Linux x86_64 ({PLATFORM}), resolved for Python {PYTHONS[py]}: generated by "
        f"`bash scripts/lock.sh`; do not edit.\n# Groups after '#': base (the package's dependencies), its extras, "
        f"setup (uv and the build backend); scripts/setup.sh installs base, setup and the extras asked for.\n"
        f"# pyproject requirements sha256: {requirements_digest(pyproject)}\n" + "".join(l.line() + "\n" for l in lines))
      written.append(path)
      first = first or {canonical(l.name): l for l in lines}
  return written


def lock_disagreements(pyproject: str | Path, path: str | Path) -> list[str]:
  """What in the lock at `path` does not follow pyproject.toml ([] when it does): the requirements it was resolved
  from (their sha256 in its header), each requirement of each group locked in that group at a version its specifier
  allows (and for its Python, as its markers say), and no group pyproject.toml does not name."""
  from packaging.requirements import Requirement
  lock, out = read_lock(path), []
  reqs = requirements_of(pyproject)
  if recorded_requirements_digest(path) != requirements_digest(pyproject):
    out.append(f"{Path(path).name} was resolved from other requirements than pyproject.toml's")
  py = Path(path).stem.removeprefix("py")
  for group, items in reqs.items():
    for text in items:
      r = Requirement(text)
      if r.marker is not None and not r.marker.evaluate({"python_version": py, "extra": group}): continue
      got = lock.get(canonical(r.name))
      if got is None: out.append(f"{r.name} ({group}) is not in {Path(path).name}")
      elif group not in got.groups: out.append(f"{r.name} is not locked in group {group}")
      elif not r.specifier.contains(got.version, prereleases=True):
        out.append(f"{r.name} {got.version} is locked, pyproject.toml asks {r.specifier} ({group})")
  stray = {g for l in lock.values() for g in l.groups} - set(reqs) - {SETUP}
  out += [f"group {g} is in {Path(path).name}, not in pyproject.toml" for g in sorted(stray)]
  return out

"""The rules of a round's own release: the BERT checker configs and RCPs of mlcommons/logging as they stood when a
MLPerf Training round's results were published (its main line's last commit before the round's first commit to
training_results_vX.Y), as kept in resources/mlperf-rules/<ruleset>/ by tools/record_round_rules.py.

The installed mlperf-logging carries one copy of each ruleset's rules, edited after its round: training_2.1.0's
closed_bert.yaml asked `opt_epsilon` at the v2.1 results (tag 2.1.0) and `opt_lamb_epsilon` since mlcommons/logging
d82b94d (2022-11-22), after them. A round's logs are checked with its release's rules: the
installed tools run unchanged, from a package laid out of symlinks to the installed files in which the kept rule
files stand where the installed ones stood (`overlay`); the RCPs go to the rcp_checker as a custom RCP file.
"""
from __future__ import annotations
import contextlib, functools, json, os, re, tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

RULES_DIR = Path(__file__).resolve().parents[2] / "resources" / "mlperf-rules"
ROUNDS_MANIFEST = RULES_DIR / "rounds.json"
SOURCE_REPO = "github.com/mlcommons/logging"
PACKAGE = "mlperf_logging"


# What a round's release checker let pass in its code, not its configs, and the installed checker's code no longer
# does: training 1.1.0's, mlcommons/logging 63c9709 (2021-10-05, in 1.1.0-rc1 ... rc4), turned a failed
# weights-initialization check into the warning "can be ignored for 1.1.0"; 4c04112 (2022-03-29) fails it again.
# {ruleset: (the installed checker's messages it waived, by their start; the row's note)}
CODE_WAIVERS = {"1.1.0": (("Required AT_LEAST_ONE occurrence of 'weights_initialization'",
                           "failed test: sorted(s['initialized_tensors'])"),
                          "a failed weights-initialization check (\"can be ignored for 1.1.0\", mlcommons/logging "
                          "63c9709; today's checker fails it since 4c04112)")}
WAIVED = "waived as the round's release did: "


def apply_waivers(ruleset: str, ok: bool, msgs: list[str]) -> tuple[bool, list[str]]:
  """A compliance verdict with what the round's release checker let pass in its code (CODE_WAIVERS) taken out: valid
  when nothing else remains, its messages then one note naming the waiver."""
  if ok or ruleset not in CODE_WAIVERS: return ok, msgs
  starts, note = CODE_WAIVERS[ruleset]
  rest = [m for m in msgs if not m.startswith(starts)]
  if len(rest) == len(msgs): return ok, msgs
  return (True, [WAIVED + note]) if not rest else (False, rest)


@dataclass(frozen=True)
class RoundRules:
  ruleset: str              # "2.1.0"
  tag: str                  # the mlcommons/logging release tag the commit is at or after (git describe), "2.1.0"
  commit: str               # mlcommons/logging's last commit before the round's results
  date: str                 # the commit's date, YYYY-MM-DD
  results_date: str         # the round's first commit to training_results_vX.Y, ISO
  root: Path                # resources/mlperf-rules/<ruleset>: holds mlperf_logging/<path> for each of files
  files: tuple[str, ...]    # paths inside the mlperf_logging package

  def kept(self, rel: str) -> Path:
    return self.root / PACKAGE / rel

  def rcp_file(self) -> Path | None:
    rel = f"rcp_checker/training_{self.ruleset}/rcps_bert.json"
    return self.kept(rel) if rel in self.files else None


def installed_package() -> Path:
  import mlperf_logging
  return Path(mlperf_logging.__file__).resolve().parent


def installed_version() -> str:
  from importlib.metadata import PackageNotFoundError, version
  try: return version("mlperf-logging")
  except PackageNotFoundError: return "?"


@functools.lru_cache(maxsize=None)
def round_rules(ruleset: str, manifest: Path = ROUNDS_MANIFEST) -> RoundRules | None:
  """The kept rules of the ruleset's round, or None where none are kept (the installed ones are then used)."""
  try:
    rounds = json.loads(manifest.read_text())["rounds"]
  except (OSError, ValueError, KeyError):
    return None
  r = rounds.get(ruleset)
  if not r: return None
  return RoundRules(ruleset, r["tag"], r["commit"], r["date"], r["results_date"], manifest.parent / ruleset,
                    tuple(r["files"]))


@functools.lru_cache(maxsize=None)
def differing(rules: RoundRules) -> tuple[str, ...]:
  """The kept files whose bytes differ from the installed mlperf-logging's (or that it lacks)."""
  pkg = installed_package()
  out = []
  for rel in rules.files:
    mine = pkg / rel
    if not mine.is_file() or mine.read_bytes() != rules.kept(rel).read_bytes():
      out.append(rel)
  return tuple(out)


_NAME = re.compile(r"^\s*NAME:\s*(\S+)\s*$")


def _yaml_names(text: str) -> set[str]:
  return {m.group(1) for l in text.splitlines() if (m := _NAME.match(l)) and m.group(1)}


def _rcp_records(text: str) -> dict[str, str]:
  try:
    return {k: json.dumps(v, sort_keys=True) for k, v in json.loads(text).items()}
  except ValueError:
    return {}


def what_differs(rules: RoundRules) -> list[str]:
  """Today's rules against the round's, one short phrase a differing file: the keys a config asks that the round's
  did not (and the reverse), the RCP records added, removed or changed, else how many lines differ."""
  pkg, out = installed_package(), []
  for rel in differing(rules):
    name = rel.split("/", 1)[-1]
    today = (pkg / rel).read_text(errors="replace") if (pkg / rel).is_file() else ""
    then = rules.kept(rel).read_text(errors="replace")
    if rel.endswith(".json"):
      a, b = _rcp_records(then), _rcp_records(today)
      parts = [f"{w} {', '.join(sorted(ks))}" for w, ks in (("add", set(b) - set(a)), ("drop", set(a) - set(b)),
               ("change", {k for k in a.keys() & b.keys() if a[k] != b[k]})) if ks]
      out.append(f"{name}: today's " + "; ".join(parts) if parts else f"{name}: formatted differently")
      continue
    added, gone = _yaml_names(today) - _yaml_names(then), _yaml_names(then) - _yaml_names(today)
    parts = ([f"ask {', '.join(sorted(added))}"] if added else []) + ([f"no longer ask {', '.join(sorted(gone))}"]
                                                                      if gone else [])
    if not parts:
      more = [l.strip() for l in today.splitlines() if l not in set(then.splitlines())]
      less = [l.strip() for l in then.splitlines() if l not in set(today.splitlines())]
      parts = ([f"differ in {len(more) + len(less)} lines"] if len(more) + len(less) > 2 else
               [f"add `{l}`" for l in more] + [f"drop `{l}`" for l in less])
    out.append(f"{name}: today's " + " and ".join(parts))
  return out


def rules_in_force(ruleset: str) -> str:
  """Which rules a ruleset's logs are checked under, and where today's differ: the audit's `rules` row."""
  rules = round_rules(ruleset)
  today = f"mlperf-logging {installed_version()}"
  if rules is None:
    return f"checked with the installed {today}'s training {ruleset} rules (no round's release rules are kept)"
  head = (f"checked with the round's rules: {SOURCE_REPO.split('/', 1)[1]} {rules.commit[:7]} ({rules.tag}, "
          f"{rules.date}), as at the v{ruleset.rsplit('.', 1)[0]} results ({rules.results_date[:10]})")
  diff = what_differs(rules)
  waiver = (f"; as the round's release checker did, it lets pass {CODE_WAIVERS[ruleset][1]}" if ruleset in CODE_WAIVERS
            else "")
  if not diff:
    return f"{head}; the installed {today}'s are the same{waiver}"
  return f"{head}; the installed {today}'s differ: " + "; ".join(diff) + waiver


@contextlib.contextmanager
def overlay(rules: RoundRules) -> Iterator[dict[str, str]]:
  """An environment whose `python -m mlperf_logging...` runs the installed mlperf-logging unchanged with the round's
  rule files: a temporary package of symlinks to every installed file, the kept files linked where the installed
  ones lie (the checkers find their configs and RCPs beside their own `__file__`). Yields the environment to pass."""
  pkg = installed_package()
  with tempfile.TemporaryDirectory(prefix="mlperf-rules-") as tmp:
    dest = Path(tmp) / PACKAGE
    for rel in rules.files:   # real folders along the kept files' paths, a symlink for everything else
      src, out = pkg, dest
      for part in Path(rel).parts[:-1]:
        if not out.is_dir() or out.is_symlink():
          out.mkdir(parents=True, exist_ok=True)
          for e in (src.iterdir() if src.is_dir() else ()):
            if e.name != "__pycache__" and not (out / e.name).exists(): (out / e.name).symlink_to(e)
        src, out = src / part, out / part
        if out.is_symlink(): out.unlink()
      out.mkdir(parents=True, exist_ok=True)
      for e in (src.iterdir() if src.is_dir() else ()):
        if e.name != "__pycache__" and not (out / e.name).exists(): (out / e.name).symlink_to(e)
      link = out / Path(rel).name
      if link.is_symlink() or link.exists(): link.unlink()
      link.symlink_to(rules.kept(rel).resolve())
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, root, *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    yield env


def tool_env(ruleset: str) -> contextlib.AbstractContextManager[dict[str, str] | None]:
  """The environment to run mlperf-logging's tools under for a ruleset: the round's rules where they differ from the
  installed ones, else None (the installed tools as they are)."""
  rules = round_rules(ruleset)
  if rules is None or not differing(rules):
    return contextlib.nullcontext(None)
  return overlay(rules)

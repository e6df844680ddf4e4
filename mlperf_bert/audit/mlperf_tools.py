"""mlperf-logging's checkers (compliance, system description, RCP, result summarizer, package checker), called the way
their `python -m` entry points call them, returning verdicts and one-line reasons."""
from __future__ import annotations
import contextlib, csv, functools, importlib.util, json, logging, os, re, subprocess, sys, tempfile
from pathlib import Path
from typing import Iterator

from mlperf_logging.benchmark_meta import get_allowed_benchmarks
from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.system_desc_checker import system_desc_checker

from mlperf_bert.constants import RULESET
from mlperf_bert.audit.round_rules import apply_waivers, round_rules, tool_env
from mlperf_bert.audit.untrusted import MAX_COPY_BYTES, MAX_COPY_FILES, MAX_JSON_BYTES, problem, safe_copy

# ----------------------------------------------------------------------------------------------------------------
# mlperf-logging's checkers, called the way their `python -m` entry points call them, returning verdicts + reasons
# ----------------------------------------------------------------------------------------------------------------
USAGE = "training"


def _rcp_checker():
  """mlperf-logging's rcp_checker module, imported when an RCP is read: it imports scipy.stats (~1 s), which every
  `python -m mlperf_bert` process would otherwise pay at start."""
  from mlperf_logging.rcp_checker import rcp_checker
  return rcp_checker


# the installed rcp_checker's folder (its RCP files), found without importing it
_RCP_DIR = Path(importlib.util.find_spec("mlperf_logging.rcp_checker").submodule_search_locations[0])
TOOL_TIMEOUT_S = 1800   # result_summarizer / package_checker on one org's copy (the largest published: ~40 s)


class _Collect(logging.Handler):
  def __init__(self):
    super().__init__(logging.DEBUG)
    self.records: list[logging.LogRecord] = []

  def emit(self, record):
    self.records.append(record)


@contextlib.contextmanager
def captured_logging() -> Iterator[_Collect]:
  """Route the root logger (which mlperf-logging's checkers use) into a list for the duration."""
  root = logging.getLogger()
  h = _Collect()
  old_level, old_handlers = root.level, root.handlers[:]
  root.handlers = [h]
  root.setLevel(logging.INFO)
  try:
    yield h
  finally:
    root.handlers = old_handlers
    root.setLevel(old_level)


def supported_rulesets() -> list[str]:
  return sorted(r for r in mlp_compliance.rule_choices())


def bert_in_ruleset(ruleset: str) -> bool:
  try:
    return "bert" in get_allowed_benchmarks(USAGE, ruleset)
  except ValueError:
    return False


def _short(msg: str) -> str:
  """A compliance message in one line: its first line plus the failed test, if any."""
  lines = [l.strip() for l in msg.strip().splitlines() if l.strip()]
  if not lines: return ""
  out = lines[0]
  for l in lines[1:]:
    if l.startswith("failed test:"):
      out += f" ({l})"
      break
  return out


def compliance_check(log_path: str | os.PathLike, ruleset: str = RULESET) -> tuple[bool, list[str]]:
  """mlperf-logging's compliance checker on one log (as `python -m mlperf_logging.compliance_checker
  --usage training --ruleset RULESET LOG`). Returns (valid, one-line messages)."""
  mlp_compliance.enqueued_configs.clear()
  checker = mlp_compliance.make_checker(USAGE, ruleset, False, False)
  with captured_logging() as cap:
    try:
      valid = checker.check_file(str(log_path), f"{USAGE}_{ruleset}/common.yaml")
    except Exception as e:  # the parser raises KeyError on a record without 'key', for instance
      mlp_compliance.enqueued_configs.clear()
      return False, [f"compliance checker stopped: {type(e).__name__}: {e}"]
  msgs = [_short(m) for m in [*checker.overwritable.values(), *checker.not_overwritable]]
  parse_errors = [r.getMessage().strip() for r in cap.records if r.getMessage().strip().startswith("^^")]
  if parse_errors:
    msgs.insert(0, f"{len(parse_errors)} line(s) failed to parse")
  return bool(valid), msgs


def compliance_checks(log_paths: list[Path], ruleset: str = RULESET) -> dict[str, tuple[bool, list[str]]]:
  """compliance_check on each log under the rules of the ruleset's round (round_rules.py): in this process where they
  are the installed ones, else in one child running the installed checker with the round's configs; less what the
  round's release checker let pass in its code (round_rules.CODE_WAIVERS). {path: (valid, messages)}."""
  with tool_env(ruleset) as env:
    if env is None or not log_paths:
      return {str(p): apply_waivers(ruleset, *compliance_check(p, ruleset)) for p in log_paths}
    with tempfile.TemporaryDirectory(prefix="mlperf-compliance-") as tmp:
      out = Path(tmp) / "verdicts.json"
      rc, text = _run_tool(["mlperf_bert.audit.mlperf_tools", "compliance", ruleset, str(out), *map(str, log_paths)],
                           Path(tmp), env)
      try:
        got = json.loads(out.read_text())
      except (OSError, ValueError):
        tail = (text.strip().splitlines() or [""])[-1][:200]
        return {str(p): (False, [f"compliance checker stopped (exit {rc}): {tail}"]) for p in log_paths}
  return {k: apply_waivers(ruleset, bool(v[0]), list(v[1])) for k, v in got.items()}


def system_desc_check(json_path: str | os.PathLike, ruleset: str = RULESET) -> tuple[bool, list[str]]:
  """mlperf-logging's system_desc_checker on systems/<system>.json. Returns (valid, reasons)."""
  try:
    json.loads(Path(json_path).read_text())
  except FileNotFoundError:
    return False, [f"missing {json_path}"]
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    return False, [f"{json_path} is not valid JSON: {e}"]
  with captured_logging() as cap:
    try:
      valid, *_ = system_desc_checker.check_system_desc(str(json_path), USAGE, ruleset)
    except Exception as e:
      return False, [f"system_desc_checker stopped: {type(e).__name__}: {e}"]
  reasons = [r.getMessage().strip() for r in cap.records if r.levelno >= logging.ERROR]
  return bool(valid), reasons


def has_rcps(ruleset: str) -> bool:
  """Whether the ruleset has BERT RCPs, its round's kept ones or the installed mlperf-logging's (its rcp_checker starts
  at training 1.0.0)."""
  return _rcp_file(ruleset) is not None or (_RCP_DIR / f"{USAGE}_{ruleset}" /
                                            "rcps_bert.json").is_file()


def _rcp_file(ruleset: str) -> Path | None:
  """The round's own BERT RCP file where one is kept (round_rules.py), which the rcp_checker takes as custom RCPs."""
  rules = round_rules(ruleset)
  return rules.rcp_file() if rules else None


@functools.lru_cache(maxsize=1)
def rcp_max_speedup() -> float:
  """The largest scaling factor the rcp_checker writes with any BERT RCP of the installed mlperf-logging: a record's
  `Max Speedup` (its mean over its fastest run) bounds the factor, an interpolated record's too (it lies between
  two records')."""
  top = 1.0
  with captured_logging():
    for r in supported_rulesets():
      if not has_rcps(r): continue
      try:
        kept = _rcp_file(r)
        with (open(kept) if kept else contextlib.nullcontext(None)) as f:
          c = _rcp_checker().RCP_Checker(USAGE, r, "bert", False, f)
      except Exception:  # an RCP file the installed checker cannot read bounds nothing
        continue
      top = max([top] + [x["Max Speedup"] for recs in (c.rcp_data, c.pruned_rcp_data) for x in recs.values()])
  return top


def status_only(desc: dict, ruleset: str = RULESET) -> bool:
  """Whether a system description that system_desc_checker rejects passes it with a valid `status`: its only fault
  is the status value (the checker reports that alone, hiding any other)."""
  with tempfile.TemporaryDirectory(prefix="mlperf-desc-") as tmp:
    f = Path(tmp) / "system.json"
    f.write_text(json.dumps({**desc, "status": "Available on-premise"}))
    return system_desc_check(f, ruleset)[0]


def rcp_check(bert_dir: str | os.PathLike, ruleset: str = RULESET) -> tuple[bool, str]:
  """mlperf-logging's RCP check of a result directory, as `python -m mlperf_logging.rcp_checker DIR
  --rcp_usage training --rcp_version RULESET` runs it (pruned RCPs, epoch_num not train_samples)."""
  ok, msg, _ = rcp_scaling(bert_dir, ruleset)
  return ok, msg


def rcp_scaling(bert_dir: str | os.PathLike, ruleset: str = RULESET) -> tuple[bool, str, float]:
  """rcp_check and the scaling factor package_checker has the rcp_checker write into the directory's scaling.json
  (`check_directory(..., set_scaling=True)`, which deletes any file there first): the RCP mean over the
  submission's mean epochs when the check passes and the submission converged faster than the RCP mean, else no
  file (1.0). Computed without writing anything. The submission's epochs are read from epoch_num, as package_checker
  reads them by default, and, when that fails, from train_samples, as `package_checker --rcp_bert_train_samples`
  reads them (logs of v1.0 and v1.1 count their epochs in samples). The RCPs are the round's own where kept."""
  if not has_rcps(ruleset):
    return True, f"training {ruleset} has no BERT RCPs (mlperf-logging's rcp_checker starts at 1.0.0)", 1.0
  out = None
  for train_samples in (False, True):
    with captured_logging():
      try:
        kept = _rcp_file(ruleset)
        with (open(kept) if kept else contextlib.nullcontext(None)) as f:
          ok, msg, norm = _rcp_checker().check_directory(str(bert_dir), USAGE, ruleset, False, train_samples,
                                                      rcp_file=f, rcp_pass="pruned_rcps")
      except Exception as e:
        ok, msg, norm = False, f"rcp_checker stopped: {type(e).__name__}: {e}", 1.0
    if train_samples: msg += " (epochs from train_samples, as package_checker --rcp_bert_train_samples reads them)"
    out = out or (bool(ok), msg, float(norm) if ok and norm > 1 else 1.0)
    if ok: return bool(ok), msg, float(norm) if norm > 1 else 1.0
  return out


def _copy_package(org_dir: Path, dest: Path) -> Path:
  """Copy an org's BERT parts (results/*/bert with each system's package_checker_params, the systems/*.json of
  those systems, benchmarks/bert) into dest/<org>: regular files only, never following a symlink out of the org nor
  reading a FIFO or device (see untrusted.safe_copy). Another benchmark's system description is not the BERT
  result's: package_checker, which checks every systems/*.json, does not see it."""
  out = dest / org_dir.name
  budget = [MAX_COPY_FILES, MAX_COPY_BYTES]
  out.mkdir(parents=True)
  results, systems = org_dir / "results", org_dir / "systems"
  if problem(results, org_dir, want="dir") is None:
    for sysdir in sorted(results.iterdir()):
      safe_copy(sysdir / "bert", out / "results" / sysdir.name / "bert", org_dir, budget)
      safe_copy(sysdir / "package_checker_params", out / "results" / sysdir.name / "package_checker_params", org_dir,
                budget)
  bert = {p.parent.name for p in (out / "results").glob("*/bert")}
  if problem(systems, org_dir, want="dir") is None:
    for f in sorted(systems.glob("*.json")):
      if f.stem in bert and problem(f, org_dir, max_bytes=MAX_JSON_BYTES) is None:
        safe_copy(f, out / "systems" / f.name, org_dir, budget)
  if (org_dir / "benchmarks" / "bert").is_dir():
    safe_copy(org_dir / "benchmarks" / "bert", out / "benchmarks" / "bert", org_dir, budget)
  return out


def _run_tool(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
  """`python -m ARGS` in cwd (in env: round_rules.tool_env's), bounded by TOOL_TIMEOUT_S: (exit status, output)."""
  try:
    p = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, errors="replace",
                       timeout=TOOL_TIMEOUT_S, env=env)
  except subprocess.TimeoutExpired:
    return 124, f"ERROR - {args[0]} did not finish in {TOOL_TIMEOUT_S} s"
  return p.returncode, p.stdout + p.stderr


def result_summarizer(org_dir: str | os.PathLike, ruleset: str = RULESET) -> dict:
  """Run `python -m mlperf_logging.result_summarizer ORG training RULESET` on a temporary copy of the org
  directory, under the rules of the ruleset's round (round_rules.tool_env).
  Returns {"scores": {system dir: minutes or None}, "rcp": {system dir: str}, "output": text}."""
  org_dir = Path(org_dir)
  with tempfile.TemporaryDirectory(prefix="mlperf-summarizer-") as tmp:
    tmp = Path(tmp)
    copy = _copy_package(org_dir, tmp / "pkg")
    with tool_env(ruleset) as env:
      rc, out = _run_tool(["mlperf_logging.result_summarizer", str(copy), USAGE, ruleset, "--csv",
                           str(tmp / "summary.csv")], tmp, env)
    scores, rcp = {}, {}
    for name, key in (("summary.csv", "bert"), ("summary_detailed.csv", "bert:RCP")):
      f = tmp / name
      if not f.exists(): continue
      with open(f, newline="") as fh:
        for row in csv.DictReader(fh):
          m = re.search(r"/systems/(.+)\.json$", row.get("details_url", ""))
          system = m.group(1) if m else row.get("system", "")
          v = row.get(key)
          if key == "bert":
            scores[system] = float(v) if v not in (None, "") else None
          else:
            rcp[system] = v or ""
    return {"scores": scores, "rcp": rcp, "returncode": rc, "output": out}


def package_checker(org_dir: str | os.PathLike, ruleset: str = RULESET, *, in_place: bool = False,
                    log_output: str | os.PathLike | None = None) -> tuple[bool, str]:
  """Run `python -m mlperf_logging.package_checker ORG training RULESET` (on a temporary copy unless
  in_place), under the rules of the ruleset's round (round_rules.tool_env). Returns (passed, its output).
  It exits 0 either way; its verdict is its last log line."""
  org_dir = Path(org_dir)
  with tempfile.TemporaryDirectory(prefix="mlperf-package-") as tmp:
    tmp = Path(tmp)
    target = org_dir.resolve() if in_place else _copy_package(org_dir, tmp / "pkg")
    log = Path(log_output).resolve() if log_output else tmp / "package_checker.log"
    with tool_env(ruleset) as env:
      rc, out = _run_tool(["mlperf_logging.package_checker", str(target), USAGE, ruleset, "--log_output", str(log)],
                          tmp, env)
    if not in_place:  # name the audited package in the messages, not the temporary copy
      out = out.replace(str(target), str(org_dir))
  passed = rc == 0 and "PACKAGE CHECKER FOUND NO ERRORS" in out
  return passed, out



def package_checker_errors(output: str) -> list[str]:
  """The ERROR lines of a package checker run, one line each."""
  return [e for errs in package_checker_errors_by_system(output).values() for e in errs]


def package_checker_errors_by_system(output: str) -> dict[str, list[str]]:
  """The ERROR lines of a package checker run by the system whose results/<system>/bert it was checking ("" for
  the errors before the first: the system descriptions), one line each."""
  out: dict[str, list[str]] = {}
  system = ""
  for l in output.splitlines():
    m = re.search(r"Running compliance checks in dir .*/results/(.+)/bert\s*$", l)
    if m:
      system = m.group(1)
    elif l.startswith("ERROR"):
      out.setdefault(system, []).append(l.split("-", 1)[1].strip() if "-" in l else l.strip())
  return out


if __name__ == "__main__":   # the child of compliance_checks: `compliance RULESET OUT.json LOG...`, in tool_env's env
  _, _cmd, _ruleset, _out, *_logs = sys.argv
  Path(_out).write_text(json.dumps({p: compliance_check(p, _ruleset) for p in _logs}))

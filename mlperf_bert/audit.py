"""`python -m mlperf_bert audit PATH`: check MLPerf BERT results with mlperf-logging's own tools.

PATH is one of (detected in this order):
  * a submission org directory: `<org>/` holding `results/<system>/bert/result_<i>.txt` and `systems/<system>.json`;
  * a directory of org directories (an MLCommons results repository, or `{basedir}/submission/`);
  * a workflow basedir (has `results/<platform>/result_bert_<seed>.log`, `shards/` or `download/`): Snakemake's
    dry run, every artifact re-hashed against the provenance records and the shard checksum list, and the log
    checks on every result log (see `audit_basedir`).

Every check is one row: PASS, FAIL, WARN (worth a look, not disqualifying), DROP (a run olympic scoring drops) or
SKIP (not applicable, with the reason). The exit status is 1 when any row FAILs, 0 otherwise, 2 for bad usage.
Nothing is written into the audited tree: the result summarizer and package checker run on a temporary copy.
See docs/audit.md.
"""
from __future__ import annotations
import argparse, contextlib, csv, json, logging, os, re, shutil, subprocess, sys, tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from mlperf_logging.benchmark_meta import get_allowed_benchmarks
from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.rcp_checker import rcp_checker
from mlperf_logging.system_desc_checker import system_desc_checker

from mlperf_bert.errors import UserError
from mlperf_bert.mlperf_logs import MLPerfLog, normalize_ruleset, olympic_score, read_log

# ----------------------------------------------------------------------------------------------------------------
# mlperf-logging's checkers, called the way their `python -m` entry points call them, returning verdicts + reasons
# ----------------------------------------------------------------------------------------------------------------
USAGE = "training"
DEFAULT_RULESET = "5.0.0"   # the last MLPerf Training ruleset with BERT
LAST_BERT_RULESET = "5.0.0"


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


def compliance_check(log_path: str | os.PathLike, ruleset: str = DEFAULT_RULESET) -> tuple[bool, list[str]]:
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


def system_desc_check(json_path: str | os.PathLike, ruleset: str = DEFAULT_RULESET) -> tuple[bool, list[str]]:
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


def rcp_check(bert_dir: str | os.PathLike, ruleset: str = DEFAULT_RULESET) -> tuple[bool, str]:
  """mlperf-logging's RCP check of a result directory, as `python -m mlperf_logging.rcp_checker DIR
  --rcp_usage training --rcp_version RULESET` runs it (pruned RCPs, epoch_num not train_samples)."""
  with captured_logging():
    try:
      ok, msg, _ = rcp_checker.check_directory(str(bert_dir), USAGE, ruleset, False, False, rcp_pass="pruned_rcps")
    except Exception as e:
      return False, f"rcp_checker stopped: {type(e).__name__}: {e}"
  return bool(ok), msg


def _copy_package(org_dir: Path, dest: Path) -> Path:
  """Copy an org's systems/ and results/ (and benchmarks/ if present) into dest/<org>."""
  out = dest / org_dir.name
  for sub in ("systems", "results", "benchmarks"):
    if (org_dir / sub).is_dir():
      shutil.copytree(org_dir / sub, out / sub, symlinks=False)
  return out


def result_summarizer(org_dir: str | os.PathLike, ruleset: str = DEFAULT_RULESET) -> dict:
  """Run `python -m mlperf_logging.result_summarizer ORG training RULESET` on a temporary copy of the org
  directory. Returns {"scores": {system dir: minutes or None}, "rcp": {system dir: str}, "output": text}."""
  org_dir = Path(org_dir)
  with tempfile.TemporaryDirectory(prefix="mlperf-summarizer-") as tmp:
    tmp = Path(tmp)
    copy = _copy_package(org_dir, tmp / "pkg")
    p = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(copy), USAGE, ruleset,
                        "--csv", str(tmp / "summary.csv")], cwd=tmp, capture_output=True, text=True)
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
    return {"scores": scores, "rcp": rcp, "returncode": p.returncode, "output": p.stdout + p.stderr}


def package_checker(org_dir: str | os.PathLike, ruleset: str = DEFAULT_RULESET, *, in_place: bool = False,
                    log_output: str | os.PathLike | None = None) -> tuple[bool, str]:
  """Run `python -m mlperf_logging.package_checker ORG training RULESET` (on a temporary copy unless
  in_place). Returns (passed, its output). It exits 0 either way; its verdict is its last log line."""
  org_dir = Path(org_dir)
  with tempfile.TemporaryDirectory(prefix="mlperf-package-") as tmp:
    tmp = Path(tmp)
    target = org_dir.resolve() if in_place else _copy_package(org_dir, tmp / "pkg")
    log = Path(log_output).resolve() if log_output else tmp / "package_checker.log"
    p = subprocess.run([sys.executable, "-m", "mlperf_logging.package_checker", str(target), USAGE, ruleset,
                        "--log_output", str(log)], cwd=tmp, capture_output=True, text=True)
    out = p.stdout + p.stderr
    if not in_place:  # name the audited package in the messages, not the temporary copy
      out = out.replace(str(target), str(org_dir))
  passed = p.returncode == 0 and "PACKAGE CHECKER FOUND NO ERRORS" in out
  return passed, out



def package_checker_errors(output: str) -> list[str]:
  """The ERROR lines of a package checker run, one line each."""
  out = []
  for l in output.splitlines():
    if l.startswith("ERROR"):
      out.append(l.split("-", 1)[1].strip() if "-" in l else l.strip())
  return out


# ----------------------------------------------------------------------------------------------------------------
# the audit's rows
# ----------------------------------------------------------------------------------------------------------------
RESULT_COUNT = 10          # logs per system that MLPerf scores BERT from (mlperf_logging.benchmark_meta)
INIT_LIMIT_MIN = {"closed": 30, "open": 240}   # as the compliance checker's common.yaml sets them
EVAL_SAMPLES = 10000       # the MLPerf BERT eval set
STATUSES = ("PASS", "FAIL", "WARN", "DROP", "SKIP")


@dataclass
class Row:
  status: str
  check: str
  subject: str
  reason: str = ""


@dataclass
class RunVerdict:
  system: str
  file: str
  seed: int | None
  minutes: float | None
  accuracy: float | None
  verdict: str


@dataclass
class Audit:
  path: str
  kind: str
  ruleset: str
  strict: bool = False
  rows: list[Row] = field(default_factory=list)
  runs: list[RunVerdict] = field(default_factory=list)
  scores: dict[str, dict] = field(default_factory=dict)

  def add(self, status: str, check: str, subject: str, reason: str = "") -> Row:
    assert status in STATUSES, status
    if status == "WARN" and self.strict: status = "FAIL"
    row = Row(status, check, subject, reason)
    self.rows.append(row)
    return row

  @property
  def failed(self) -> bool:
    return any(r.status == "FAIL" for r in self.rows)

  def counts(self) -> dict[str, int]:
    return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

  def to_dict(self) -> dict:
    return {"path": self.path, "kind": self.kind, "ruleset": self.ruleset, "verdict": "FAIL" if self.failed else "PASS",
            "counts": self.counts(), "rows": [asdict(r) for r in self.rows], "runs": [asdict(r) for r in self.runs],
            "scores": self.scores}


def _index(p: Path) -> tuple:
  m = re.fullmatch(r"result_(\d+)\.txt", p.name)
  return (0, int(m.group(1))) if m else (1, p.name)


def _fingerprint(log: MLPerfLog) -> tuple:
  """The log's events except the seed: two runs with equal fingerprints are one run logged twice."""
  return tuple((e.key, json.dumps(e.value, sort_keys=True), e.time_ms) for e in log.events if e.key != "seed")


def _shorten(items: list[str], n: int = 3) -> str:
  s = "; ".join(items[:n])
  return s + (f"; ... ({len(items) - n} more)" if len(items) > n else "")


def check_logs(audit: Audit, logs: list[MLPerfLog], *, system: str, division: str | None, ruleset: str,
               subject_prefix: str = "", expect_count: int | None = RESULT_COUNT, expect_platform: str | None = None,
               bert_dir: Path | None = None, scoring: bool = True) -> float | None:
  """The per-log and per-system rows for one system's BERT logs. Returns the olympic score (minutes) or None.

  scoring=False (a workflow basedir's logs, e.g. a short CPU demo): runs that did not converge are a WARN, not a
  FAIL, since the tree can be complete and intact without a score."""
  names = {id(l): (subject_prefix + l.path.name if l.path else "?") for l in logs}
  if expect_count is not None:
    if len(logs) == expect_count:
      audit.add("PASS", "log count", system, f"{len(logs)} result logs")
    else:
      audit.add("FAIL", "log count", system, f"{len(logs)} result logs; MLPerf scores BERT from exactly {expect_count} "
                f"(one per seed): add or remove runs")
  valid_minutes: dict[int, float | None] = {}
  for log in logs:
    s = names[id(log)]
    log_div = log.division or division
    # parse
    if log.malformed:
      audit.add("FAIL", "parse", s, f"{len(log.malformed)} malformed :::MLLOG line(s): "
                + _shorten([str(m) for m in log.malformed]))
    elif not log.events:
      audit.add("FAIL", "parse", s, "no :::MLLOG lines: not an MLPerf result log")
    else:
      audit.add("PASS", "parse", s, f"{len(log.events)} :::MLLOG events")
    # benchmark
    if log.benchmark != "bert":
      audit.add("FAIL", "benchmark", s, f"submission_benchmark is {log.benchmark!r}, expected 'bert': a log of "
                "another benchmark (or none) in a BERT result directory")
    # division and platform agree with the system description
    if division and log.division and log.division != division:
      audit.add("FAIL", "division", s, f"log says {log.division!r}, systems json says {division!r}")
    if expect_platform and log.platform and log.platform != expect_platform:
      audit.add("WARN", "platform", s, f"submission_platform {log.platform!r} differs from the system {expect_platform!r}")
    # ruleset claimed by the log
    claim = log.claimed_ruleset
    if claim and claim != ruleset:
      if not bert_in_ruleset(claim):
        audit.add("FAIL", "ruleset claim", s, f"log claims ruleset {claim}, which has no BERT benchmark (BERT's last "
                  f"MLPerf Training ruleset is {LAST_BERT_RULESET}); checked under {ruleset}")
      else:
        audit.add("WARN", "ruleset claim", s, f"log claims ruleset {claim}; checked under {ruleset}")
    # mlperf-logging's compliance checker
    assert log.path is not None
    ok, msgs = compliance_check(log.path, ruleset)
    converged = log.converged
    if ok:
      audit.add("PASS", "compliance", s, f"mlperf-logging compliance_checker, training {ruleset}")
    elif not converged and not log.malformed and log.benchmark == "bert" and log.events:
      audit.add("DROP", "compliance", s, f"not converged ({log.nonconvergence_reason()}); checker: {_shorten(msgs)}")
    else:
      audit.add("FAIL", "compliance", s, _shorten(msgs) or "compliance checker rejected the log")
    # run_stop / convergence
    if converged:
      audit.add("PASS", "run_stop", s, f"status success after {log.run_minutes:.2f} min")
    else:
      audit.add("DROP", "run_stop", s, f"not converged: {log.nonconvergence_reason()}")
    # init duration
    limit = INIT_LIMIT_MIN.get(log_div or "", 30)
    im = log.init_minutes
    if im is None:
      audit.add("FAIL", "init time", s, "no init_start/init_stop pair")
    elif im >= limit:
      audit.add("FAIL", "init time", s, f"init took {im:.2f} min; the {log_div or 'closed'} division allows < {limit}")
    else:
      audit.add("PASS", "init time", s, f"{im:.2f} min < {limit}")
    # eval samples
    es = log.eval_samples
    if log_div == "closed":
      if es == EVAL_SAMPLES:
        audit.add("PASS", "eval_samples", s, f"{es}")
      else:
        audit.add("WARN", "eval_samples", s, f"eval_samples is {es!r}; the closed BERT eval set has {EVAL_SAMPLES:,} "
                  "samples (mlperf-logging's checkers do not test this)")
    # seed
    if log.seed is None:
      audit.add("FAIL", "seed", s, "no integer `seed` event; every run logs its seed")
    elif len(set(map(str, log.seeds))) > 1:
      audit.add("WARN", "seed", s, f"several seeds logged: {log.seeds}")
    valid_minutes[id(log)] = log.run_minutes if (ok and converged) else None

  # across the system's runs
  by_seed: dict[int, list[str]] = {}
  for log in logs:
    if log.seed is not None: by_seed.setdefault(log.seed, []).append(names[id(log)])
  dups = {k: v for k, v in by_seed.items() if len(v) > 1}
  if dups:
    audit.add("FAIL", "unique seeds", system, "; ".join(f"seed {k} in {', '.join(v)}" for k, v in dups.items())
              + ": every run needs its own seed")
  elif logs:
    audit.add("PASS", "unique seeds", system, f"{len(by_seed)} distinct seeds")
  fps: dict[tuple, list[str]] = {}
  for log in logs:
    if log.events: fps.setdefault(_fingerprint(log), []).append(names[id(log)])
  same = [v for v in fps.values() if len(v) > 1]
  if same:
    audit.add("WARN", "distinct runs", system, "; ".join(" and ".join(v) for v in same)
              + " are identical except for the seed (same timestamps, values and accuracies)")
  dropped = [names[id(l)] for l in logs if valid_minutes[id(l)] is None]
  if logs:
    if len(dropped) > 1:
      audit.add("FAIL" if scoring else "WARN", "converged runs", system, f"{len(dropped)} runs did not converge or failed compliance "
                f"({', '.join(dropped)}); olympic scoring drops at most 1")
    else:
      audit.add("PASS", "converged runs", system, f"{len(logs) - len(dropped)} of {len(logs)}"
                + (f"; olympic scoring drops {dropped[0]}" if dropped else ""))
  # RCP
  if bert_dir is not None:
    if len(logs) != RESULT_COUNT:
      audit.add("SKIP", "rcp", system, f"needs exactly {RESULT_COUNT} logs, found {len(logs)}")
    elif division != "closed":
      audit.add("SKIP", "rcp", system, f"{division or 'unknown'} division: RCPs apply to the closed division")
    else:
      ok, msg = rcp_check(bert_dir, ruleset)
      audit.add("PASS" if ok else "FAIL", "rcp", system, f"rcp_checker training {ruleset}: {msg}")
  # verdicts and score
  good = sorted((valid_minutes[id(l)], names[id(l)]) for l in logs if valid_minutes[id(l)] is not None)
  fastest = good[0][1] if good else None
  slowest = good[-1][1] if good and not dropped else None
  for log in logs:
    n = names[id(log)]
    if valid_minutes[id(log)] is None:
      why = log.nonconvergence_reason() if not log.converged else "failed compliance"
      if log.malformed: why = f"malformed log ({len(log.malformed)} bad lines)"
      v = f"dropped: {why}"
    elif not scoring: v = "converged"
    elif expect_count is not None and len(logs) != expect_count:
      v = f"converged (no olympic score: {len(logs)} of {expect_count} logs)"
    elif n == fastest: v = "dropped: fastest (olympic)"
    elif n == slowest: v = "dropped: slowest (olympic)"
    else: v = "scored"
    audit.runs.append(RunVerdict(system, n, log.seed, log.run_minutes, log.final_eval_accuracy, v))
  if expect_count is not None and len(logs) != expect_count:
    return None
  return olympic_score([valid_minutes[id(l)] for l in logs])


def audit_org(audit: Audit, org_dir: Path, ruleset: str) -> None:
  """All rows for one submission org directory `<org>/{results,systems}`."""
  org = org_dir.name
  results = org_dir / "results"
  systems = sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
  if not systems:
    audit.add("FAIL", "layout", org, f"no system directories under {results}; expected results/<system>/bert/result_<i>.txt")
    return
  mine: dict[str, float | None] = {}
  for sysdir in systems:
    system = sysdir.name
    desc = org_dir / "systems" / f"{system}.json"
    division = None
    if not desc.is_file():
      audit.add("FAIL", "system description", system, f"missing systems/{system}.json: every results/{system}/ needs "
                "one (the fields mlperf-logging's system_desc_checker requires)")
    else:
      ok, reasons = system_desc_check(desc, ruleset)
      audit.add("PASS" if ok else "FAIL", "system description", system,
                f"systems/{system}.json passes system_desc_checker" if ok else _shorten(reasons))
      with contextlib.suppress(Exception):
        division = json.loads(desc.read_text()).get("division")
        desc_org = json.loads(desc.read_text()).get("submitter")
        if desc_org and desc_org != org:
          audit.add("WARN", "submitter", system, f"systems/{system}.json names submitter {desc_org!r}, the directory is {org!r}")
    benches = sorted(p for p in sysdir.iterdir() if p.is_dir())
    for b in benches:
      if b.name != "bert":
        audit.add("SKIP", "benchmark dir", f"{system}/{b.name}", "only bert is audited")
    bert = sysdir / "bert"
    if not bert.is_dir():
      audit.add("FAIL", "layout", system, f"no {bert.relative_to(org_dir)} directory")
      continue
    files = sorted((p for p in bert.iterdir() if p.is_file()), key=_index)
    logs_f = [p for p in files if re.fullmatch(r"result_\d+\.txt", p.name)]
    other = [p.name for p in files if p not in logs_f and p.name not in ("package_checker_params", "scaling.json")]
    if other:
      audit.add("WARN", "file names", system, f"not named result_<i>.txt, ignored by MLPerf's tools: {', '.join(other)}")
    logs = [read_log(p) for p in logs_f]
    if not logs:
      audit.add("FAIL", "log count", system, f"no result_<i>.txt in {bert.relative_to(org_dir)}")
      continue
    mine[system] = check_logs(audit, logs, system=system, division=division, ruleset=ruleset,
                              subject_prefix=f"{system}/", expect_platform=system, bert_dir=bert)
  # the official tools on a temporary copy: result_summarizer's score, package_checker's verdict
  if not bert_in_ruleset(ruleset):
    return
  summ = result_summarizer(org_dir, ruleset)
  for system, score in mine.items():
    theirs = summ["scores"].get(system)
    key = f"{org}/{system}"
    audit.scores[key] = {"score": score, "result_summarizer": theirs}
    if score is None:
      audit.add("FAIL", "score", system, "no olympic score: needs 10 logs with at most 1 not converged"
                + (f" (result_summarizer: {theirs:.2f})" if theirs is not None else ""))
    elif theirs is None:
      audit.add("WARN", "score", system, f"{score:.2f} min; result_summarizer gave no score for {system} (it skips "
                "systems without a valid systems json)")
    elif abs(score - theirs) > 0.005:
      audit.add("FAIL", "score", system, f"{score:.2f} min differs from result_summarizer's {theirs:.2f}")
    else:
      audit.add("PASS", "score", system, f"{score:.2f} min (olympic mean of 8 of 10; result_summarizer {theirs:.2f})")
  ok, out = package_checker(org_dir, ruleset)
  errs = package_checker_errors(out)
  audit.add("PASS" if ok else "FAIL", "package_checker", org,
            f"mlperf-logging package_checker training {ruleset}: " + ("no errors" if ok else _shorten(errs, 4) or "errors"))


def is_org_dir(p: Path) -> bool:
  return (p / "results").is_dir() and (p / "systems").is_dir()


def is_basedir(p: Path) -> bool:
  if any(p.glob("results/*/result_bert_*.log")): return True
  return (p / "shards").is_dir() or (p / "download").is_dir() or (p / "eval").is_dir()


def detect_kind(path: Path) -> str:
  """'org' (a submission org directory), 'orgs' (a directory of them) or 'basedir' (a workflow tree)."""
  if not path.is_dir():
    raise UserError(f"{path}: not a directory; pass a submission org directory (<org>/ with results/ and systems/), "
                    "a directory of them, or a workflow basedir")
  if is_org_dir(path): return "org"
  if is_basedir(path): return "basedir"
  if any(is_org_dir(c) for c in path.iterdir() if c.is_dir()): return "orgs"
  raise UserError(f"{path}: neither a submission org directory (results/ and systems/), a directory of them, nor a "
                  "workflow basedir (results/<platform>/result_bert_<seed>.log, shards/, download/)")


def check_ruleset(audit: Audit, ruleset: str) -> None:
  if ruleset not in supported_rulesets():
    raise UserError(f"--ruleset {ruleset}: mlperf-logging {_mlperf_logging_version()} has no training {ruleset}; "
                    f"use one of {', '.join(supported_rulesets())}")
  if bert_in_ruleset(ruleset):
    audit.add("PASS", "ruleset", audit.path, f"training {ruleset} (mlperf-logging {_mlperf_logging_version()})")
  else:
    audit.add("FAIL", "ruleset", audit.path, f"BERT is not a benchmark of MLPerf Training {ruleset}; its last ruleset is "
              f"{LAST_BERT_RULESET}: rerun with --ruleset {LAST_BERT_RULESET}")


def _mlperf_logging_version() -> str:
  from importlib.metadata import PackageNotFoundError, version
  try: return version("mlperf-logging")
  except PackageNotFoundError: return "?"


def audit_submission(path: str | os.PathLike, ruleset: str = DEFAULT_RULESET, strict: bool = False) -> Audit:
  """Audit a submission org directory, or a directory of org directories."""
  path = Path(path)
  kind = detect_kind(path)
  if kind == "basedir":
    raise UserError(f"{path} is a workflow basedir, not a submission directory; use audit_basedir")
  audit = Audit(str(path), kind, ruleset, strict)
  check_ruleset(audit, ruleset)
  orgs = [path] if kind == "org" else sorted(c for c in path.iterdir() if c.is_dir() and is_org_dir(c))
  for org in orgs:
    audit_org(audit, org, ruleset)
  return audit


# ----------------------------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------------------------
def format_table(audit: Audit) -> str:
  kinds = {"org": "submission org directory", "orgs": "directory of submission orgs", "basedir": "workflow basedir"}
  out = [f"MLPerf BERT audit of {audit.path} ({kinds.get(audit.kind, audit.kind)}; ruleset training {audit.ruleset})", ""]
  w_check = max([len("CHECK")] + [len(r.check) for r in audit.rows])
  w_subj = max([len("SUBJECT")] + [len(r.subject) for r in audit.rows])
  out.append(f"{'STATUS':<6}  {'CHECK':<{w_check}}  {'SUBJECT':<{w_subj}}  REASON")
  for r in audit.rows:
    out.append(f"{r.status:<6}  {r.check:<{w_check}}  {r.subject:<{w_subj}}  {r.reason}")
  if audit.runs:
    out += ["", "Runs:"]
    w_file = max(len(v.file) for v in audit.runs)
    out.append(f"  {'LOG':<{w_file}}  {'SEED':>6}  {'MINUTES':>8}  {'ACCURACY':>8}  VERDICT")
    for v in audit.runs:
      mins = f"{v.minutes:8.2f}" if v.minutes is not None else f"{'-':>8}"
      acc = f"{v.accuracy:8.4f}" if v.accuracy is not None else f"{'-':>8}"
      out.append(f"  {v.file:<{w_file}}  {v.seed if v.seed is not None else '-':>6}  {mins}  {acc}  {v.verdict}")
  if audit.scores:
    out += ["", "Scores (olympic mean, minutes):"]
    for k, s in audit.scores.items():
      mine = f"{s['score']:.2f}" if s.get("score") is not None else "none"
      theirs = s.get("result_summarizer")
      out.append(f"  {k}: {mine}" + (f"   (result_summarizer: {theirs:.2f})" if theirs is not None else ""))
  c = audit.counts()
  out += ["", "Summary: " + ", ".join(f"{c[s]} {s}" for s in STATUSES) + f" -> {'FAIL' if audit.failed else 'PASS'}"]
  return "\n".join(out)


# ----------------------------------------------------------------------------------------------------------------
# a finished workflow tree (basedir)
# ----------------------------------------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
_JOB_HEAD = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):\s*$")


def parse_dry_run(text: str) -> list[dict]:
  """Jobs of `snakemake -n` output: [{rule, output, wildcards, reason}] (the `all`-style target jobs left out)."""
  jobs, cur = [], None
  for line in text.splitlines():
    m = _JOB_HEAD.match(line.strip()) if not line.startswith("    ") else None
    if m:
      cur = {"rule": m.group(1), "output": "", "wildcards": "", "reason": ""}
      jobs.append(cur)
      continue
    if cur is not None and line.startswith("    "):
      k, _, v = line.strip().partition(": ")
      if k in ("output", "wildcards", "reason"): cur[k] = v
    elif cur is not None and line.strip() and not line.startswith("["):
      cur = None
  return [j for j in jobs if j["output"]]


def snakemake_dry_run(workflow_dir: Path, workdir: Path, configfiles: list[str], overrides: dict[str, str],
                      targets: list[str] | None = None, timeout: int = 1800) -> tuple[int, list[dict], str]:
  """`snakemake -n` on the run's workflow, working directory and config; returns (rc, jobs, output)."""
  # targets first: --configfile and --config take several values and would swallow them
  cmd = [sys.executable, "-m", "snakemake", *(targets or []), "-s", str(workflow_dir / "Snakefile"), "-d", str(workdir),
         "-n", "--nolock"]
  if configfiles: cmd += ["--configfile", *map(str, configfiles)]
  if overrides: cmd += ["--config", *(f"{k}={v}" for k, v in overrides.items())]
  try:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
  except subprocess.TimeoutExpired:
    return 124, [], f"snakemake -n did not finish in {timeout} s"
  out = p.stdout + p.stderr
  return p.returncode, parse_dry_run(out), out


def current_config(workflow_dir: Path, configfiles: list[str], overrides: dict[str, str]) -> dict:
  """The config Snakemake resolves: the Snakefile's config.yaml, then each --configfile, then --config."""
  import yaml
  from snakemake.utils import update_config
  cfg: dict = {}
  for f in [workflow_dir / "config.yaml", *map(Path, configfiles)]:
    if f.is_file():
      update_config(cfg, yaml.safe_load(f.read_text()) or {})
  for k, v in overrides.items():
    cfg[k] = yaml.safe_load(v) if isinstance(v, str) else v
  return cfg


def diff_config(recorded, now, prefix: str = "") -> list[str]:
  """Keys whose values differ, as 'key.sub: recorded X, now Y'."""
  out = []
  if isinstance(recorded, dict) and isinstance(now, dict):
    for k in sorted(set(recorded) | set(now), key=str):
      key = f"{prefix}.{k}" if prefix else str(k)
      if k not in now: out.append(f"{key}: recorded {recorded[k]!r}, now absent")
      elif k not in recorded: out.append(f"{key}: not recorded, now {now[k]!r}")
      else: out += diff_config(recorded[k], now[k], key)
  elif recorded != now:
    out.append(f"{prefix}: recorded {recorded!r}, now {now!r}")
  return out


class _Hasher:
  """md5+sha256 of each file once per audit (the checksum list and the provenance records share the work)."""
  def __init__(self): self.cache: dict[tuple, dict] = {}

  def __call__(self, path) -> dict:
    from mlperf_bert.provenance import hashes
    st = Path(path).stat()
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in self.cache: self.cache[key] = hashes(path)
    return self.cache[key]


def _sums(path: Path) -> dict[str, str] | str:
  """A sha256sum-format file -> {name: hex}, or an error string."""
  out = {}
  try: text = path.read_text()
  except (OSError, UnicodeDecodeError) as e: return f"unreadable ({e})"
  for n, line in enumerate(text.splitlines(), 1):
    if not line.strip(): continue
    h, sep, name = line.partition("  ")
    if not sep or not re.fullmatch(r"[0-9a-f]{64}", h):
      return f"line {n} is not '<sha256>  <name>'"
    out[name.strip()] = h
  return out


def check_checksums(audit: Audit, base: Path, hasher: _Hasher) -> None:
  """Every shard and the eval set against SHA256SUMS and their `.sha256` sidecars."""
  shards = base / "shards"
  listed: dict[str, str] = {}
  if shards.is_dir():
    sums = shards / "SHA256SUMS"
    if not sums.is_file():
      audit.add("FAIL", "checksums", "shards/SHA256SUMS", "missing: rebuild it (rule shard_checksums)")
    else:
      r = _sums(sums)
      if isinstance(r, str): audit.add("FAIL", "checksums", "shards/SHA256SUMS", r)
      else: listed = r
  files = sorted(shards.glob("*.shard")) if shards.is_dir() else []
  evals = sorted((base / "eval").glob("*.shard")) if (base / "eval").is_dir() else []
  bad = 0
  for name in sorted(set(listed) - {p.name for p in files}):
    audit.add("FAIL", "checksums", f"shards/{name}", "listed in SHA256SUMS but missing"); bad += 1
  for f in files + evals:
    rel = str(f.relative_to(base))
    actual = hasher(f)["sha256"]
    side = f.with_name(f.name + ".sha256")
    problems = []
    if f.parent == shards and shards.is_dir() and (shards / "SHA256SUMS").is_file() and listed is not None:
      if f.name not in listed: problems.append("not listed in SHA256SUMS")
      elif listed[f.name] != actual: problems.append("sha256 differs from SHA256SUMS")
    if not side.is_file():
      problems.append(f"no sidecar {side.name}")
    else:
      r = _sums(side)
      if isinstance(r, str): problems.append(f"sidecar {side.name}: {r}")
      elif r.get(f.name) != actual: problems.append(f"sha256 differs from its sidecar {side.name}")
    if problems:
      audit.add("FAIL", "checksums", rel, "; ".join(problems) + f" (sha256 now {actual[:12]}...)"); bad += 1
  if files or evals:
    if not bad:
      audit.add("PASS", "checksums", "shards, eval", f"{len(files)} shard(s) and {len(evals)} eval set(s) match "
                "SHA256SUMS and their sidecars")
  else:
    audit.add("SKIP", "checksums", "shards, eval", "no shards or eval set in this basedir")


def _provenance_path(log: Path) -> Path:
  return log.with_name(log.name[:-len(".log")] + ".provenance.json")


def check_provenance(audit: Audit, base: Path, log_path: Path, now_cfg: dict | None, repo_head: str | None,
                     hasher: _Hasher) -> None:
  from mlperf_bert.provenance import read_provenance, verify_provenance
  rel = str(log_path.relative_to(base))
  pp = _provenance_path(log_path)
  if not pp.is_file():
    audit.add("FAIL", "provenance", rel, f"no {pp.name}: build it (rule provenance) so the log's inputs are on record")
    return
  try:
    rec = read_provenance(pp)
  except UserError as e:
    audit.add("FAIL", "provenance", str(pp.relative_to(base)), str(e)); return
  m = re.fullmatch(r"result_bert_(.+)\.log", log_path.name)
  if m and str(rec.get("seed")) != m.group(1):
    audit.add("FAIL", "provenance", rel, f"record is for seed {rec.get('seed')}, the log file is seed {m.group(1)}")
  if rec.get("platform") != log_path.parent.name:
    audit.add("FAIL", "provenance", rel, f"record is for platform {rec.get('platform')!r}, the log sits under "
              f"{log_path.parent.name!r}")
  results = verify_provenance(rec, base, hasher=hasher)
  fails = [(p, why) for s, p, why in results if s == "FAIL"]
  for p, why in fails:
    audit.add("FAIL", "provenance", p, why + f" (record {pp.name})")
  if not fails:
    audit.add("PASS", "provenance", rel, f"log and {len(results) - 1} input files match {pp.name} (md5, sha256)")
  if now_cfg is not None:
    recorded = dict(rec.get("config") or {}); now = dict(now_cfg)
    recorded.pop("basedir", None); now.pop("basedir", None)
    diffs = diff_config(recorded, now)
    if diffs:
      audit.add("FAIL", "config", rel, "the config differs from the one on record: " + _shorten(diffs, 4))
    else:
      audit.add("PASS", "config", rel, "the current config equals the recorded one")
  git = rec.get("git") or {}
  if git.get("dirty"):
    audit.add("WARN", "git", rel, f"the run's repository had {git.get('changed_count', '?')} uncommitted change(s) at "
              f"{str(git.get('commit'))[:12]}")
  elif repo_head and git.get("commit") and git["commit"] != repo_head:
    audit.add("WARN", "git", rel, f"recorded at commit {git['commit'][:12]}, the workflow is now at {repo_head[:12]}")


def audit_basedir(path: str | os.PathLike, *, ruleset: str = DEFAULT_RULESET, strict: bool = False,
                  workflow_dir: str | os.PathLike | None = None, workdir: str | os.PathLike | None = None,
                  configfiles: list[str] | None = None, config: list[str] | None = None,
                  dry_run: bool = True, resolved_config: dict | None = None) -> Audit:
  """Audit a finished workflow tree: Snakemake's dry run (what would run, and why), every shard against
  SHA256SUMS and its sidecar, every result log against its provenance record (and the record's config against
  the current one), and the log checks on every result log; a submission package under it is audited too.

  resolved_config: the config as Snakemake resolved it (from inside a workflow job); otherwise it is rebuilt from
  the workflow's config.yaml, `configfiles` and the `config` KEY=VALUE overrides."""
  from mlperf_bert.provenance import git_state
  base = Path(path)
  audit = Audit(str(base), "basedir", ruleset, strict)
  check_ruleset(audit, ruleset)
  wf = Path(workflow_dir) if workflow_dir else REPO
  wd = Path(workdir) if workdir else wf
  configfiles = list(configfiles or [])
  overrides: dict[str, str] = {}
  for item in config or []:
    k, sep, v = item.partition("=")
    if not sep: raise UserError(f"--config {item!r}: expected KEY=VALUE")
    overrides[k] = v
  now_cfg = None
  if resolved_config is not None:
    now_cfg = dict(resolved_config)
  elif (wf / "Snakefile").is_file():
    now_cfg = current_config(wf, configfiles, overrides)
    cb = now_cfg.get("basedir")
    if "basedir" not in overrides and not (cb and (wd / cb).resolve() == base.resolve()):
      overrides["basedir"] = str(base.resolve())
      now_cfg["basedir"] = overrides["basedir"]
  logs = sorted(base.glob("results/*/result_bert_*.log"))
  # 1. what Snakemake would run, and why
  if not dry_run:
    audit.add("SKIP", "dry run", str(wf), "skipped (--no-dry-run)")
  elif not (wf / "Snakefile").is_file():
    audit.add("FAIL", "dry run", str(wf), "no Snakefile there; pass --workflow-dir (the run's workflow directory)")
  else:
    # name the records as the workflow's outputs are named: under the config's basedir, relative or absolute
    cfg_base = overrides.get("basedir") or (now_cfg or {}).get("basedir") or str(base.resolve())
    targets = ["all"] + [str(Path(cfg_base) / _provenance_path(l).relative_to(base)) for l in logs
                         if _provenance_path(l).is_file()] \
      if re.search(r"^rule all\b", (wf / "Snakefile").read_text(), re.M) else []
    rc, jobs, out = snakemake_dry_run(wf, wd, configfiles, overrides, targets)
    if rc != 0 and "MissingRuleException" in out and ".provenance.json" in out:
      audit.add("WARN", "dry run", str(wf), "the workflow has no rule for the provenance records (include "
                "rules/audit.smk); they are checked by hash only")
      rc, jobs, out = snakemake_dry_run(wf, wd, configfiles, overrides, ["all"])
    if rc != 0:
      tail = [l for l in out.strip().splitlines() if l.strip()][-3:]
      audit.add("FAIL", "dry run", str(wf), f"snakemake -n failed ({rc}): " + " | ".join(tail))
    elif not jobs:
      audit.add("PASS", "dry run", str(wf), "snakemake -n: nothing to be done, every artifact is up to date")
    else:
      for j in jobs[:40]:
        subj = j["rule"] + (f" ({j['wildcards']})" if j["wildcards"] else "")
        reason = j["reason"] or "no reason given"
        audit.add("FAIL", "dry run", subj, "would run: " + (reason if len(reason) < 400 else reason[:400] + " ..."))
      if len(jobs) > 40:
        audit.add("FAIL", "dry run", "...", f"{len(jobs) - 40} more jobs would run")
  # 2. checksums; 3. provenance; 4. the logs themselves
  hasher = _Hasher()
  check_checksums(audit, base, hasher)
  head = git_state(wf).get("commit")
  if not logs:
    audit.add("FAIL", "result logs", str(base), "no results/<platform>/result_bert_<seed>.log")
  for log in logs:
    check_provenance(audit, base, log, now_cfg, head, hasher)
  for plat in sorted({l.parent for l in logs}):
    plogs = [read_log(l) for l in logs if l.parent == plat]
    check_logs(audit, plogs, system=plat.name, division=None, ruleset=ruleset,
               subject_prefix=f"{plat.relative_to(base)}/",
               expect_count=None, scoring=False)
    for lg in plogs:
      m = re.fullmatch(r"result_bert_(.+)\.log", lg.path.name)
      if m and lg.seed is not None and str(lg.seed) != m.group(1):
        audit.add("FAIL", "seed", f"{plat.relative_to(base)}/{lg.path.name}", f"the log's seed is {lg.seed}, its file name says {m.group(1)}")
  sub = base / "submission"
  if sub.is_dir():
    for org in sorted(c for c in sub.iterdir() if c.is_dir() and is_org_dir(c)):
      audit_org(audit, org, ruleset)
  return audit


# ----------------------------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------------------------
def run_audit(path: str | os.PathLike, *, ruleset: str = DEFAULT_RULESET, strict: bool = False,
              workflow_dir: str | os.PathLike | None = None, workdir: str | os.PathLike | None = None,
              configfiles: list[str] | None = None, config: list[str] | None = None, dry_run: bool = True) -> Audit:
  """Audit PATH, whichever kind it is."""
  p = Path(path)
  if detect_kind(p) == "basedir":
    return audit_basedir(p, ruleset=ruleset, strict=strict, workflow_dir=workflow_dir, workdir=workdir,
                         configfiles=configfiles, config=config, dry_run=dry_run)
  return audit_submission(p, ruleset, strict)


def add_parser(sub) -> None:
  p = sub.add_parser("audit", help="audit MLPerf BERT results: a submission directory or a finished workflow basedir",
                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("path", help="submission org dir (<org>/ with results/, systems/), a dir of them, or a workflow basedir")
  p.add_argument("--ruleset", default=DEFAULT_RULESET,
                 help=f"MLPerf Training ruleset to check under (default {DEFAULT_RULESET}, the last with BERT)")
  p.add_argument("--strict", action="store_true", help="count WARN rows as FAIL")
  p.add_argument("--json", metavar="FILE", help="also write the rows, runs and scores as JSON to FILE (outside PATH)")
  p.add_argument("--workflow-dir", metavar="DIR", help="basedir audits: the workflow (Snakefile) directory "
                 "(default: this repository)")
  p.add_argument("--workdir", metavar="DIR", help="basedir audits: the directory Snakemake ran in (its .snakemake/ "
                 "metadata; default: the workflow directory)")
  p.add_argument("--configfile", action="append", metavar="FILE", help="basedir audits: config file(s) the run used")
  p.add_argument("--config", action="append", metavar="KEY=VALUE", help="basedir audits: config overrides the run used")
  p.add_argument("--no-dry-run", action="store_true", help="basedir audits: skip Snakemake's dry run")
  p.set_defaults(func=_main)


def _main(args) -> int:
  path = Path(args.path)
  if args.json:
    j = Path(args.json).resolve()
    if path.is_dir() and j.is_relative_to(path.resolve()):
      raise UserError(f"--json {args.json}: inside the audited tree {path}; the audit writes nothing there, pick "
                      "another path")
  audit = run_audit(path, ruleset=normalize_ruleset(args.ruleset), strict=args.strict, workflow_dir=args.workflow_dir,
                    workdir=args.workdir, configfiles=args.configfile, config=args.config, dry_run=not args.no_dry_run)
  print(format_table(audit))
  if args.json:
    from mlperf_bert.fileio import atomic_path
    with atomic_path(args.json) as tmp:
      tmp.write_text(json.dumps(audit.to_dict(), indent=2) + "\n")
  return 1 if audit.failed else 0

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
import contextlib, json, os, re
from dataclasses import asdict, dataclass, field
from pathlib import Path


from mlperf_bert.errors import UserError
from mlperf_bert.constants import EVAL_SAMPLES, RULESET
from mlperf_bert.audit.checkers import (bert_in_ruleset, compliance_check, package_checker, package_checker_errors,
                                        rcp_check, result_summarizer, supported_rulesets, system_desc_check)
from mlperf_bert.audit.logs import MLPerfLog, olympic_score, read_log

# ----------------------------------------------------------------------------------------------------------------
# the audit's rows
# ----------------------------------------------------------------------------------------------------------------
RESULT_COUNT = 10          # logs per system that MLPerf scores BERT from (mlperf_logging.benchmark_meta)
INIT_LIMIT_MIN = {"closed": 30, "open": 240}   # as the compliance checker's common.yaml sets them
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


def shorten(items: list[str], n: int = 3) -> str:
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
                + shorten([str(m) for m in log.malformed]))
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
                  f"MLPerf Training ruleset is {RULESET}); checked under {ruleset}")
      else:
        audit.add("WARN", "ruleset claim", s, f"log claims ruleset {claim}; checked under {ruleset}")
    # mlperf-logging's compliance checker
    assert log.path is not None
    ok, msgs = compliance_check(log.path, ruleset)
    converged = log.converged
    if ok:
      audit.add("PASS", "compliance", s, f"mlperf-logging compliance_checker, training {ruleset}")
    elif not converged and not log.malformed and log.benchmark == "bert" and log.events:
      audit.add("DROP", "compliance", s, f"not converged ({log.nonconvergence_reason()}); checker: {shorten(msgs)}")
    else:
      audit.add("FAIL", "compliance", s, shorten(msgs) or "compliance checker rejected the log")
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
                f"systems/{system}.json passes system_desc_checker" if ok else shorten(reasons))
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
            f"mlperf-logging package_checker training {ruleset}: " + ("no errors" if ok else shorten(errs, 4) or "errors"))


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
              f"{RULESET}: rerun with --ruleset {RULESET}")


def _mlperf_logging_version() -> str:
  from importlib.metadata import PackageNotFoundError, version
  try: return version("mlperf-logging")
  except PackageNotFoundError: return "?"


def audit_submission(path: str | os.PathLike, ruleset: str = RULESET, strict: bool = False) -> Audit:
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



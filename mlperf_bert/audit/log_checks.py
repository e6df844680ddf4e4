"""The checks of MLPerf BERT result logs, each returning its rows.

Every log on its own (parse, benchmark, times, mlperf-logging's compliance checker, init time, seed, ...), then one
system's logs together (count, unique seeds, identical runs, converged runs, mlperf-logging's RCP checker):
`check_logs` runs them all and returns the olympic score; `check_ruleset` is the row of the ruleset they are checked
under. The audits of a submission (org.py) and of a workflow tree (tree.py) call them on their logs.
"""
from __future__ import annotations
import json, re
from pathlib import Path


from mlperf_bert.errors import UserError
from mlperf_bert.constants import EVAL_SAMPLES, INIT_LIMIT_MIN, RULESET
from mlperf_bert.audit.mlperf_tools import bert_in_ruleset, compliance_checks, has_rcps, rcp_check, supported_rulesets
from mlperf_bert.audit.round_rules import rules_in_force
from mlperf_bert.audit.forged import TIME_CHECKS, check_clock, check_copies
from mlperf_bert.audit.rehearsal import check_rehearsal
from mlperf_bert.audit.logs import MLPerfLog, olympic_score
from mlperf_bert.audit.rows import Audit, Rejection, Row, RunVerdict, shorten

RESULT_COUNT = 10          # logs per system that MLPerf scores BERT from (mlperf_logging.benchmark_meta)
# a log's lines that are no :::MLLOG record (the trainer's own output): the published BERT logs of v0.7-v5.0 hold up to
# 3.7 MB of them (NVIDIA v0.7 dgx1: 99.8 % of the log; tests/fixtures/audit-calibration.json); more is a WARN
OTHER_BYTES_WARN = 4 << 20


def _fingerprint(log: MLPerfLog) -> tuple:
  """The log's events except the seed: two runs with equal fingerprints are one run logged twice."""
  return tuple((e.key, json.dumps(e.value, sort_keys=True), e.time_ms) for e in log.events if e.key != "seed")


def _norm_org(name: str) -> str:
  return re.sub(r"[^a-z0-9]", "", name.lower())


# ----------------------------------------------------------------------------------------------------------------
# the checks of one log: each returns its rows (a Rejection is a row that rejects the run)
# ----------------------------------------------------------------------------------------------------------------
def check_encoding(log: MLPerfLog, s: str) -> list[Row]:
  """Bytes that are not UTF-8: no published BERT log (v0.7-v5.0) has one, so any is worth a look; a WARN, as a
  trainer can print any byte and mlperf-logging reads the log as latin-1 either way (no record reads otherwise)."""
  if not log.non_utf8:
    return []
  in_records = sorted(set(log.non_utf8) & ({e.lineno for e in log.events} | {m.lineno for m in log.malformed}))
  return [Row("WARN", "encoding", s, f"{len(log.non_utf8)} line(s) hold bytes that are not UTF-8 (line "
              f"{shorten([str(n) for n in log.non_utf8])}"
              + (f"; {len(in_records)} of them :::MLLOG records, which mllog writes in ASCII" if in_records else "")
              + "); read as latin-1, as mlperf-logging reads them; no published BERT log has such a byte")]


def check_parse(log: MLPerfLog, s: str) -> list[Row]:
  junk = ([Row("WARN", "other lines", s, f"{log.other_bytes:,} bytes in {len(log.other_lines):,} line(s) that are no "
               f":::MLLOG record: more than the {OTHER_BYTES_WARN >> 20} MiB a published BERT log holds (v0.7-v5.0: up "
               "to 3.7 MB); what they say is not checked")] if log.other_bytes > OTHER_BYTES_WARN else [])
  if log.malformed:
    return [Rejection("FAIL", "parse", s, f"{len(log.malformed)} malformed :::MLLOG line(s): "
                      + shorten([str(m) for m in log.malformed])), *junk]
  if not log.events:
    return [Rejection("FAIL", "parse", s, "no :::MLLOG lines: not an MLPerf result log"), *junk]
  other = (f"; {len(log.other_lines):,} other line(s), {log.other_bytes:,} bytes (the trainer's output, which "
           "mlperf-logging skips)" if log.other_bytes else "")
  return [Row("PASS", "parse", s, f"{len(log.events)} :::MLLOG events{other}"), *junk]


def check_benchmark(log: MLPerfLog, s: str) -> list[Row]:
  if log.benchmark == "bert":
    return []
  return [Rejection("FAIL", "benchmark", s, f"submission_benchmark is {str(log.benchmark)[:80]!r}, expected 'bert': "
                    "a log of another benchmark (or none) in a BERT result directory")]


def check_division(log: MLPerfLog, s: str, division: str | None) -> list[Row]:
  if division and log.division and log.division != division:
    return [Row("WARN", "division", s, f"log says {str(log.division)[:40]!r}, systems json says {division!r}")]
  return []


def check_platform(log: MLPerfLog, s: str, expect_platform: str | None) -> list[Row]:
  if expect_platform and log.platform and log.platform != expect_platform:
    return [Row("WARN", "platform", s, f"submission_platform {str(log.platform)[:80]!r} differs from the system "
                f"{expect_platform!r}")]
  return []


def check_org(log: MLPerfLog, s: str, expect_org: str | None) -> list[Row]:
  if expect_org and log.org is not None and _norm_org(str(log.org)) != _norm_org(expect_org):
    return [Row("WARN", "org", s, f"submission_org {str(log.org)[:80]!r} is not the submission directory's "
                f"organization {expect_org!r}")]
  return []


def check_ruleset_claim(log: MLPerfLog, s: str, ruleset: str) -> list[Row]:
  claim = log.claimed_ruleset
  if not claim or claim == ruleset:
    return []
  if not bert_in_ruleset(claim):
    return [Row("FAIL", "ruleset claim", s, f"log claims ruleset {claim[:20]}, which has no BERT benchmark (BERT's "
                f"last MLPerf Training ruleset is {RULESET}); checked under {ruleset}")]
  return [Row("WARN", "ruleset claim", s, f"log claims ruleset {claim}; checked under {ruleset}")]


def check_compliance(log: MLPerfLog, s: str, ruleset: str, verdict: tuple[bool, list[str]] | None = None) -> list[Row]:
  """mlperf-logging's compliance checker on the log under its round's rules (not run on a log over the audit's
  bounds); verdict: compliance_checks' for the log, when check_logs ran it on the system's logs at once."""
  assert log.path is not None
  if log.over_bounds:
    return [Row("FAIL", "compliance", s, "not run: the log breaks the audit's bounds (the parse row)")]
  ok, msgs = verdict or compliance_checks([log.path], ruleset)[str(log.path)]
  if ok:
    return [Row("PASS", "compliance", s, f"mlperf-logging compliance_checker, training {ruleset}"
                + "".join(f"; {m}" for m in msgs))]
  if not log.converged and not log.malformed and log.benchmark == "bert" and log.events:
    return [Row("DROP", "compliance", s, f"not converged ({log.nonconvergence_reason()}); checker: {shorten(msgs)}")]
  return [Rejection("FAIL", "compliance", s, shorten(msgs) or "compliance checker rejected the log")]


def check_run_stop(log: MLPerfLog, s: str) -> list[Row]:
  if log.converged and (log.run_minutes or 0) < 0:
    return []  # a negative run time: check_clock's FAIL
  if log.converged:
    return [Row("PASS", "run_stop", s, f"status success after {log.run_minutes:.2f} min")]
  return [Row("DROP", "run_stop", s, f"not converged: {log.nonconvergence_reason()}")]


def check_init_time(log: MLPerfLog, s: str, division: str | None) -> list[Row]:
  limit = INIT_LIMIT_MIN.get(division or "", 30)
  im = log.init_minutes
  if im is None:
    return [Rejection("FAIL", "init time", s, "no init_start/init_stop pair")]
  if im >= limit:
    return [Rejection("FAIL", "init time", s, f"init took {im:.2f} min; the {division or 'closed'} division "
                      f"allows < {limit}")]
  return [Row("PASS", "init time", s, f"{im:.2f} min < {limit}")]


def check_eval_samples(log: MLPerfLog, s: str, division: str | None) -> list[Row]:
  if division != "closed":
    return []
  es = log.eval_samples
  if es == EVAL_SAMPLES:
    return [Row("PASS", "eval_samples", s, f"{es}")]
  return [Row("WARN", "eval_samples", s, f"eval_samples is {str(es)[:40]!r}; the closed BERT eval set has "
              f"{EVAL_SAMPLES:,} samples (mlperf-logging's checkers do not test this)")]


def check_seed(log: MLPerfLog, s: str, division: str | None) -> list[Row]:
  if log.seed is None:  # a WARN: MLCommons accepted closed systems whose logs have none (v0.7, v1.0)
    return [Row("WARN", "seed", s, "no integer `seed` event; every run logs its seed (mlperf-logging's seed checker "
                "requires one in the closed division from training 1.0.0 on: package_checker's row says)")]
  if len(set(map(str, log.seeds))) > 1:
    return [Row("WARN", "seed", s, f"several seeds logged: {shorten([str(v)[:40] for v in log.seeds])}")]
  return []


def _check_one_log(audit: Audit, log: MLPerfLog, s: str, *, division: str | None, ruleset: str,
                   expect_platform: str | None, expect_org: str | None,
                   compliance: tuple[bool, list[str]] | None = None) -> tuple[bool, list[Row]]:
  """The rows of one log. Returns (counts toward the score, the rows that reject the run: DROP when olympic
  scoring can drop it, FAIL when it cannot; check_logs settles which)."""
  log_div = log.division or division
  rows = audit.extend([*check_encoding(log, s), *check_parse(log, s), *check_benchmark(log, s),
                       *check_division(log, s, division), *check_platform(log, s, expect_platform),
                       *check_org(log, s, expect_org), *check_ruleset_claim(log, s, ruleset),
                       *check_clock(log, s), *check_compliance(log, s, ruleset, compliance), *check_run_stop(log, s),
                       *check_init_time(log, s, log_div),
                       *check_eval_samples(log, s, log_div), *check_seed(log, s, log_div)])
  pending = [r for r in rows if isinstance(r, Rejection)]
  passed = {r.check for r in rows if r.status == "PASS"}
  forged = any(r.check in TIME_CHECKS and r.status == "FAIL" for r in rows)
  return "compliance" in passed and "run_stop" in passed and not pending and not forged, pending


# ----------------------------------------------------------------------------------------------------------------
# the checks across one system's logs
# ----------------------------------------------------------------------------------------------------------------
def check_log_count(logs: list[MLPerfLog], system: str, expect_count: int | None) -> list[Row]:
  if expect_count is None:
    return []
  if len(logs) == expect_count:
    return [Row("PASS", "log count", system, f"{len(logs)} result logs")]
  return [Row("FAIL", "log count", system, f"{len(logs)} result logs; MLPerf scores BERT from exactly {expect_count} "
              f"(one per seed): add or remove runs")]


def check_unique_seeds(logs: list[MLPerfLog], names: dict, system: str, division: str | None) -> list[Row]:
  by_seed: dict[int, list[str]] = {}
  for log in logs:
    if log.seed is not None: by_seed.setdefault(log.seed, []).append(names[id(log)])
  dups = {k: v for k, v in by_seed.items() if len(v) > 1}
  if dups:
    return [Row("FAIL" if division != "open" else "WARN", "unique seeds", system,
                shorten([f"seed {k} in {', '.join(v[:3])}" + (f" and {len(v) - 3} more" if len(v) > 3 else "")
                         for k, v in dups.items()]) + ": every run needs its own seed")]
  return [Row("PASS", "unique seeds", system, f"{len(by_seed)} distinct seeds")] if logs else []


def check_distinct_runs(logs: list[MLPerfLog], names: dict, system: str) -> list[Row]:
  fps: dict[tuple, list[str]] = {}
  for log in logs:
    if log.events: fps.setdefault(_fingerprint(log), []).append(names[id(log)])
  same = [v for v in fps.values() if len(v) > 1]
  if not same:
    return []
  return [Row("WARN", "distinct runs", system, shorten([" and ".join(v) for v in same])
              + " are identical except for the seed (same timestamps, values and accuracies)")]


def check_converged_runs(logs: list[MLPerfLog], dropped: list[str], system: str, scoring: bool) -> list[Row]:
  if not logs:
    return []
  if len(dropped) > 1:
    return [Row("FAIL" if scoring else "WARN", "converged runs", system, f"{len(dropped)} runs did not converge or "
                f"failed compliance ({shorten(dropped, 4)}); olympic scoring drops at most 1")]
  return [Row("PASS", "converged runs", system, f"{len(logs) - len(dropped)} of {len(logs)}"
              + (f"; olympic scoring drops {dropped[0]}" if dropped else ""))]


def check_rcp(logs: list[MLPerfLog], system: str, division: str | None, ruleset: str, bert_dir: Path) -> list[Row]:
  """mlperf-logging's RCP checker on a closed system's ten logs. A failure is a WARN: MLCommons accepted published
  systems that fail it (review can pass one with package_checker's rcp-bypass, RCPs were revised after a round),
  and an honest run converges faster than the reference as easily as a forged one."""
  if any(l.unread or l.over_bounds for l in logs):
    return [Row("SKIP", "rcp", system, "not run: a result log above could not be read safely")]
  if len(logs) != RESULT_COUNT:
    return [Row("SKIP", "rcp", system, f"needs exactly {RESULT_COUNT} logs, found {len(logs)}")]
  if division != "closed":
    return [Row("SKIP", "rcp", system, f"{division or 'unknown'} division: RCPs apply to the closed division")]
  if not has_rcps(ruleset):
    return [Row("SKIP", "rcp", system, f"training {ruleset} has no BERT RCPs (mlperf-logging's rcp_checker starts at "
                "1.0.0)")]
  ok, msg = rcp_check(bert_dir, ruleset)
  if ok:
    return [Row("PASS", "rcp", system, f"rcp_checker training {ruleset}: {msg}")]
  return [Row("WARN", "rcp", system, f"rcp_checker training {ruleset} fails: {msg}; the score is not normalized (MLCommons "
              "accepted published systems that fail it: review may pass one with rcp-bypass)")]


def _check_system(audit: Audit, logs: list[MLPerfLog], names: dict, valid: dict, pending: dict, *, system: str,
                  division: str | None, scoring: bool, received: bool) -> list[str]:
  """The rows across one system's runs (seeds, identical runs, how many are dropped). Returns the dropped logs."""
  audit.extend(check_unique_seeds(logs, names, system, division)
               + (check_copies(logs, names, system, received) or check_distinct_runs(logs, names, system)))
  dropped = [names[id(l)] for l in logs if not valid[id(l)]]
  # olympic scoring drops one run: its rejecting rows are a DROP, as package_checker accepts such a system
  for rows in pending.values():
    for r in rows:
      r.status = "DROP" if scoring and len(dropped) <= 1 else "FAIL"
  audit.extend(check_converged_runs(logs, dropped, system, scoring))
  return dropped


def check_logs(audit: Audit, logs: list[MLPerfLog], *, system: str, division: str | None, ruleset: str,
               subject_prefix: str = "", expect_count: int | None = RESULT_COUNT, expect_platform: str | None = None,
               expect_org: str | None = None, bert_dir: Path | None = None, scoring: bool = True,
               received: bool = True) -> float | None:
  """The per-log and per-system rows for one system's BERT logs. Returns the olympic score (minutes, before
  scaling.json's factor) or None.

  scoring=False (a workflow basedir's logs, e.g. a short CPU demo): runs that did not converge are a WARN, not a
  FAIL, since the tree can be complete and intact without a score. received=False (a workflow tree, whose
  provenance records how each log was made): two logs of one run are a FAIL, not a received submission's WARN."""
  names = {id(l): (subject_prefix + l.path.name if l.path else "?") for l in logs}
  audit.extend(check_log_count(logs, system, expect_count))
  valid: dict[int, bool] = {}
  pending: dict[int, list[Row]] = {}
  verdicts = compliance_checks([l.path for l in logs if l.path is not None and not l.unread and not l.over_bounds],
                               ruleset)
  for log in logs:
    if log.unread:
      audit.add("FAIL", "read", names[id(log)], f"{log.unread}: not read")
      valid[id(log)] = False
      continue
    audit.extend(check_rehearsal(log, names[id(log)], scoring))
    valid[id(log)], pending[id(log)] = _check_one_log(audit, log, names[id(log)], division=division, ruleset=ruleset,
                                                      expect_platform=expect_platform, expect_org=expect_org,
                                                      compliance=verdicts.get(str(log.path)))
  dropped = _check_system(audit, logs, names, valid, pending, system=system, division=division, scoring=scoring,
                          received=received)
  if bert_dir is not None:
    audit.extend(check_rcp(logs, system, division, ruleset, bert_dir))
  minutes = {id(l): (l.run_minutes if valid[id(l)] else None) for l in logs}
  _run_verdicts(audit, logs, names, minutes, pending, system=system, complete=expect_count is None
                or len(logs) == expect_count, scoring=scoring, any_dropped=bool(dropped), expect_count=expect_count)
  if expect_count is not None and len(logs) != expect_count:
    return None
  return olympic_score(list(minutes.values()))


def _run_verdicts(audit: Audit, logs: list[MLPerfLog], names: dict, minutes: dict, pending: dict, *, system: str,
                  complete: bool, scoring: bool, any_dropped: bool, expect_count: int | None) -> None:
  good = sorted((minutes[id(l)], names[id(l)]) for l in logs if minutes[id(l)] is not None)
  fastest = good[0][1] if good else None
  slowest = good[-1][1] if good and not any_dropped else None
  for log in logs:
    n = names[id(log)]
    if minutes[id(log)] is None:
      why = log.nonconvergence_reason() if not log.converged else "failed compliance"
      if pending.get(id(log)): why = "; ".join(f"{r.check}: {r.reason}" for r in pending[id(log)])
      if log.malformed: why = f"malformed log ({len(log.malformed)} bad lines)"
      if log.unread: why = f"not read: {log.unread}"
      v = f"dropped: {why}"
    elif not scoring: v = "converged"
    elif not complete:
      v = f"converged (no olympic score: {len(logs)} of {expect_count} logs)"
    elif n == fastest: v = "dropped: fastest (olympic)"
    elif n == slowest: v = "dropped: slowest (olympic)"
    else: v = "scored"
    audit.runs.append(RunVerdict(system, n, log.seed, log.run_minutes, log.final_eval_accuracy, v[:300]))


def check_ruleset(audit: Audit, ruleset: str) -> None:
  if ruleset not in supported_rulesets():
    raise UserError(f"--ruleset {ruleset}: mlperf-logging {_mlperf_logging_version()} has no training {ruleset}; "
                    f"use one of {', '.join(supported_rulesets())}")
  if bert_in_ruleset(ruleset):
    audit.add("PASS", "ruleset", audit.path, f"training {ruleset} (mlperf-logging {_mlperf_logging_version()}): "
              + rules_in_force(ruleset))
  else:
    audit.add("FAIL", "ruleset", audit.path, f"BERT is not a benchmark of MLPerf Training {ruleset}; its last ruleset is "
              f"{RULESET}: rerun with --ruleset {RULESET}")


def _mlperf_logging_version() -> str:
  from importlib.metadata import PackageNotFoundError, version
  try: return version("mlperf-logging")
  except PackageNotFoundError: return "?"

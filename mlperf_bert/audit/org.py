"""The audit of a submission org directory `<org>/{results,systems}` as MLCommons scores it: the log checks of
log_checks.py on every `results/<system>/bert/result_*.txt` (the names package_checker and result_summarizer glob),
the olympic mean times `bert/scaling.json`'s `scaling_factor`, and the official tools' verdicts.

The tree is untrusted input (see untrusted.py): a path that must not be read is a FAIL naming it, a system with
more than MAX_LOGS_CHECKED logs is not read log by log, and the official tools are not run on a submission that
is already invalid for those reasons.
"""
from __future__ import annotations
import fnmatch, math, os, re
from pathlib import Path

from mlperf_bert.errors import UserError
from mlperf_bert.constants import RULESET
from mlperf_bert.audit.mlperf_tools import (bert_in_ruleset, package_checker, package_checker_errors_by_system,
                                            result_summarizer, status_only, system_desc_check)
from mlperf_bert.audit.log_checks import RESULT_COUNT, check_logs, check_ruleset
from mlperf_bert.audit.round_rules import WAIVED
from mlperf_bert.audit.path_kind import detect_kind, is_org_dir
from mlperf_bert.audit.forged import TIME_CHECKS, check_scaling
from mlperf_bert.audit.rows import Audit, shorten
from mlperf_bert.audit.step_band import check_step_band
from mlperf_bert.audit.logs import MLPerfLog, read_log
from mlperf_bert.audit.untrusted import MAX_JSON_BYTES, MAX_LOG_BYTES, MAX_LOGS_CHECKED, problem, read_untrusted_json

LOG_GLOB = "result_*.txt"          # as package_checker and result_summarizer find a benchmark's logs
KNOWN_FILES = ("package_checker_params", "scaling.json")
# package_checker's errors that published, accepted BERT systems have (tests/fixtures/audit-calibration.json): the
# RCP checker's (RCPs revised after a round; review's rcp-bypass), the seed checker's (logs without a seed, v1.0 -
# v3.1), a system description's status value (v4.0; the system description row says whether it is the only fault)
PACKAGE_WARN_ERRORS = (r"RCP Test Failed|Seed checker failed|System description file checker failed|"
                       r'System description checker failed for .* : \["Field status contains a non valid value: [^"]*"\]$')


def log_index(name: str) -> tuple:
  """Sort key of a result log name: by the number after its last '_' (result_0.txt, result_<stamp>_01.txt)."""
  m = re.search(r"_(\d+)\.txt$", name)
  return (0, int(m.group(1)), name) if m else (1, 0, name)


def scaling_factor(bert: Path, root: Path) -> tuple[float, str | None]:
  """bert/scaling.json's scaling_factor (1.0 without the file), as result_summarizer applies it; and why it is
  unusable, if it is."""
  f = bert / "scaling.json"
  if not os.path.lexists(f):
    return 1.0, None
  v, why = read_untrusted_json(f, root)
  if why: return 1.0, why
  x = v.get("scaling_factor") if isinstance(v, dict) else None
  if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
    return 1.0, f"has no positive number 'scaling_factor' (found {str(x)[:40]!r})"
  return float(x), None


def _system_description(audit: Audit, org_dir: Path, system: str, ruleset: str) -> str | None:
  """The systems/<system>.json rows; returns its division."""
  desc = org_dir / "systems" / f"{system}.json"
  if not os.path.lexists(desc):
    audit.add("FAIL", "system description", system, f"missing systems/{system}.json: every results/{system}/ needs "
              "one (the fields mlperf-logging's system_desc_checker requires)")
    return None
  value, why = read_untrusted_json(desc, org_dir)
  if why:
    audit.add("FAIL", "system description", system, f"systems/{system}.json {why}")
    return None
  ok, reasons = system_desc_check(desc, ruleset)
  if ok:
    audit.add("PASS", "system description", system, f"systems/{system}.json passes system_desc_checker")
  elif isinstance(value, dict) and status_only(value, ruleset):
    audit.add("WARN", "system description", system, f"systems/{system}.json: status {str(value.get('status'))[:40]!r} "
              "is not one of the values system_desc_checker wants from training 4.0.0 on; every other field passes "
              "(MLCommons accepted v4.0 systems with 'available', 'onprem', 'cloud')")
  else:
    audit.add("FAIL", "system description", system, shorten(reasons))
  if not isinstance(value, dict): return None
  sub = value.get("submitter")
  if sub and sub != org_dir.name:
    audit.add("WARN", "submitter", system, f"systems/{system}.json names submitter {str(sub)[:80]!r}, the directory "
              f"is {org_dir.name!r}")
  div = value.get("division")
  return div if isinstance(div, str) else None


def _bert_logs(audit: Audit, org_dir: Path, system: str, bert: Path) -> tuple[list[Path], bool]:
  """The result logs of results/<system>/bert, every entry there examined without being opened. Returns (the
  logs, whether an entry must not be read: each such entry is a FAIL naming it)."""
  unsafe, other, logs, bad_log = [], [], [], False
  with os.scandir(bert) as it:
    for e in it:
      path = Path(e.path)
      if fnmatch.fnmatchcase(e.name, LOG_GLOB):  # named as a log: read later, its problem is its "read" row
        logs.append(path)
        bad_log |= problem(path, org_dir, max_bytes=MAX_LOG_BYTES) is not None
        continue
      known = e.name in KNOWN_FILES
      why = problem(path, org_dir, max_bytes=MAX_JSON_BYTES if known else None,
                    want="dir" if not known and e.is_dir(follow_symlinks=False) else "file")
      if why: unsafe.append(f"results/{system}/bert/{e.name} {why}")
      elif not known: other.append(e.name)
  for u in unsafe[:5]:
    audit.add("FAIL", "unsafe file", system, u)
  if len(unsafe) > 5:
    audit.add("FAIL", "unsafe file", system, f"... and {len(unsafe) - 5} more such entries in results/{system}/bert")
  if other:
    audit.add("WARN", "file names", system, f"{len(other)} file(s) not named {LOG_GLOB}, ignored by MLPerf's tools: "
              + shorten(sorted(other)))
  return sorted(logs, key=lambda p: log_index(p.name)), bool(unsafe) or bad_log


def _read_logs(paths: list[Path], org_dir: Path) -> list[MLPerfLog]:
  out = []
  for p in paths:
    why = problem(p, org_dir, max_bytes=MAX_LOG_BYTES)
    out.append(MLPerfLog(p, unread=why) if why else read_log(p))
  return out


def _audit_system(audit: Audit, org_dir: Path, sysdir: Path, ruleset: str) -> tuple[float | None, float, bool] | None:
  """The rows of one results/<system>/. Returns (olympic score before scaling, scaling factor, stopped early:
  the submission is invalid already), or None when it has no bert logs."""
  system = sysdir.name
  division = _system_description(audit, org_dir, system, ruleset)
  others = sorted(p.name for p in sysdir.iterdir() if p.name != "bert")
  if others:
    audit.add("SKIP", "benchmark dir", system, f"only bert is audited ({shorten(others)})")
  bert = sysdir / "bert"
  why = problem(bert, org_dir, want="dir")
  if why:
    audit.add("FAIL", "layout", system, f"results/{system}/bert {why}" if os.path.lexists(bert)
              else f"no results/{system}/bert directory")
    return None
  paths, unsafe = _bert_logs(audit, org_dir, system, bert)
  if not paths:
    audit.add("FAIL", "log count", system, f"no {LOG_GLOB} in results/{system}/bert")
    return None
  if len(paths) > MAX_LOGS_CHECKED:
    audit.add("FAIL", "log count", system, f"{len(paths):,} result logs; MLPerf scores BERT from exactly "
              f"{RESULT_COUNT}: the logs were not read (the audit reads at most {MAX_LOGS_CHECKED} per system)")
    return None, 1.0, True
  factor, why = scaling_factor(bert, org_dir)
  if why:
    audit.add("FAIL", "scaling", system, f"results/{system}/bert/scaling.json {why}")
  logs = _read_logs(paths, org_dir)
  before = len(audit.rows)
  score = check_logs(audit, logs, system=system, division=division, ruleset=ruleset, subject_prefix=f"{system}/",
                     expect_platform=system, expect_org=org_dir.name, bert_dir=bert)
  # a forged clock: the official tools would score the edited numbers (a NaN run_stop is no score mismatch)
  forged = any(r.status == "FAIL" and r.check in TIME_CHECKS for r in audit.rows[before:])
  check_step_band(audit, org_dir, system, logs)   # cards the cost model knows: the steps against its band
  if why is None:  # the factor the rcp_checker writes, never the file's word for it
    rows, factor = check_scaling(logs, bert, system, division=division, ruleset=ruleset,
                                 shipped=factor if os.path.lexists(bert / "scaling.json") else None)
    audit.extend(rows)
  return score, factor, unsafe or why is not None or forged or any(l.unread or l.over_bounds for l in logs)


def _compare_scores(audit: Audit, org: str, mine: dict, summ: dict) -> None:
  for system, (score, factor) in mine.items():
    theirs = summ["scores"].get(system)
    scaled = None if score is None else score * factor
    audit.scores[f"{org}/{system}"] = {"score": scaled, "olympic_mean": score, "scaling_factor": factor,
                                       "result_summarizer": theirs}
    how = "olympic mean of 8 of 10" + (f" x scaling factor {factor:.6g}" if factor != 1.0 else "")
    if scaled is None:
      audit.add("FAIL", "score", system, "no olympic score: needs 10 logs with at most 1 not converged"
                + (f" (result_summarizer: {theirs:.2f})" if theirs is not None else ""))
    elif theirs is None:
      tail = [l.strip() for l in summ.get("output", "").splitlines() if l.strip()][-1:] or [""]
      why = (f"it stopped with exit status {summ['returncode']}: {tail[0][:200]}" if summ.get("returncode")
             else "its checker code refuses what the round's release let pass: see the compliance rows"
             if _waived_only(audit, system) else "it skips systems without a valid systems json")
      audit.add("WARN", "score", system, f"{scaled:.2f} min; result_summarizer gave no score for {system} ({why})")
    elif not math.isclose(scaled, theirs, rel_tol=1e-9, abs_tol=1e-9):
      audit.add("FAIL", "score", system, f"{scaled:.4f} min ({how}) differs from result_summarizer's {theirs:.4f}")
    else:
      audit.add("PASS", "score", system, f"{scaled:.2f} min ({how}); result_summarizer {theirs:.2f}")


def audit_org(audit: Audit, org_dir: Path, ruleset: str) -> None:
  """All rows for one submission org directory `<org>/{results,systems}`."""
  org = org_dir.name
  results = org_dir / "results"
  why = problem(results, org_dir, want="dir")
  systems = [] if why else sorted(p for p in results.iterdir() if not p.is_file() or p.is_symlink())
  if not systems:
    audit.add("FAIL", "layout", org, f"no system directories under {results}; expected results/<system>/bert/"
              f"{LOG_GLOB}" + (f" (results {why})" if why and os.path.lexists(results) else ""))
    return
  mine: dict[str, tuple[float | None, float]] = {}
  stopped = False
  for sysdir in systems:
    why = problem(sysdir, org_dir, want="dir")
    if why:
      audit.add("FAIL", "unsafe file", sysdir.name, f"results/{sysdir.name} {why}"); stopped = True
      continue
    r = _audit_system(audit, org_dir, sysdir, ruleset)
    if r is None: continue
    score, factor, stop = r
    stopped |= stop
    if not stop: mine[sysdir.name] = (score, factor)
  if not bert_in_ruleset(ruleset):
    return
  if stopped:  # the copy the official tools would read is not the submission: they would judge another tree
    audit.add("SKIP", "package_checker", org, "not run: the submission is invalid already (the FAIL rows above)")
    return
  _compare_scores(audit, org, mine, result_summarizer(org_dir, ruleset))
  ok, out = package_checker(org_dir, ruleset)
  check_package(audit, org, ruleset, ok, package_checker_errors_by_system(out))


NOT_COMPLY = r"^\d+ files? do(es)? not comply, directory cannot be accepted$"   # package_checker's line for them


def _waived_only(audit: Audit, system: str) -> bool:
  """Whether the compliance rows of the system's logs pass (or drop one run, as olympic scoring may), one or more only
  by a round's CODE_WAIVERS."""
  rows = [r for r in audit.rows if r.check == "compliance" and r.subject.startswith(system + "/")]
  return bool(rows) and all(r.status in ("PASS", "DROP") for r in rows) and any(WAIVED in r.reason for r in rows)


def check_package(audit: Audit, org: str, ruleset: str, ok: bool, errors: dict[str, list[str]]) -> None:
  """package_checker's rows: one PASS for the org, or one row per system it found errors in (the org's own for the
  system descriptions). An error of the kinds MLCommons accepted in published systems (PACKAGE_WARN_ERRORS: the
  RCP and seed checkers, whose rows above say why) is a WARN; any other is a FAIL."""
  head = f"mlperf-logging package_checker training {ruleset}: "
  if ok and not errors:
    audit.add("PASS", "package_checker", org, head + "no errors")
  for system, errs in errors.items():
    waived = system and _waived_only(audit, system)   # today's checker code refuses what the round's let pass
    warn = all(re.match(PACKAGE_WARN_ERRORS, e) or (waived and re.search(NOT_COMPLY, e)) for e in errs)
    audit.add("WARN" if warn else "FAIL", "package_checker", system or org, head + shorten(errs, 4)
              + ("; MLCommons accepted published systems with these errors (see the rcp and seed rows)" if warn else "")
              + ("; its logs comply with the round's release rules as its checker read them (the compliance rows: "
                 "waived as the round's release did)" if waived else ""))
  if not ok and not errors:
    audit.add("FAIL", "package_checker", org, head + "errors (no ERROR line: it stopped or did not finish)")


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

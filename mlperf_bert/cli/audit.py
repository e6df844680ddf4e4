"""The audit wing's subcommands (audit, submission, compare) and the audit's internal workers
(reexecute-eval, reexecute-segment)."""
from __future__ import annotations
import argparse, json, signal, sys
from pathlib import Path

from mlperf_bert.constants import RULESET
from mlperf_bert.errors import UserError


# ---------------------------------------------------------------------------------------------------- audit

class _Stopped(KeyboardInterrupt):
  """SIGTERM, raised in the main thread as SIGINT raises KeyboardInterrupt."""


def _raise_stopped(signum, _frame):
  raise _Stopped(signal.Signals(signum).name)


def _cmd_audit(a) -> int:
  """The audit; SIGTERM and SIGINT stop it as an exception in its main thread, so that each worker it started is
  stopped with its process group and its temporary folders are removed on the way out (audit/bounded.py
  run_json_lines), and it says so in one line (exit 128 + the signal's number)."""
  signal.signal(signal.SIGTERM, _raise_stopped)
  try:
    return _audit(a)
  except KeyboardInterrupt as e:
    name = str(e) if isinstance(e, _Stopped) else "SIGINT"
    print(f"error: the audit was stopped ({name}): its workers were stopped with it and nothing was written; run it "
          "again to audit", file=sys.stderr)
    return 128 + signal.Signals[name].value


def _audit(a) -> int:
  from mlperf_bert.audit.rows import format_audit_table
  from mlperf_bert.audit.logs import normalize_ruleset
  from mlperf_bert.audit.command import run_audit
  from mlperf_bert.fileio import atomic_path
  path = Path(a.path)
  if a.json:
    j = Path(a.json).resolve()
    if path.is_dir() and j.is_relative_to(path.resolve()):
      raise UserError(f"--json {a.json}: inside the audited tree {path}; the audit writes nothing there, pick "
                      "another path")
  audit = run_audit(path, ruleset=normalize_ruleset(a.ruleset), strict=a.strict, workflow_dir=a.workflow_dir,
                    workdir=a.workdir, configfiles=a.configfile, config=a.config, dry_run=not a.no_dry_run,
                    reexecute=a.reexecute, reexecute_seed=a.reexecute_seed, reexecute_budget=a.reexecute_budget,
                    reexecute_parts=tuple(a.reexecute_parts) if a.reexecute_parts else None)
  print(format_audit_table(audit))
  if a.json:
    with atomic_path(a.json) as tmp:
      tmp.write_text(json.dumps(audit.to_dict(), indent=2) + "\n")
  return 1 if audit.failed else 0


def _cmd_submission(a) -> int:
  from mlperf_bert.audit.submission import build_package, read_system_json
  rec = build_package(a.out, logs=a.logs, system=a.system, org=a.org, ruleset=a.ruleset,
                      command=a.command, system_overrides=read_system_json(a.system_json))
  pc = rec["package_checker"]
  print(f"package: {rec['package']}")
  print(f"package_checker (training {rec['ruleset']}): {'PASS' if pc['passed'] else 'FAIL'}")
  for e in pc["errors"]: print(f"  {e}")
  s = rec["score_rounded"]
  print(f"score ({rec['system']}): {s:.2f} min" if s is not None else f"score ({rec['system']}): none "
        f"({rec['result_count']} logs; BERT needs {rec['required_count']} with at most 1 not converged)")
  return 1 if a.require_pass and not pc["passed"] else 0


def _budget(text: str):
  """--reexecute-budget's value (audit/bounded.py Budget): argparse's one-line error for a bad one."""
  from mlperf_bert.audit.bounded import Budget
  try: return Budget.parse(text)
  except UserError as e: raise argparse.ArgumentTypeError(str(e)) from None


def _add_audit(sub) -> None:
  from mlperf_bert.audit import command, submission
  p = sub.add_parser("audit", help="audit MLPerf BERT results: a submission directory or a finished workflow basedir",
                     description=command.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("path", help="submission org dir (<org>/ with results/, systems/), a dir of them, or a workflow basedir")
  p.add_argument("--ruleset", default=RULESET,
                 help=f"MLPerf Training ruleset to check under (default {RULESET}, the last with BERT)")
  p.add_argument("--strict", action="store_true", help="count WARN rows as FAIL")
  p.add_argument("--json", metavar="FILE", help="also write the rows, runs and scores as JSON to FILE (outside PATH)")
  p.add_argument("--workflow-dir", metavar="DIR", help="basedir audits: the workflow (Snakefile) directory "
                 "(default: this repository)")
  p.add_argument("--workdir", metavar="DIR", help="basedir audits: the directory Snakemake ran in (its .snakemake/ "
                 "metadata; default: the workflow directory)")
  p.add_argument("--configfile", action="append", metavar="FILE", help="basedir audits: config file(s) the run used")
  p.add_argument("--config", action="extend", nargs="+", metavar="KEY=VALUE",
                 help="basedir audits: config overrides the run used (as snakemake --config: several after one flag)")
  p.add_argument("--no-dry-run", action="store_true", help="basedir audits: skip Snakemake's dry run")
  p.add_argument("--reexecute", action=argparse.BooleanOptionalAction, default=True,
                 help="basedir audits: rebuild a random sample of shards, evaluate a random sample of the last "
                 "eval's batches on the final weights and train a random sample of segments between the kept states "
                 "again (default: on)")
  p.add_argument("--reexecute-seed", type=int, metavar="N", help="the sample's seed (default: drawn from os.urandom "
                 "and printed; pass it to repeat a draw)")
  p.add_argument("--reexecute-budget", type=_budget, metavar="SECONDS|P%", help="the re-execution's budget: seconds "
                 "(default 300), a hard bound (every process is stopped at the end of its share; the rows say what "
                 "was not redone), or a coverage P%% of the shards, of each log's eval batches and of its training "
                 "segments, however long it takes (the rows say the chance a changed one was missed)")
  p.add_argument("--reexecute-parts", nargs="+", choices=("shards", "evals", "segments"), metavar="PART",
                 help="basedir audits: redo only these of shards, evals (the last eval's batches), segments (training "
                 "between the kept states, and the time check that needs it); default: all three")
  p.set_defaults(func=_cmd_audit)

  p = sub.add_parser("submission", help="assemble and check an MLPerf submission package from result logs",
                     description=submission.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("logs", nargs="+", help="the seeds' result logs (result_bert_<seed>.log)")
  p.add_argument("--out", required=True, help="folder that receives <org>/ and the score file")
  p.add_argument("--org", help="submitter (default: the logs' submission_org)")
  p.add_argument("--system", help="system name (default: the logs' submission_platform)")
  p.add_argument("--system-json", help="a JSON file of system description fields that override the detected ones")
  p.add_argument("--ruleset", default=RULESET, help=f"MLPerf Training ruleset (default {RULESET})")
  p.add_argument("--command", default="", help="the command that produced the logs (goes into the README)")
  p.add_argument("--require-pass", action="store_true", help="exit 1 unless the package checker passes")
  p.set_defaults(func=_cmd_submission)

  from mlperf_bert.audit import compare
  p = sub.add_parser("compare", help="two result logs side by side: evals, the step reaching the target, init and run "
                     "time, where they first differ", description=compare.__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("log_a")
  p.add_argument("log_b")
  p.add_argument("--target", type=float, default=compare.BERT_TARGET_ACCURACY,
                 help=f"masked-LM accuracy target (default {compare.BERT_TARGET_ACCURACY})")
  p.add_argument("--tol", type=float, default=0.0, help="eval accuracies further apart than this differ (default 0)")
  p.set_defaults(func=_cmd_compare)


def _cmd_compare(a) -> int:
  from mlperf_bert.audit.compare import compare
  lines, _ = compare(a.log_a, a.log_b, target=a.target, tol=a.tol)
  print("\n".join(lines))
  return 0


# ---------------------------------------------------------------------------------------------------- the audit's workers

def _cmd_reexecute(a) -> int:
  # the worker exports the run's tinygrad settings (search off) before it imports tinygrad: nothing above imports it
  from mlperf_bert.train import evidence, segment
  work = evidence.eval_worker if a.command == "reexecute-eval" else segment.segment_worker
  emit = lambda obj: print(json.dumps(obj), flush=True)
  try: return work(json.loads(Path(a.request).read_text()), emit)
  except (UserError, KeyError, TypeError, ValueError) as e:
    emit({"error": str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"})
    return 1


def _add_workers(sub) -> None:
  from mlperf_bert.train import evidence, segment
  for name, mod, what in (("reexecute-eval", evidence, "evaluate batches of a run's last eval on its final weights"),
                          ("reexecute-segment", segment, "train a run's segment between two kept states again")):
    p = sub.add_parser(name, help=f"the audit's internal worker: {what} (JSON lines on standard output)",
                       description=mod.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("request", help="REQUEST.json, as the audit writes it (audit/reexec.py run_worker)")
    p.set_defaults(func=_cmd_reexecute)

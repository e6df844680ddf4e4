"""`python -m mlperf_bert SUBCOMMAND ...`: the command line; the workflow's rules call the same functions.

Every subcommand is defined here, grouped by wing (data, train, audit), then the audit's internal workers
(`reexecute-eval`, `reexecute-segment`: the processes a basedir audit starts to redo part of a run). Each handler
parses nothing itself: it calls one function of the package and turns its result into output and an exit code (0
success, 1 a check failed, 2 a usage or input error, printed as one line; a worker's failure is its {"error"} line
and exit 1). Wing modules are imported inside the handlers, so `python -m mlperf_bert shard` does not load tinygrad,
and `train` does not load tokenizers.
"""
from __future__ import annotations
import argparse, json, os, sys
from pathlib import Path
from typing import Any

from mlperf_bert.constants import EVAL_SAMPLES, RULESET
from mlperf_bert.errors import UserError


def _log(msg: str) -> None:
  print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------- data

def _cmd_download(a) -> int:
  from mlperf_bert.data.download import fetch
  from mlperf_bert.data.http import FetchPolicy
  policy = FetchPolicy.bounded(deadline_s=a.deadline, stall_s=a.stall, max_file_bytes=a.max_bytes)
  fetch(a.source, a.output, md5=a.md5, path=a.path, attempts=a.attempts, policy=policy)
  return 0


def _cmd_extract(a) -> int:
  from mlperf_bert.data.extract import extract_results
  extract_results(a.tarball, a.manifest, a.output)
  return 0


def _cmd_verify(a) -> int:
  from mlperf_bert.data.verify import verify_file
  for f in a.files:
    verify_file(f, a.manifest)
  return 0


def _cmd_verify_eval(a) -> int:
  from mlperf_bert.data.verify import verify_eval_articles
  verify_eval_articles(a.eval_txt, a.eval_md5)
  return 0


def _instance_settings(a) -> dict:
  return dict(max_seq_length=a.max_seq_length, max_predictions_per_seq=a.max_predictions_per_seq,
              masked_lm_prob=a.masked_lm_prob, short_seq_prob=a.short_seq_prob, random_seed=a.random_seed,
              dupe_factor=a.dupe_factor, engine=a.engine, progress=not a.no_progress, log=_log)


def _cmd_shard(a) -> int:
  from mlperf_bert.data.instances import build_shard
  build_shard(a.input, a.vocab, a.output, **_instance_settings(a))
  return 0


def _cmd_evalset(a) -> int:
  from mlperf_bert.data.evalset import build_evalset
  build_evalset(a.input, a.vocab, a.output, num_examples=a.num_examples, **_instance_settings(a))
  return 0


def _cmd_features(a) -> int:
  from mlperf_bert.data.shards import write_features_npz
  n = write_features_npz(a.shard, a.npz)
  _log(f"{a.npz}: {n} instances")
  return 0


def _positive(kind):
  """An argparse type: a number of `kind` above 0."""
  def parse(text: str):
    try: v = kind(text)
    except ValueError: raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
    if not v > 0: raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return v
  parse.__name__ = kind.__name__
  return parse


def _add_config(sub) -> None:
  p = sub.add_parser("check-config", help="check config files before `snakemake --configfile` reads them (YAML "
                     "aliases, syntax, keys and types)")
  p.add_argument("files", nargs="*", help="the config files, in the order --configfile would get them")
  p.add_argument("--base", default=str(Path(__file__).resolve().parents[1] / "config.yaml"),
                 help="the config they are merged over (default: the checkout's config.yaml)")
  p.add_argument("--snakemake-args", nargs=argparse.REMAINDER, metavar="ARG",
                 help="instead of files: the arguments of a `snakemake` command (all that follows): the config files "
                      "it would load (--configfile, its profiles') are checked for YAML aliases and URL credentials "
                      "only, silently when they have none (scripts/demo.sh runs this before Snakemake)")
  p.set_defaults(func=_cmd_check_config)


def _cmd_check_config(a) -> int:
  from mlperf_bert.config import check_config_files, precheck_config_files, snakemake_configfiles
  if a.snakemake_args is not None:
    precheck_config_files(*(snakemake_configfiles(a.snakemake_args) or []))
    return 0
  if not a.files:
    raise UserError("check-config: name the config files to check, or give --snakemake-args ARGS...")
  cfg = check_config_files(a.files, a.base)
  print(f"{', '.join(a.files)}: valid over {a.base} (basedir {cfg['basedir']}, platform {cfg.get('platform', 'cpu')}, "
        f"{len(cfg.get('seeds', [0]))} seed(s))")
  return 0


def _add_data(sub) -> None:
  p = sub.add_parser("download", help="fetch one artifact (mlcommons-r2:, gdrive:<id>, URL or path) and check its md5")
  p.add_argument("--source", required=True,
                 help="mlcommons-r2:<.uri URL or mirror directory>, gdrive:<id>, http(s)://..., or a local path")
  p.add_argument("--output", required=True)
  p.add_argument("--md5", default=None, help="published md5 to check (optional)")
  p.add_argument("--path", default=None, help="for an R2 dataset: the file's path in its md5 list (default: the output's name)")
  from mlperf_bert.data.http import FetchPolicy
  p.add_argument("--deadline", type=_positive(float), default=FetchPolicy.deadline_s,
                 help="seconds the whole download may take, retries included (default: %(default)g)")
  p.add_argument("--stall", type=_positive(float), default=FetchPolicy.stall_s,
                 help="seconds without a byte before a retry (default: %(default)g)")
  p.add_argument("--max-bytes", type=_positive(int), default=FetchPolicy.max_file_bytes,
                 help="most bytes of a file whose size the server does not announce (default: %(default)d)")
  p.add_argument("--attempts", type=_positive(int), default=5, help="tries on network errors (default: 5)")
  p.set_defaults(func=_cmd_download)

  p = sub.add_parser("extract", help="safely extract results_text.tar.gz into a results4/ folder")
  p.add_argument("--tarball", required=True)
  p.add_argument("--manifest", required=True, help="bert_reference_results_text_md5.txt")
  p.add_argument("--output", required=True, help="the results4/ folder to create")
  p.set_defaults(func=_cmd_extract)

  p = sub.add_parser("verify", help="check extracted files against the md5 manifest")
  p.add_argument("files", nargs="+")
  p.add_argument("--manifest", required=True)
  p.set_defaults(func=_cmd_verify)

  p = sub.add_parser("verify-eval", help="check eval.txt article by article against eval.md5")
  p.add_argument("eval_txt")
  p.add_argument("--eval-md5", required=True)
  p.set_defaults(func=_cmd_verify_eval)

  def settings(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("create_pretraining_data.py settings (defaults: MLPerf's)")
    g.add_argument("--max-seq-length", type=int, default=512)
    g.add_argument("--max-predictions-per-seq", type=int, default=76)
    g.add_argument("--masked-lm-prob", type=float, default=0.15)
    g.add_argument("--short-seq-prob", type=float, default=0.1)
    g.add_argument("--random-seed", type=int, default=12345)
    g.add_argument("--dupe-factor", type=int, default=10)
    p.add_argument("--engine", choices=["auto", "numba", "python"], default="auto",
                   help="instance engine (same output; 'auto' = python for small files, else numba when installed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

  p = sub.add_parser("shard", help="tokenize one topic text file and write its pretraining shard",
                     description="Reference-identical masked-LM/next-sentence instances of one text file, as a shard "
                                 "(+ .sha256 sidecar).")
  p.add_argument("--input", required=True, type=Path, help="topic text (one sentence per line, blank line between documents)")
  p.add_argument("--vocab", required=True, type=Path, help="WordPiece vocab.txt")
  p.add_argument("--output", required=True, type=Path, help="shard to write")
  settings(p)
  p.set_defaults(func=_cmd_shard)

  p = sub.add_parser("evalset", help="make the eval set from eval.txt (instances, then rows picked as MLPerf does)")
  p.add_argument("--input", required=True, type=Path, help="eval.txt")
  p.add_argument("--vocab", required=True, type=Path, help="WordPiece vocab.txt")
  p.add_argument("--output", required=True, type=Path, help="eval set shard to write")
  p.add_argument("--num-examples", type=int, default=EVAL_SAMPLES, help=f"rows to pick (default {EVAL_SAMPLES})")
  settings(p)
  p.set_defaults(func=_cmd_evalset)

  p = sub.add_parser("features", help="dump a shard's seven features to an .npz (instance order)")
  p.add_argument("shard", type=Path, help="a shard or eval set")
  p.add_argument("--npz", required=True, type=Path, help=".npz to write")
  p.set_defaults(func=_cmd_features)


# ---------------------------------------------------------------------------------------------------- train

def _cmd_convert(a) -> int:
  from mlperf_bert.train.init_weights import convert_tf_checkpoint
  stats = convert_tf_checkpoint(a.checkpoint, a.bert_config, a.output, log=_log)
  print(json.dumps(stats, indent=1))
  return 0


def _parse_set(items: list[str] | None) -> dict[str, Any]:
  from mlperf_bert.config import safe_yaml
  out = {}
  for it in items or []:
    if "=" not in it: raise UserError(f"--set {it!r}: expected KEY=VALUE")
    k, v = it.split("=", 1)
    out[k.strip()] = safe_yaml(v, f"--set {k.strip()}")
  return out


def _cmd_train(a) -> int:
  if a.benchmark and a.phase != "all":
    raise UserError(f"--benchmark with --phase {a.phase}: a benchmark has no INIT or RUN phase; drop one of them")
  # the platform's tinygrad settings (DEV, BEAM, DEFAULT_FLOAT, ...) go into the environment before tinygrad is
  # imported, which reads them at import; nothing above this line imports it
  from mlperf_bert.train.environment import export_tinygrad_env
  from mlperf_bert.train.phases import command_settings
  settings = command_settings(a.platform_file, _parse_set(a.set) if a.set is not None else None, a.seed, a.eval,
                              settings_file=a.settings)
  if "tinygrad" in sys.modules:  # called in a process that already imported it (main() from Python code)
    _log("note: tinygrad was imported before this command; the platform's tinygrad settings cannot be applied "
         "(run python -m mlperf_bert train)")
  else:
    for note in export_tinygrad_env(settings, os.environ): _log(note)
  from mlperf_bert.data.loader import list_shards
  from mlperf_bert.train.inputs import RunInputs
  from mlperf_bert.train.run import TrainRun
  inputs = RunInputs.of(shards=list_shards(a.shards), eval_set=a.eval, bert_config=a.bert_config, log=a.out,
                        work_log=a.work_log, ckpt_dir=a.ckpt_dir, max_seq_length=a.max_seq_length,
                        max_predictions_per_seq=a.max_predictions_per_seq, init_weights=a.init_weights)
  # which process wrote which phase (the train rule runs INIT and RUN as two processes: INIT_PROCESS separate)
  _log(f"train: phase {a.phase} in process {os.getpid()}")
  run = TrainRun(settings, inputs)
  res = run.benchmark(a.benchmark) if a.benchmark else run.run(stop_after=a.stop_after, phase=a.phase)
  if a.benchmark:
    print(json.dumps(res, indent=1))
  elif res.status == "init":
    print(f"INIT phase done (process {os.getpid()}); the RUN phase follows: --phase run with the same arguments")
  else:
    print(res.summary())
  return 0


def _add_train(sub) -> None:
  p = sub.add_parser("convert-checkpoint", help="convert MLPerf's TF BERT checkpoint to safetensors",
                     description="Convert MLPerf's TF BERT checkpoint (model.ckpt-28252) to a safetensors file of "
                                 "this project's parameter names; optimizer slots are skipped.")
  p.add_argument("--checkpoint", required=True, help="checkpoint prefix, e.g. download/model.ckpt-28252")
  p.add_argument("--bert-config", required=True, help="bert_config.json of the checkpoint")
  p.add_argument("--output", required=True, help="safetensors file to write")
  p.set_defaults(func=_cmd_convert)

  p = sub.add_parser("train", help="train BERT with tinygrad and write an MLPerf result log",
                     description="Train BERT with tinygrad and write an MLPerf result log. The platform file's "
                                 "tinygrad settings (DEV, BEAM, DEFAULT_FLOAT, USE_ATOMICS, ...) and those of --set "
                                 "are exported before tinygrad is imported; they win over the same variables in "
                                 "the environment (a note says so).")
  p.add_argument("--platform-file", help="profiles/<name>/platform.yaml (or --settings)")
  p.add_argument("--settings", metavar="FILE", help="resolved settings as JSON (a file, or - for standard input, as "
                 "the train rule's job hands them to its INIT and RUN processes): used as they are, never resolved "
                 "again, so --platform-file, --set and --seed are refused with it")
  p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="override platform keys (YAML values)")
  p.add_argument("--shards", required=True, nargs="+", help="training shards: *.shard files or directories of them")
  p.add_argument("--eval", required=True, help="the eval set shard")
  p.add_argument("--bert-config", required=True, help="bert_config.json")
  p.add_argument("--init-weights", help="converted checkpoint (safetensors); default: seeded random init")
  p.add_argument("--max-seq-length", type=int, required=True)
  p.add_argument("--max-predictions-per-seq", type=int, required=True)
  p.add_argument("--seed", type=int, help="with --platform-file (default 0)")
  p.add_argument("--out", required=True, help="the result log to write (result_bert_<seed>.log)")
  p.add_argument("--ckpt-dir", required=True, help="where resume checkpoints go")
  p.add_argument("--benchmark", type=int, default=int(os.environ.get("BENCHMARK", 0) or 0),
                 help="run N steps and print the estimated training time (default: $BENCHMARK)")
  p.add_argument("--stop-after", type=int, help="stop (resumably) after N steps of this process")
  p.add_argument("--phase", choices=["all", "init", "run"], default="all",
                 help="all: INIT then RUN in this process; init: the INIT phase alone (a new work log ending with "
                      "init_stop); run: the RUN phase alone, appended to that work log (tinygrad's run_and_time.sh "
                      "runs them as two processes)")
  p.add_argument("--work-log", help="the MLPerf log while the run is unfinished (default: <out>.partial)")
  p.set_defaults(func=_cmd_train)


def _cmd_dress(a) -> int:
  # the dress's tinygrad settings (DEV=NULL:<target>, BEAM 0, PARALLEL, the compiler's library) go into the
  # environment before tinygrad is imported: every input is checked first, and nothing is written on a bad one
  from mlperf_bert.train import dress
  result = dress.dress_files(dress.profile_file(a.platform), a.bert_config or dress.DEFAULT_BERT_CONFIG,
                             layers=dress.parse_layers(a.layers), pair=dress.parse_pair(a.pair),
                             overrides=_parse_set(a.set), on_cpu=a.cpu, json_out=a.json, log=_log,
                             timeline=a.timeline)
  print(result["table"])
  if result["fits"] is False:
    _log(f"error: {result['platform']} at BS {result['batch_size']} does not fit in {result['card']['name']}'s memory "
         f"(peak {max(result['memory']['peak'].values()) / 1e9:.2f} GB a device, usable "
         f"{result['card']['usable'] / 1e9:.2f} GB); the largest BS that fits is {result.get('largest_batch_size')}: "
         f"--set BS=<that>")
    return 1
  return 0


def _add_dress(sub) -> None:
  from mlperf_bert.train.dress import __doc__ as doc
  p = sub.add_parser("dress", help="the platform's train and eval steps at full size, compiled for its GPU on no "
                     "GPU: memory a device, kernels, FLOPs, the roofline floor", description=doc,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--platform", required=True, help="a profile name (profiles/NAME/platform.yaml) or a platform file")
  p.add_argument("--layers", help="N: measure an N-layer model; full: the config's depth; default: 2 and 4 layers, "
                 "extrapolated linearly to the config's depth")
  p.add_argument("--pair", default="2,4", help="the two depths of the default extrapolation (default: 2,4)")
  p.add_argument("--set", nargs="*", metavar="KEY=VALUE", help="override platform keys (YAML values), e.g. BS=72")
  p.add_argument("--bert-config", help="bert_config.json (default: MLPerf's, resources/demo/bert_config.json)")
  p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
  p.add_argument("--cpu", action="store_true", help="run the same steps on this machine's CPU instead (they execute: "
                 "small models only; what the NULL device's counts are checked against)")
  p.add_argument("--timeline", action="store_true", help="also print where each step's memory goes on the device that "
                 "holds most: each arena, the live bytes through the step, the buffers alive at its peak")
  p.set_defaults(func=_cmd_dress)


# ---------------------------------------------------------------------------------------------------- audit

def _cmd_audit(a) -> int:
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


# ---------------------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m mlperf_bert", description=__doc__.splitlines()[0])
  sub = p.add_subparsers(dest="command", required=True)
  _add_config(sub)
  _add_data(sub)
  _add_train(sub)
  _add_dress(sub)
  _add_audit(sub)
  _add_workers(sub)
  return p


def main(argv: list[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  import warnings
  warnings.showwarning = lambda message, *a, **k: print(f"warning: {message}", file=sys.stderr)  # one line
  try:
    return int(args.func(args) or 0)
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2

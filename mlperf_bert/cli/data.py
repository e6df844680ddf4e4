"""The data wing's subcommands (download ... features), check-config and footprint."""
from __future__ import annotations
import argparse
from pathlib import Path

from mlperf_bert.constants import EVAL_SAMPLES
from mlperf_bert.errors import UserError
from mlperf_bert.cli.common import _log, _positive, _space_flag


# ---------------------------------------------------------------------------------------------------- lock

def _cmd_lock(a) -> int:
  from mlperf_bert.constants import REPO
  from mlperf_bert.envs import refresh_envs
  from mlperf_bert.lock import refresh
  a.uv_args = [x for x in a.uv_args if x != "--"]
  for p in refresh(REPO, a.uv, a.uv_args, a.python or None, Path(a.constraint) if a.constraint else None) + \
      refresh_envs(REPO, a.uv, a.uv_args):
    print(p.relative_to(REPO))
  return 0


def _add_lock(sub) -> None:
  p = sub.add_parser("lock", help="refresh the lock (lock/py*.txt) from pyproject.toml and envs/*.yaml from it "
                     "(bash scripts/lock.sh runs it with pip's index settings)")
  p.add_argument("--uv", default="uv", help="the uv executable (default: uv on PATH)")
  p.add_argument("--python", action="append", help="lock only this Python (X.Y; repeatable; default: every one)")
  p.add_argument("--constraint", help="a requirements file (e.g. pip freeze) whose versions the lock must take")
  p.add_argument("uv_args", nargs=argparse.REMAINDER, help="after --: uv pip compile's index arguments")
  p.set_defaults(func=_cmd_lock)


# ---------------------------------------------------------------------------------------------------- data

def _cmd_download(a) -> int:
  from mlperf_bert.data.download import fetch
  from mlperf_bert.data.http import FetchPolicy
  policy = FetchPolicy.bounded(deadline_s=a.deadline, stall_s=a.stall, max_file_bytes=a.max_bytes)
  fetch(a.source, a.output, md5=a.md5, path=a.path, attempts=a.attempts, policy=policy)
  return 0


def _cmd_extract(a) -> int:
  from mlperf_bert.data.extract import extract_results
  extract_results(a.tarball, a.manifest, a.output, space_check=not a.no_space_check)
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
              dupe_factor=a.dupe_factor, engine=a.engine, progress=not a.no_progress, log=_log,
              space_check=not a.no_space_check)


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


def _add_config(sub) -> None:
  p = sub.add_parser("check-config", help="check config files before `snakemake --configfile` reads them (YAML "
                     "aliases, syntax, keys and types)")
  p.add_argument("files", nargs="*", help="the config files, in the order --configfile would get them")
  p.add_argument("--base", default=str(Path(__file__).resolve().parents[2] / "config.yaml"),
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


def _add_footprint(sub) -> None:
  p = sub.add_parser("footprint", help="the run's footprint: the bytes each folder of the basedir holds when the "
                     "workflow is done, against its free space (what `snakemake -n` prints)")
  p.add_argument("--json", action="store_true", help="print it as JSON (bytes), not as the dry run's lines")
  p.add_argument("--snakemake-args", nargs=argparse.REMAINDER, metavar="ARG", default=[],
                 help="the arguments of the `snakemake` command to plan (all that follows: --profile, --configfile, "
                      "--config ...), read with Snakemake's own parser; none: the demo's config.yaml")
  p.set_defaults(func=_cmd_footprint)


def _cmd_footprint(a) -> int:
  import json
  from mlperf_bert.footprint import plan_snakemake_args
  fp = plan_snakemake_args(a.snakemake_args, repo=Path(__file__).resolve().parents[2], workdir=Path.cwd())
  print(json.dumps(fp.as_dict(), indent=1) if a.json else "\n".join(fp.lines()))
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
  _space_flag(p)
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
    _space_flag(p)

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

"""The tinygrad trainer's run: train_bert's two processes as run_and_time.sh runs them, then the result published.

    record = run_phases(s, checkout=..., data_dir=..., init_ckpt_dir=..., work_dir=..., out=..., shard_paths=...,
                        eval_path=..., bert_config=..., init_weights=...)

INIT (BENCHMARK, INITMLPERF=1, BERT_LAYERS of the INIT model) then RUN (PARALLEL=0 RUNMLPERF=1), PYTHONPATH at the
checkout (its own tinygrad wins over the installed one) after the hook folder (hook/sitecustomize.py: seeds `random`,
docs/tinygrad-trainer.md), the platform's environment, output teed into the job log; then the result log and its
train record are published as this project's trainer publishes them.
"""
from __future__ import annotations
import os, subprocess, sys, time
from pathlib import Path
from typing import Sequence

from mlperf_bert.data.loader import open_shards
from mlperf_bert.errors import UserError
from mlperf_bert.mlperf_log import LogEvent, parse_line
from mlperf_bert.train.environment import tinygrad_env
from mlperf_bert.train.record import publish_result
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.tinygrad_trainer.checks import check_settings, tinygrad_size
from mlperf_bert.train.tinygrad_trainer.source import TRAIN_SCRIPT

HOOK_DIR = Path(__file__).resolve().parent / "hook"   # sitecustomize.py: seeds `random` (docs/tinygrad-trainer.md)
# the hyperparameters train_bert reads from the environment besides tinygrad's own settings
TRAIN_BERT_KEYS = ("GPUS", "BS", "EVAL_BS", "MAX_EVAL_STEPS", "OPT_BASE_LEARNING_RATE", "OPT_LAMB_BETA_1",
                   "OPT_LAMB_BETA_2", "TRAIN_STEPS", "NUM_WARMUP_STEPS", "LOSS_SCALER", "DECAY", "EPSILON", "POLY_POWER",
                   "DISABLE_DROPOUT", "TRAIN_BEAM", "EVAL_BEAM", "FREE_INTERMEDIATE", "EVAL_STEP_FREQ", "TARGET",
                   "SEED", "SUBMISSION_PLATFORM", "NUM_CPU_THREADS", "CKPT", "SAVE_CKPT_FREQ", "KEEP_CKPT_AMOUNT")


def phase_env(s: Settings, *, checkout: Path, data_dir: Path, init_ckpt_dir: Path, cache_db: Path,
              base: dict[str, str]) -> dict[str, str]:
  """The environment of both processes: the platform's tinygrad settings and train_bert's keys, as strings (the
  flat mapping of the settings is this edge's form)."""
  env = {k: v for k, v in base.items() if k not in ("PYTHONPATH", "BENCHMARK", "INITMLPERF", "RUNMLPERF")}
  env.update(tinygrad_env(s))
  flat = s.as_dict()
  env.update({k: str(int(flat[k]) if isinstance(flat[k], bool) else flat[k]) for k in TRAIN_BERT_KEYS if k in flat})
  if s.free_intermediate is None: env["FREE_INTERMEDIATE"] = "0"   # docs/parity.md row 21 (see the doc page)
  env.update({"PYTHONPATH": os.pathsep.join([str(HOOK_DIR), str(checkout)]), "MODEL": "bert", "LOGMLPERF": "1",
              "BASEDIR": str(data_dir), "INIT_CKPT_DIR": str(init_ckpt_dir), "CACHEDB": str(cache_db),
              "BERT_SIZE": tinygrad_size(s), "BERT_LAYERS": str(s.model.layers or 24),
              "SAVE_CKPT_DIR": str(cache_db.parent / "ckpts"), "MLPERF_BERT_SHUFFLE_SEED": str(s.seed),
              "PYTHONUNBUFFERED": "1"})
  if s.submission.division != "closed": env["MLPERF_BERT_DIVISION"] = s.submission.division  # the hook
  return env


def _tee(cmd: list[str], env: dict, cwd: Path, log_file, what: str) -> float:
  t0 = time.monotonic()
  print(f"== {what}: {' '.join(k + '=' + env[k] for k in ('BENCHMARK', 'INITMLPERF', 'RUNMLPERF', 'PARALLEL', 'BERT_LAYERS') if k in env)} "
        f"python {TRAIN_SCRIPT}", flush=True)
  with subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
    for line in p.stdout:
      sys.stdout.write(line); log_file.write(line); log_file.flush()
  if p.returncode != 0:
    raise UserError(f"tinygrad's {TRAIN_SCRIPT} ({what}) exited with {p.returncode}; its output is in {log_file.name}")
  return time.monotonic() - t0


def _accuracies(log_path: Path, global_batch: int) -> tuple[str, list[tuple[int, float]]]:
  """run_stop's status and (step, accuracy) of each eval (train_bert logs the samples seen as epoch_num)."""
  status, accs = "aborted", []
  for ev in (parse_line(line) for line in log_path.read_text().splitlines()):
    if not isinstance(ev, LogEvent): continue
    if ev.key == "eval_accuracy": accs.append((int(ev.metadata["epoch_num"]) // global_batch, float(ev.value)))
    if ev.key == "run_stop": status = ev.metadata.get("status", "aborted")
  return status, accs


def run_phases(s: Settings, *, checkout: str | os.PathLike, data_dir: str | os.PathLike,
               init_ckpt_dir: str | os.PathLike, work_dir: str | os.PathLike, out: str | os.PathLike,
               shard_paths: Sequence[str], eval_path: str, bert_config: str, init_weights: str,
               init_process: bool = True) -> dict:
  """INIT then RUN process of train_bert in work_dir (its result_bert_<seed>.log is written there; their output
  goes to this process's stdout, the job log, and as run_and_time.sh's `tee` to work_dir/train_bert_<seed>.out),
  then the result log and its train record published at `out`. Returns the train record. init_process=False
  runs the RUN process alone (tests: the INIT process only compiles, for train_bert's fake 512-token data)."""
  check_settings(s)
  checkout, work = Path(checkout).resolve(), Path(work_dir).resolve()
  work.mkdir(parents=True, exist_ok=True)
  tg_log = work / f"result_bert_{s.seed}.log"
  tg_log.unlink(missing_ok=True)   # mllog appends: a failed try's lines must not stay
  env = phase_env(s, checkout=checkout, data_dir=Path(data_dir).resolve(), init_ckpt_dir=Path(init_ckpt_dir).resolve(),
                  cache_db=work / "cache.db", base=dict(os.environ))
  cmd = [sys.executable, str(checkout / TRAIN_SCRIPT)]
  init_layers = min(s.init.bert_layers or 2, s.model.layers or 24)
  init_env = {**env, "BENCHMARK": str(max(2, s.init.benchmark_steps or 10)), "INITMLPERF": "1",
              "BERT_LAYERS": str(init_layers)}
  with open(work / f"train_bert_{s.seed}.out", "w") as lf:
    if init_process: _tee(cmd, init_env, work, lf, "INIT process")
    _tee(cmd, {**env, "PARALLEL": "0", "RUNMLPERF": "1"}, work, lf, "RUN process")
  if not tg_log.is_file():
    raise UserError(f"{tg_log}: tinygrad's train_bert wrote no result log; see the job log")
  status, accs = _accuracies(tg_log, s.global_batch_size)
  shards = open_shards(shard_paths)
  (ev,) = open_shards([eval_path], what="eval set")
  return publish_result(tg_log, out, shards=shards, eval_shard=ev, init_weights=init_weights, bert_config=bert_config,
                        settings=s, status=status, accuracies=accs)

"""The tinygrad trainer (config `trainer: tinygrad`): tinygrad's own examples/mlperf/model_train.py, from the checkout
mlperf_bert/train/tinygrad_source.py brought into the basedir, on this workflow's shards.

export(): this workflow's verified shards and eval set, laid out as tinygrad's loader reads them (extra/datasets/
  wikipedia.py and examples/mlperf/dataloader.py at e0139fa): `<dir>/train/<shard stem>.pkl` (what
  get_wiki_train_files() globs under BASEDIR, name-sorted as this project sorts its shards) and `<dir>/eval.pkl`,
  each a pickled list of per-sample dicts of (1, n) numpy arrays, as wikipedia.py's instance_to_features makes them.
  These pickles are the only ones the product writes: only for tinygrad's loader, in the basedir's tinygrad/
  work folder, never read by anything of this project.
write_init_checkpoint(): the initial weights as a TensorFlow checkpoint in INIT_CKPT_DIR (train_bert's RUN process
  loads it with tensorflow, load_from_pretrained): MLPerf's converted checkpoint where the config downloads it, else
  this project's seeded random init for SEED (the same weights this project's trainer starts from).
run_phases(): the platform's two processes as run_and_time.sh runs them: INIT (BENCHMARK, INITMLPERF=1, BERT_LAYERS
  of the INIT model) then RUN (PARALLEL=0 RUNMLPERF=1), PYTHONPATH at the checkout (its own tinygrad wins over the
  installed one), the platform's environment, output teed into the job log; then the result log and its train
  record are published as this project's trainer publishes them.
"""
from __future__ import annotations
import os, pickle, subprocess, sys, time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mlperf_bert.constants import FEATURES
from mlperf_bert.data.loader import open_shards
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path
from mlperf_bert.mlperf_log import Event, parse_line
from mlperf_bert.train.hparams import tinygrad_env
from mlperf_bert.train.record import publish_result
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.tinygrad_source import TRAIN_SCRIPT

HOOK_DIR = Path(__file__).resolve().parent / "tinygrad_hook"   # sitecustomize.py: seeds `random` (docs/tinygrad-trainer.md)
# tinygrad's BERT_SIZE (examples/mlperf/helpers.py get_mlperf_bert_config): (hidden, heads, intermediate)
SIZES = {"large": (1024, 16, 4096), "tiny": (128, 2, 512)}
# the hyperparameters train_bert reads from the environment besides tinygrad's own settings
TRAIN_BERT_KEYS = ("GPUS", "BS", "EVAL_BS", "MAX_EVAL_STEPS", "OPT_BASE_LEARNING_RATE", "OPT_LAMB_BETA_1",
                   "OPT_LAMB_BETA_2", "TRAIN_STEPS", "NUM_WARMUP_STEPS", "LOSS_SCALER", "DECAY", "EPSILON", "POLY_POWER",
                   "DISABLE_DROPOUT", "TRAIN_BEAM", "EVAL_BEAM", "FREE_INTERMEDIATE", "EVAL_STEP_FREQ", "TARGET",
                   "SEED", "SUBMISSION_PLATFORM", "NUM_CPU_THREADS", "CKPT", "SAVE_CKPT_FREQ", "KEEP_CKPT_AMOUNT")
EVAL_ROWS = 10000   # train_bert asserts EVAL_BS * MAX_EVAL_STEPS >= 10000


def _rows(shard) -> list[dict[str, np.ndarray]]:
  b = shard.batch(np.arange(len(shard)))
  return [{k: b[k][i:i + 1] for k in FEATURES} for i in range(len(shard))]


def _dump(rows: list, path: Path) -> int:
  with atomic_path(path) as tmp:
    with open(tmp, "wb") as f: pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
  return path.stat().st_size


def export(shard_paths: Sequence[str | os.PathLike], eval_path: str | os.PathLike, out_dir: str | os.PathLike,
           max_seq_length: int, max_predictions_per_seq: int, log: Callable[[str], None] = print) -> dict:
  """Write train/<stem>.pkl per shard and eval.pkl under out_dir (see the module doc); returns sizes."""
  out = Path(out_dir)
  shards = open_shards(shard_paths, max_seq_length, max_predictions_per_seq)
  (ev,) = open_shards([eval_path], max_seq_length, max_predictions_per_seq, what="eval set")
  total, rows = 0, 0
  for sh in shards:
    total += _dump(_rows(sh), out / "train" / (Path(sh.path).name.rsplit(".", 1)[0] + ".pkl"))
    rows += len(sh)
  eval_bytes = _dump(_rows(ev), out / "eval.pkl")
  res = {"train_files": len(shards), "train_rows": rows, "train_bytes": total, "eval_rows": len(ev),
         "eval_bytes": eval_bytes, "shard_bytes": sum(os.path.getsize(p) for p in shard_paths)}
  log(f"exported {len(shards)} shards ({rows} rows, {total / 1e6:.1f} MB of pickles from {res['shard_bytes'] / 1e6:.1f} MB "
      f"of shards) and the eval set ({len(ev)} rows, {eval_bytes / 1e6:.1f} MB) to {out}")
  return res


def write_init_checkpoint(out_dir: str | os.PathLike, cfg, seed: int, safetensors: str | os.PathLike | None = None) -> Path:
  """A TF v1 checkpoint (Google's names) of the initial weights in out_dir, with its `checkpoint` state file, so
  that tf.train.list_variables(out_dir) finds it; returns the .index file. From `safetensors` (the converted MLPerf
  checkpoint) when given, else this project's seeded init of `cfg` for `seed`."""
  import tensorflow as tf  # the `tf` extra: train_bert itself needs it to read the checkpoint
  from mlperf_bert.train.model import _init_value, parameter_shapes
  if safetensors is not None:
    from safetensors.numpy import load_file
    weights = load_file(str(safetensors))
  else:
    rng = np.random.default_rng(seed)
    weights = {n: _init_value(n, s, cfg.initializer_range, rng) for n, s in parameter_shapes(cfg).items()}
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  v1 = tf.compat.v1
  with tf.Graph().as_default():
    made = [v1.get_variable(n, initializer=tf.constant(np.asarray(v, np.float32))) for n, v in weights.items()]
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      prefix = v1.train.Saver(made).save(sess, str(out / "model.ckpt"))
  return Path(prefix + ".index")


def init_model_config(bert_config: str | os.PathLike, s: Settings):
  """bert_config.json with the platform's size keys (BERT_LAYERS, BERT_HIDDEN_SIZE, ...): the model both trainers
  build for these settings."""
  from mlperf_bert.train.trainer import model_config
  return model_config(bert_config, s.model)


def tinygrad_size(s: Settings) -> str:
  m = s.model
  dims = (m.hidden_size or 1024, m.num_heads or 16, m.intermediate_size or 4096)
  for name, d in SIZES.items():
    if d == dims: return name
  raise UserError(f"model hidden/heads/intermediate {dims}: tinygrad's train_bert builds only BERT_SIZE large "
                  f"{SIZES['large']} or tiny {SIZES['tiny']}; set BERT_HIDDEN_SIZE, BERT_NUM_HEADS and "
                  f"BERT_INTERMEDIATE_SIZE to one of them or use trainer: project")


def eval_overrides(s: Settings, train: dict[str, Any]) -> dict[str, Any]:
  """The `train` overrides (the config's, a flat mapping) with the eval train_bert needs: where the platform
  evaluates fewer than 10,000 samples (the demo: 8 batches of 64) and `train` sets neither EVAL_BS nor EVAL_SAMPLES,
  100 batches of 100 (the whole eval set each eval, which train_bert's assert asks for; both trainers then read the
  same rows)."""
  if s.eval.batch_size * s.eval.max_steps >= EVAL_ROWS or {"EVAL_BS", "EVAL_SAMPLES"} & set(train): return dict(train)
  return {**train, "EVAL_BS": 100, "EVAL_SAMPLES": EVAL_ROWS}


def check_settings(s: Settings) -> None:
  """What train_bert at e0139fa cannot run, refused before any job (one line with the fix)."""
  tinygrad_size(s)
  if s.eval.batch_size * s.eval.max_steps < EVAL_ROWS:
    raise UserError(f"EVAL_BS={s.eval.batch_size} x {s.eval.max_steps} eval steps: tinygrad's train_bert asserts at "
                    f"least {EVAL_ROWS} eval samples; with trainer: tinygrad set e.g. --config "
                    f"train='{{EVAL_BS: 100, EVAL_SAMPLES: 10000}}'")


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
    if not isinstance(ev, Event): continue
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

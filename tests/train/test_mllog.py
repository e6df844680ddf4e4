"""train/mllog.py + train/run.py: the result log of a short tiny-model run against mlperf-logging's compliance checker.

One closed-division run (a tinybox platform's hyperparameters on a tiny model on CPU): the closed checker fails
only on the accuracy target (closed_bert.yaml: eval_accuracy >= 0.720), shown by raising the logged accuracy
above it; the same log as open division passes. The key set covers tinycorp's v4.1 result log.
"""
import json, re
from pathlib import Path

import pytest

from mlperf_bert.constants import platform_path
from mlperf_bert.audit.mlperf_tools import compliance_check
from mlperf_bert.train.mllog import ResultLog
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.inputs import RunInputs
from mlperf_bert.train.run import TrainRun
from test_train import PRED, SEQ, data, cpu_kernels  # noqa: F401  (the shared synthetic-data fixture, tinygrad without kernel optimizations)
from conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
TINYCORP = FIXTURES / "tinycorp-v4.1/results/tinybox_green/bert/result_0.txt"


def _keys(text):
  return {json.loads(l.split(":::MLLOG", 1)[1])["key"] for l in text.splitlines() if ":::MLLOG" in l}


@pytest.fixture(scope="module")
def closed_log(data, tmp_path_factory):
  tmp = tmp_path_factory.mktemp("closed")
  green = load_platform(platform_path(REPO, "tinybox_green"))
  # the tinybox_green settings, sized down to run on the CPU: fp32, one device, a tiny model and few steps
  over = dict(DEV="CPU", GPUS=1, BS=4, EVAL_BS=8, DEFAULT_FLOAT="FLOAT32", SUM_DTYPE="FLOAT32", BEAM=0,
              TRAIN_STEPS=4, EVAL_STEP_FREQ=2, EVAL_SAMPLES=20, INIT_BENCHMARK_STEPS=2, SAVE_CKPT_FREQ=3,
              CACHE_CLEAR=False)  # the kernel cache is shared with other processes on this machine
  hp = resolve(green, over, seed=7, eval_examples=20)
  assert hp.submission.division == "closed" and hp.submission.platform == "tinybox_green"
  run = TrainRun(hp, RunInputs.of(shards=data["shards"], eval_set=data["eval"], bert_config=data["config"],
                                  log=tmp / "result_bert_7.log", work_log=tmp / "partial.log", ckpt_dir=tmp / "ckpt",
                                  max_seq_length=SEQ, max_predictions_per_seq=PRED), echo=False, progress=False)
  res = run.run()
  assert res.status == "aborted" and res.steps == 4  # a tiny model never reaches 0.72
  return res.log_path


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_closed_log_fails_only_the_accuracy_target(closed_log, tmp_path):
  ok, out = compliance_check(closed_log)
  assert not ok
  assert len(out) == 1 and "eval_accuracy" in out[0] and "0.720" in out[0], out
  # the same log with the last accuracy above the target passes every closed check
  text = closed_log.read_text()
  last = [m for m in re.finditer(r'"key": "eval_accuracy", "value": [0-9.e-]+', text)][-1]
  fixed = text[:last.start()] + '"key": "eval_accuracy", "value": 0.75' + text[last.end():]
  (tmp_path / "fixed.log").write_text(fixed)
  ok, out = compliance_check(tmp_path / "fixed.log")
  assert ok, out


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_open_division_log_passes(closed_log, tmp_path):
  text = closed_log.read_text().replace('"key": "submission_division", "value": "closed"',
                                        '"key": "submission_division", "value": "open"')
  (tmp_path / "open.log").write_text(text)
  ok, out = compliance_check(tmp_path / "open.log")
  assert ok, out
  assert '"status": "aborted"' in text and text.count('"key": "eval_accuracy"') == 2


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_log_content_and_key_set(closed_log):
  text = closed_log.read_text()
  ours, theirs = _keys(text), _keys(TINYCORP.read_text())
  assert theirs - ours == set(), theirs - ours
  assert {"seed", "block_start", "block_stop"} <= ours
  ev = {json.loads(l.split(":::MLLOG", 1)[1])["key"]: json.loads(l.split(":::MLLOG", 1)[1])
        for l in text.splitlines() if ":::MLLOG" in l}
  assert ev["global_batch_size"]["value"] == 4 and ev["seed"]["value"] == 7
  assert ev["max_sequence_length"]["value"] == SEQ and ev["max_predictions_per_seq"]["value"] == PRED
  # EVAL_METRIC tinygrad (the default) reads EVAL_BS * MAX_EVAL_STEPS = 8 * 3 samples per eval and logs that
  assert ev["eval_samples"]["value"] == 24 and ev["train_samples"]["value"] == 16
  assert ev["eval_metric"]["value"] == "tinygrad" and ev["cache_clear"]["value"] is False
  assert ev["opt_lamb_beta_1"]["value"] == 0.9 and ev["opt_base_learning_rate"]["value"] == pytest.approx(0.000175 * (4 / 96) ** 0.5)
  assert ev["eval_stop"]["metadata"]["samples_count"] == 24
  assert ev["eval_accuracy"]["metadata"]["epoch_num"] == 16


def test_result_log_writes_only_mllog_lines(tmp_path, capsys):
  with ResultLog(tmp_path / "x.log", echo=True) as log:
    log.event("seed", 3)
    log.run_stop(True, 10)
  lines = (tmp_path / "x.log").read_text().splitlines()
  assert len(lines) == 2 and all(l.startswith(":::MLLOG ") for l in lines)
  assert '"status": "success"' in lines[1]
  assert capsys.readouterr().out.count(":::MLLOG") == 2


def test_cache_clear_empties_tinygrad_kernel_cache(tmp_path):
  """CACHE_CLEAR: the INIT phase empties tinygrad's disk cache (as train_bert) and logs whether it did. Runs in a
  subprocess with its own CACHEDB so the cache other processes on this machine share is left alone."""
  import subprocess, sys
  code = ("from tinygrad.helpers import diskcache_put, diskcache_get\n"
          "from mlperf_bert.train.run import clear_kernel_cache\n"
          "diskcache_put('t', 'k', 41)\n"
          "assert diskcache_get('t', 'k') == 41\n"
          "assert clear_kernel_cache(False) is False and diskcache_get('t', 'k') == 41\n"
          "assert clear_kernel_cache(True) is True and diskcache_get('t', 'k') is None\n"
          "print('ok')\n")
  import os
  env = {**os.environ, "CACHEDB": str(tmp_path / "cache.db"), "CACHELEVEL": "2"}
  r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]

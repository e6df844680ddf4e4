"""train/run.py: a tiny BERT trains on synthetic shards; resume after a stop continues the same run; data parallel on
two CPU devices equals one device; NaN aborts cleanly; the result log appears only when the run finished."""
import json, math, os, re

import numpy as np
import pytest

from mlperf_bert.errors import UserError
from mlperf_bert.audit.mlperf_tools import compliance_check
from mlperf_bert.train.hparams import resolve
from mlperf_bert.data.shards import write_shard
from mlperf_bert.train.inputs import RunInputs
from mlperf_bert.train.resume import list_checkpoints
from mlperf_bert.train.run import TrainingDiverged, TrainRun

SEQ, PRED, VOCAB = 32, 5, 128


@pytest.fixture(scope="module", autouse=True)
def cpu_kernels(quick_kernels):
  """These tests check runs, resumes, logs and records, not kernels: tinygrad without kernel optimizations
  (conftest's quick_kernels), and with USE_ATOMICS=1 as the cpu platform sets it (its embedding backward), in this
  process and in the children it starts. Modules that import this fixture get it too."""
  from tinygrad.helpers import Context
  with pytest.MonkeyPatch.context() as mp, Context(USE_ATOMICS=1):
    mp.setenv("USE_ATOMICS", "1")
    yield


def tiny_config(path):
  path.write_text(json.dumps({
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 32,
    "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 64, "num_attention_heads": 2,
    "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": VOCAB}))
  return path


def synth_instances(n, rng):
  """Learnable data: the masked token is the one before it plus one (mod a small range)."""
  out = []
  for _ in range(n):
    L = int(rng.integers(12, SEQ))
    la = int(rng.integers(4, L - 4))
    start = int(rng.integers(10, 60))
    toks = [10 + (start + j) % 100 for j in range(L - 3)]
    ids = [1] + toks[:la - 2] + [2] + toks[la - 2:] + [2]
    pos = sorted(rng.choice(np.arange(2, L - 1), size=PRED, replace=False).tolist())
    pos = [p for p in pos if ids[p] not in (1, 2)]
    masked = list(ids)
    for p in pos: masked[p] = 3
    out.append({"input_ids": masked, "segment_ids": [0] * la + [1] * (L - la), "masked_lm_positions": pos,
                "masked_lm_ids": [ids[p] for p in pos], "next_sentence_label": int(rng.integers(0, 2))})
  return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  d = tmp_path_factory.mktemp("data")
  rng = np.random.default_rng(0)
  shards = []
  for f in range(3):
    p = d / f"part-{f:05d}-of-00003.shard"
    write_shard(p, synth_instances(40, rng), max_seq_length=SEQ, max_predictions_per_seq=PRED)
    shards.append(p)
  write_shard(d / "eval.shard", synth_instances(20, rng), max_seq_length=SEQ, max_predictions_per_seq=PRED, eval_set=True)
  return {"shards": shards, "eval": d / "eval.shard", "config": tiny_config(d / "bert_config.json")}


def make_run(data, tmp_path, devices=None, **over):
  base = dict(DEV="CPU", BS=4, EVAL_BS=8, OPT_BASE_LEARNING_RATE=0.01, NUM_WARMUP_STEPS=3, TRAIN_STEPS=12,
              EVAL_STEP_FREQ=6, SAVE_CKPT_FREQ=4, KEEP_CKPT_AMOUNT=2, TARGET=0.99, EVAL_SAMPLES=20,
              INIT_BENCHMARK_STEPS=0, SUBMISSION_PLATFORM="test_cpu", SUBMISSION_DIVISION="open",
              CACHE_CLEAR=False,  # the kernel cache is shared with other processes on this machine
              CKPT=True)
  base.update(over)
  hp = resolve({}, base, seed=3, eval_examples=20)
  inputs = RunInputs.of(shards=data["shards"], eval_set=data["eval"], bert_config=data["config"],
                        log=tmp_path / "results" / "result_bert_3.log", work_log=tmp_path / "logs" / "partial.log",
                        ckpt_dir=tmp_path / "ckpt", max_seq_length=SEQ, max_predictions_per_seq=PRED)
  return TrainRun(hp, inputs, devices=devices, echo=False, progress=False)


@pytest.mark.slow  # a training run of minutes (two, for the comparisons)
def test_run_stop_resume_equals_uninterrupted(data, tmp_path):
  full = make_run(data, tmp_path / "a").run()
  assert full.status == "aborted" and full.steps == 12          # TARGET 0.99 is not reached
  assert [s for s, _ in full.accuracies] == [6, 12]
  assert full.log_path.exists() and not (tmp_path / "a" / "logs" / "partial.log").exists()
  assert list_checkpoints(tmp_path / "a" / "ckpt") == []          # a finished run leaves nothing to resume
  assert all(math.isfinite(x) for x in full.losses)

  first = make_run(data, tmp_path / "b").run(stop_after=7)       # "killed" after step 7; checkpoint at step 4
  assert first.status == "stopped" and first.log_path is None
  assert not (tmp_path / "b" / "results" / "result_bert_3.log").exists()
  assert [s for s, _ in list_checkpoints(tmp_path / "b" / "ckpt")] == [4]
  assert (tmp_path / "b" / "logs" / "partial.log").exists()
  second = make_run(data, tmp_path / "b").run()
  assert second.status == "aborted" and second.steps == 12
  np.testing.assert_allclose(first.losses, full.losses[:7], rtol=1e-5)
  np.testing.assert_allclose(second.losses, full.losses[4:], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose([a for _, a in second.accuracies], [a for _, a in full.accuracies], atol=1e-6)
  log = (tmp_path / "b" / "results" / "result_bert_3.log").read_text()
  assert log.count('"key": "run_start"') == 1 and log.count('"key": "resume_from_init_weights"') == 1
  ok, out = compliance_check(tmp_path / "b" / "results" / "result_bert_3.log")
  assert ok, out


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_no_checkpoint_in_the_run_unless_ckpt(data, tmp_path):
  # tinygrad's default: nothing is saved inside the timed run, so a stopped run has nothing to resume from
  first = make_run(data, tmp_path, CKPT=False).run(stop_after=7)
  assert first.status == "stopped" and list_checkpoints(tmp_path / "ckpt") == []
  again = make_run(data, tmp_path, CKPT=False).run(stop_after=1)
  assert again.steps == 1  # started over at step 0


@pytest.mark.slow  # a training run of minutes (two, for the comparisons)
def test_other_settings_do_not_resume(data, tmp_path):
  make_run(data, tmp_path, INIT_BENCHMARK_STEPS=0).run(stop_after=5)
  assert [s for s, _ in list_checkpoints(tmp_path / "ckpt")] == [4]
  res = make_run(data, tmp_path, OPT_BASE_LEARNING_RATE=0.02, INIT_BENCHMARK_STEPS=0).run(stop_after=2)
  assert list_checkpoints(tmp_path / "ckpt") == []  # the stale step-4 checkpoint was removed, not resumed
  assert res.steps == 2


@pytest.mark.full  # test_parity.py checks two CPU devices against tinygrad's two-device numbers
@pytest.mark.slow  # a training run of minutes (two, for the comparisons)
def test_data_parallel_two_cpu_devices_matches_single(data, tmp_path):
  kw = dict(TRAIN_STEPS=3, EVAL_STEP_FREQ=3, INIT_BENCHMARK_STEPS=0, EVAL_SAMPLES=16, DISABLE_DROPOUT=True)
  one = make_run(data, tmp_path / "one", **kw).run()
  two = make_run(data, tmp_path / "two", devices=("CPU", "CPU:1"), GPUS=2, **kw).run()
  assert len(two.losses) == 3 and len(two.accuracies) == 1
  np.testing.assert_allclose(two.losses, one.losses, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose([a for _, a in two.accuracies], [a for _, a in one.accuracies], atol=1e-6)


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_nan_loss_aborts_with_kept_log(data, tmp_path):
  run = make_run(data, tmp_path, OPT_BASE_LEARNING_RATE=1e30, NUM_WARMUP_STEPS=1, INIT_BENCHMARK_STEPS=0)
  with pytest.raises(TrainingDiverged, match="loss became"):
    run.run()
  partial = tmp_path / "logs" / "partial.log"
  assert partial.exists() and '"status": "aborted"' in partial.read_text()
  assert not (tmp_path / "results" / "result_bert_3.log").exists()


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_run_and_benchmark_time_and_print_steps_alike(data, tmp_path, capsys):
  # one helper (train/step.py timed_step) times and prints each step of the RUN loop and of benchmark()
  run = make_run(data, tmp_path, TRAIN_STEPS=3, EVAL_STEP_FREQ=3, EVAL_SAMPLES=16, CKPT=False)
  run.echo = True
  figures = run.benchmark(3)
  bench = [l for l in capsys.readouterr().out.splitlines() if " ms run, " in l]
  res = run.run()
  loop = [l for l in capsys.readouterr().out.splitlines() if " ms run, " in l]
  line = re.compile(r"^\s*(\d+) +[\d.]+ ms run, +[\d.]+ ms python, +[\d.]+ ms fetch data, +[\d.]+ ms CPU, +([\d.]+) loss, "
                    r"[\d.]+ LR, [\d.]+ GB used, +[\d.]+ GFLOPS$")
  assert [line.match(l).group(1) for l in bench] == [line.match(l).group(1) for l in loop] == ["0", "1", "2"]
  # the same seeded model on the same batches: the same losses
  assert [line.match(l).group(2) for l in bench] == [f"{x:5.2f}".strip() for x in res.losses]
  assert figures["median_step_s"] > 0 and 0 < figures["first_step_s"] < 600


def test_bad_inputs_fail_before_training(data, tmp_path):
  with pytest.raises(UserError, match="max_seq_length 32, but training is configured for 64"):
    TrainRun(resolve({}, {"BS": 4}, eval_examples=20), RunInputs.of(
      shards=data["shards"], eval_set=data["eval"], bert_config=data["config"], log=tmp_path / "r.log",
      ckpt_dir=tmp_path / "c", max_seq_length=64, max_predictions_per_seq=PRED))
  with pytest.raises(UserError, match="shard directory is empty"):
    TrainRun(resolve({}, {"BS": 4}, eval_examples=20), RunInputs.of(
      shards=[], eval_set=data["eval"], bert_config=data["config"], log=tmp_path / "r.log", ckpt_dir=tmp_path / "c",
      max_seq_length=SEQ, max_predictions_per_seq=PRED))


# ---- train/hparams.py: the seed's defaults and validation (no training) ----
from pathlib import Path as _Path

from mlperf_bert.constants import platform_path
from mlperf_bert.train.environment import tinygrad_env
from mlperf_bert.train.hparams import load_platform

_REPO = _Path(__file__).resolve().parents[2]


def test_defaults_follow_train_bert():
  hp = resolve({"DEV": "NV", "GPUS": 6, "DEFAULT_FLOAT": "HALF"}, seed=1).as_dict()
  assert hp["BS"] == 66 and hp["EVAL_BS"] == 6 and hp["LOSS_SCALER"] == 2.0 ** 11
  assert hp["OPT_BASE_LEARNING_RATE"] == pytest.approx(0.000175 * math.sqrt(66 / 96))
  assert hp["TRAIN_STEPS"] == 3600000 // 66 and hp["NUM_WARMUP_STEPS"] == 1
  assert hp["EVAL_STEP_FREQ"] == int(math.floor(0.05 * (230.23 * 66 + 3000000) / 25000) * 25000 // 66)
  assert (hp["DECAY"], hp["EPSILON"], hp["POLY_POWER"], hp["TARGET"]) == (0.01, 1e-6, 1.0, 0.72)
  assert (hp["SAVE_CKPT_FREQ"], hp["KEEP_CKPT_AMOUNT"], hp["GRADIENT_ACC_STEPS"]) == (1000, 5, 1)
  fp32 = resolve({"GPUS": 2}).as_dict()
  assert fp32["BS"] == 16 and fp32["LOSS_SCALER"] == 1.0


@pytest.mark.parametrize("name", ["tinybox_green", "tinybox_red", "tinybox_8xMI300X", "dev_1gpu", "cpu"])
def test_platforms_resolve(name):
  assert (_REPO / "profiles" / name / "config.yaml").is_file()  # each platform has its Snakemake profile
  settings = resolve(load_platform(platform_path(_REPO, name)), seed=0)
  hp = settings.as_dict()
  assert hp["SUBMISSION_DIVISION"] == ("open" if name in ("cpu", "dev_1gpu") else "closed")
  if name == "tinybox_8xMI300X":
    assert (hp["BS"], hp["TRAIN_STEPS"], hp["OPT_BASE_LEARNING_RATE"], hp["DECAY"]) == (1024, 3900, 0.0011, 0.1)
    assert (hp["OPT_LAMB_BETA_1"], hp["OPT_LAMB_BETA_2"]) == (0.60466, 0.85437)
  if name == "tinybox_green":
    assert (hp["DEV"], hp["GPUS"], hp["BS"], hp["BEAM"], hp["FLOAT"]) == ("NV", 6, 90, 8, "half")
  env = tinygrad_env(settings)
  assert env["DEV"] == hp["DEV"] and ("USE_ATOMICS" in env) == (name == "cpu")


@pytest.mark.parametrize("over,msg", [
  ({"GPUS": 4, "BS": 6}, "BS=6 is not divisible by GPUS=4"),
  ({"GRADIENT_ACC_STEPS": 2}, "GRADIENT_ACC_STEPS=2"),
  ({"DEV": "TPU"}, "DEV='TPU' is not a tinygrad 0.14 device"),
  ({"BS": "eight"}, "key 'BS' must be of type integer, got string 'eight'"),
  ({"TARGET": True}, "key 'TARGET' must be of type number, got boolean True"),
  ({"BEAM_SIZE": 2}, "unknown key 'BEAM_SIZE'"),
  ({"EVAL_SAMPLES": 20000}, "EVAL_SAMPLES=20000 exceeds"),
])
def test_bad_settings_are_user_errors(over, msg):
  with pytest.raises(UserError, match=re.escape(msg)):
    resolve({}, over, where="config key train")


def test_bad_platform_file(tmp_path):
  (tmp_path / "p.yaml").write_text("BS: [1, 2]\n")
  with pytest.raises(UserError, match=r"(?s)p.yaml is invalid .*key 'BS' must be of type integer, got array"):
    load_platform(tmp_path / "p.yaml")
  with pytest.raises(UserError, match="platform file not found"):
    load_platform(tmp_path / "missing.yaml")


# ---- the workflow's train rule: a killed job resumes when the same snakemake command runs again ----
import signal, subprocess, sys, time


@pytest.mark.slow
def test_snakemake_train_rule_resumes_after_kill(tmp_path):
  repo = _Path(__file__).resolve().parents[2]
  snakemake = _Path(sys.executable).with_name("snakemake")
  result = tmp_path / "results/cpu/result_bert_0.log"
  # the result log, not `all`: the provenance, report and audit jobs after it are the end-to-end test's
  cmd = [str(snakemake), "--cores", "2", str(result), "--config", f"basedir={tmp_path}",
         "train={TRAIN_STEPS: 8, NUM_WARMUP_STEPS: 2, SAVE_CKPT_FREQ: 3, EVAL_STEP_FREQ: 4, EVAL_SAMPLES: 64, "
         "TARGET: 0.9, INIT_BENCHMARK_STEPS: 0, CACHE_CLEAR: false, INIT_PROCESS: separate}"]  # the GPU platforms' two processes
  ckpt = tmp_path / "train/cpu/seed_0/ckpt_00000006.safetensors"  # killed in step 7 or 8 (~2 s each)
  p = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
  try:
    deadline = time.time() + 900
    while not ckpt.exists() and p.poll() is None and time.time() < deadline: time.sleep(0.1)
    assert ckpt.exists(), "no checkpoint appeared"
  finally:
    if p.poll() is None:
      os.killpg(p.pid, signal.SIGINT)
      p.wait(timeout=120)
  assert not result.exists() and (tmp_path / "logs/train/cpu/result_bert_0.partial.log").exists()
  r = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=900)
  assert r.returncode == 0, r.stderr[-3000:]
  job_log = (tmp_path / "logs/train/cpu/seed_0.log").read_text()
  assert "resuming from" in job_log and "at step 6" in job_log
  # the rerun's INIT process kept the killed run's work log and checkpoint; its RUN process continued them
  assert "the INIT phase compiles, logs nothing" in job_log and "train: RUN phase: process" in job_log
  text = result.read_text()
  assert text.count('"key": "run_start"') == 1 and text.count('"key": "eval_accuracy"') == 2
  ok, out = compliance_check(result)
  assert ok, out
  assert list_checkpoints(tmp_path / "train/cpu/seed_0") == []


def test_initial_weights_are_loaded(data, tmp_path):
  from safetensors.numpy import save_file
  from mlperf_bert.train.model import parameter_shapes
  from mlperf_bert.train.trainer import ModelTrainer, model_config
  hp = resolve({}, {"BS": 4}, eval_examples=20)
  cfg = model_config(data["config"], hp.model)
  rng = np.random.default_rng(1)
  weights = {k: rng.standard_normal(s).astype(np.float32) for k, s in parameter_shapes(cfg).items()}
  save_file(weights, str(tmp_path / "model.safetensors"))
  steps = ModelTrainer(cfg, hp, ("CPU",), seed=0, init_weights=tmp_path / "model.safetensors")
  for k, t in steps.model.state_dict().items():
    np.testing.assert_array_equal(t.numpy(), weights[k])


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_train_record_holds_the_bytes_the_run_read_and_wrote(data, tmp_path):
  """The record beside the result log: the sha256 of each shard as the run mapped it (a shard replaced on disk after
  the run opened it is recorded as what was read, so the audit sees the change), of the eval set and of the log."""
  import hashlib, shutil
  from mlperf_bert.train.record import read_record, record_path
  sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
  own = dict(data, shards=[shutil.copy(p, tmp_path / p.name) for p in data["shards"]])
  read = sha(own["shards"][0])
  run = make_run(own, tmp_path, TRAIN_STEPS=2, EVAL_STEP_FREQ=2, NUM_WARMUP_STEPS=1, CKPT=False)
  other = tmp_path / "other.shard"
  shutil.copy(data["shards"][1], other)
  os.replace(other, own["shards"][0])  # after the run opened its shards
  res = run.run()
  rec = read_record(record_path(res.log_path))
  assert record_path(res.log_path).name == "result_bert_3.train.json"
  assert rec["log"]["sha256"] == sha(res.log_path) and rec["seed"] == 3 and rec["status"] == res.status
  assert [e["sha256"] for e in rec["shards"]] == [read] + [sha(p) for p in own["shards"][1:]]
  assert sha(own["shards"][0]) != read
  assert rec["eval_set"]["sha256"] == sha(data["eval"]) and rec["bert_config"]["sha256"] == sha(data["config"])
  assert rec["init_weights"] is None and rec["eval_accuracy"] == [[s, a] for s, a in res.accuracies]
  assert all(not e["path"].startswith("/") for e in rec["shards"])


@pytest.mark.slow  # a training run of minutes (two, for the comparisons)
@pytest.mark.parametrize("metric", ["tinygrad", "pooled"])
def test_final_weights_and_last_eval_batches_re_execute_bit_exact(data, tmp_path, metric):
  """The run saves its final weights (safetensors, sha256 in the record) and the counts of each batch of its last
  eval, which give the logged accuracy; the same batches evaluated again on those weights with the trainer's eval
  step (the audit's re-execution, train/evidence.py reeval) give the same counts, bit for bit."""
  import hashlib
  from mlperf_bert.train.evaluation import EvalBatch, eval_accuracy
  from mlperf_bert.train.evidence import reeval, weights_path
  from mlperf_bert.train.record import read_record, record_path
  from mlperf_bert.train.trainer import devices_for
  run = make_run(data, tmp_path, TRAIN_STEPS=4, EVAL_STEP_FREQ=2, NUM_WARMUP_STEPS=1, CKPT=False, EVAL_BS=8,
                 EVAL_SAMPLES=20, EVAL_METRIC=metric)
  res = run.run()
  rec = read_record(record_path(res.log_path))
  w = weights_path(res.log_path)
  assert w.name == "result_bert_3.final.safetensors" and w.read_bytes()[:8] != b"\x80\x04\x95"[:8]  # not a pickle
  assert rec["final_weights"] == {"path": w.name, "bytes": w.stat().st_size,
                                  "sha256": hashlib.sha256(w.read_bytes()).hexdigest()}
  ev = rec["last_eval"]
  assert ev["step"] == 4 and ev["evals_done"] == 1 and ev["metric"] == metric and ev["device"] == "CPU"
  assert len(ev["batches"]) == 3  # ceil(20 / 8)
  assert eval_accuracy([EvalBatch(*b) for b in ev["batches"]], metric) == res.accuracies[-1][1]
  got = {i: b for i, b, _ in reeval(record_path(res.log_path), [2, 0], devices_for("CPU", 1))}
  assert [got[0].as_list(), got[2].as_list()] == [ev["batches"][0], ev["batches"][2]]

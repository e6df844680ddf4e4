"""rehearse=true's settings (mlperf_bert/train/rehearsal.py): every key of the platform is kept but those a CPU cannot
run in minutes, the GPUS become CPU devices (at most one per core), and the workflow plans the rehearsal under
results/<platform>-rehearsal/ without the MLPerf checkpoint, even on the real-data config."""
import os, re

import pytest
import yaml

from workflow_helpers import REPO, snakemake
from mlperf_bert.constants import platform_path
from mlperf_bert.audit.mlperf_tools import compliance_check
from mlperf_bert.audit.logs import read_log
from mlperf_bert.errors import UserError
from mlperf_bert.mlperf_log import REHEARSAL_KEY
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.mllog import ResultLog
from mlperf_bert.train.rehearsal import (MAX_EVAL_PER_DEVICE, MAX_INIT_STEPS, PER_DEVICE_BATCH, REHEARSAL,
                                         check_overrides, rehearsal_notes, rehearsal_settings)

GPU_PROFILES = ["tinybox_green", "tinybox_red", "tinybox_8xMI300X", "dev_1gpu"]
CHANGED = set(REHEARSAL) | {"GPUS", "BS", "EVAL_BS", "EVAL_SAMPLES", "INIT_BENCHMARK_STEPS"}


@pytest.mark.parametrize("platform", GPU_PROFILES)
@pytest.mark.parametrize("cpus", [2, 16])
def test_rehearsal_keeps_the_platform_but_device_size_and_length(platform, cpus):
  plat = load_platform(platform_path(REPO, platform))
  got, notes = rehearsal_settings(plat, cpus=cpus)
  for k, v in plat.items():                        # FREE_INTERMEDIATE, DEFAULT_FLOAT, INIT_PROCESS, PARALLEL, ...
    if k not in CHANGED: assert got[k] == v, k
  gpus = min(plat.get("GPUS", 1), cpus)
  assert got["DEV"] == "CPU" and got["GPUS"] == gpus and got["BEAM"] == 0 and got["SUBMISSION_DIVISION"] == "open"
  assert got["BS"] == PER_DEVICE_BATCH * gpus
  # the platform's eval rows a device (at most MAX_EVAL_PER_DEVICE) on each CPU device, one batch an eval
  per_device = {"tinybox_green": 15, "tinybox_red": 15, "tinybox_8xMI300X": MAX_EVAL_PER_DEVICE, "dev_1gpu": 8}[platform]
  assert got["EVAL_BS"] == got["EVAL_SAMPLES"] == per_device * gpus
  # the INIT phase's steps at most MAX_INIT_STEPS (BEAM 0 searches nothing): 10 -> 3, dev_1gpu's 3 kept
  assert got["INIT_BENCHMARK_STEPS"] == min(plat["INIT_BENCHMARK_STEPS"], MAX_INIT_STEPS) == 3
  hp = resolve(got, seed=0, eval_examples=10000)
  assert hp.optimizer.train_steps // hp.eval.step_freq >= 3   # at least three evals
  assert hp.float_type == ("half" if plat.get("DEFAULT_FLOAT") == "HALF" else "float32")
  said = " ".join(notes)
  assert (f"GPUS {plat.get('GPUS', 1)} -> {gpus} CPU devices" in said) == (gpus < plat.get("GPUS", 1))


def test_workflow_plans_the_rehearsal_beside_real_runs_without_the_checkpoint(tmp_path):
  r = snakemake(tmp_path, "--profile", str(REPO / "profiles/tinybox_green"), "-n", "--config",
                f"basedir={tmp_path / 'base'}", "platform=tinybox_green", "rehearse=true",
                configfile=REPO / "config/mlperf.yaml")
  out = r.stdout + r.stderr
  assert "results/tinybox_green-rehearsal/result_bert_0.log" in out
  assert "results/tinybox_green/result_bert_0.log" not in out
  assert "convert_init_weights" not in out                     # the demo's model size: a seeded random init
  res = re.search(r"rule train:.*?resources: ([^\n]*)", out, re.S).group(1)  # the rehearsal's, not the GPU box's 60 GB
  assert {"gpu=0", "runtime=30", "mem_mb=4000"} <= set(res.split(", ")), res
  assert "rehearsal: GPUS 6 -> " in out or "rehearsal: GPUS 6 as 6 CPU devices" in out


def test_red_rehearses_exactly_as_green():
  """tinybox_red differs from tinybox_green only in keys a CPU rehearsal at BEAM 0 does not read (the device, BEAM's
  search limits, the AMD driver's timeout) and its name: its rehearsal is green's computation, so it is not run twice."""
  red, green = (rehearsal_settings(load_platform(platform_path(REPO, p)), cpus=os.cpu_count())[0]
                for p in ("tinybox_red", "tinybox_green"))
  inert = {"SUBMISSION_PLATFORM", "BEAM_UOPS_MAX", "HCQDEV_WAIT_TIMEOUT_MS", "DRESS_TARGET"}  # the dress's GPU
  assert {k: v for k, v in red.items() if k not in inert} == {k: v for k, v in green.items() if k not in inert}

def _rehearsal_run(platform="tinybox_green", **over):
  plat = load_platform(platform_path(REPO, platform))
  settings, gpu_notes = rehearsal_settings(plat, cpus=2)
  run = resolve(settings, over, seed=0, eval_examples=10000)
  return plat, run, rehearsal_notes(plat, run) + gpu_notes


def test_notes_state_the_settings_the_run_really_has():
  _, run, notes = _rehearsal_run(TRAIN_STEPS=20, EVAL_STEP_FREQ=5, TARGET=0.001)
  assert run.optimizer.train_steps == 20 and run.submission.division == "open" and run.submission.rehearsal
  said = notes[0]
  assert "20 steps with an eval every 5" in said and "target 0.001" in said and "division open" in said
  assert "12 steps" not in said and "GPUS 6 -> 2 CPU devices" in notes[1]


def test_a_rehearsal_is_never_closed():
  check_overrides({"SUBMISSION_DIVISION": "open", "TARGET": 0.001}, rehearse=True)
  check_overrides({"SUBMISSION_DIVISION": "closed"}, rehearse=False)
  with pytest.raises(UserError, match="never a closed-division result"):
    check_overrides({"SUBMISSION_DIVISION": "closed", "TARGET": 0.001}, rehearse=True)
  with pytest.raises(UserError, match="set by rehearse=true alone"):
    check_overrides({"REHEARSAL": False}, rehearse=True)


def test_workflow_refuses_a_closed_rehearsal_at_planning(tmp_path):
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "rehearse=true",
                "train={SUBMISSION_DIVISION: closed, TARGET: 0.001}", check=False)
  out = r.stdout + r.stderr
  lines = [l for l in out.splitlines() if "SUBMISSION_DIVISION" in l and "Command" not in l]
  assert r.returncode != 0 and len(lines) == 1 and "never a closed-division result" in lines[0], out
  assert "rule train" not in out


def test_the_rehearsal_log_says_so_and_passes_the_compliance_checker(tmp_path):
  """The log written by the project's ResultLog with a rehearsal's settings: its `rehearsal` line, then the checker."""
  _, run, _ = _rehearsal_run()
  path = tmp_path / "result_bert_0.log"
  with ResultLog(path, echo=False) as log:
    log.init_header(run.submission, cache_cleared=True)
    log.init_stop()
    log.run_header(run, 128, 20)
    gbs = run.global_batch_size
    log.epoch_start(0)
    for step in range(4, 13, 4):
      log.block_start((step - 4) * gbs, step - 4)
      log.block_stop(step, 4)
      log.eval_start(step * gbs, step)
      log.eval_stop(step * gbs, step, run.eval.logged_samples)
      log.eval_accuracy(0.1 * step / 4, step * gbs)
    log.epoch_stop(12 * gbs)
    log.run_stop(True, 12 * gbs)
  [line] = [l for l in path.read_text().splitlines() if '"key": "rehearsal"' in l]
  assert line.startswith(":::MLLOG") and "tinybox_green rehearsed on the CPU: not a submission" in line
  ok, msgs = compliance_check(path)
  assert ok, msgs
  lg = read_log(path)
  assert lg.value(REHEARSAL_KEY) and lg.division == "open"


def test_notes_name_every_setting_not_the_platforms():
  """The rehearsal's own changes (learning rate, warmup) and the `train:` overrides (beta) are named, each with the
  platform's value and the run's: every setting not the platform's, derived ones included."""
  _, _, notes = _rehearsal_run(OPT_LAMB_BETA_1=0.8, OPT_LAMB_BETA_2=0.99)
  said = notes[0].split("every setting not the platform's: ", 1)[1]
  for change in ("OPT_BASE_LEARNING_RATE 0.000169443 -> 0.01", "NUM_WARMUP_STEPS 1 -> 2", "OPT_LAMB_BETA_1 0.9 -> 0.8",
                 "OPT_LAMB_BETA_2 0.999 -> 0.99", "BEAM 8 -> 0", "BS 90 -> 8", "GLOBAL_BATCH_SIZE 90 -> 8"):
    assert change in said, (change, said)
  assert "FREE_INTERMEDIATE" not in said and said.endswith("; every other setting is the platform's")

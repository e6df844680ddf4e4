"""rehearse=true: each GPU platform's submission path on the CPU (two processes, HALF, data parallel on CPU devices,
FREE_INTERMEDIATE, three evals, MLPerf logging), before the first GPU hour.

tinybox_green is rehearsed by a real `snakemake all --config platform=tinybox_green rehearse=true` on the demo data,
then audited as a user would. tinybox_8xMI300X and dev_1gpu, and tinybox_green in fp32, run the train rule's own
function (phases.train_job: the INIT and RUN processes) with the settings the workflow resolves for them, on that
run's demo shards: the rest of the DAG is the same for every platform. tinybox_red's rehearsal settings are green's
but for keys a CPU at BEAM 0 does not read (tests/train/test_rehearsal_settings.py), so its run would repeat green's. Each run's losses must go on where
they were after every eval (no step after an eval more than 1 % above the step before it: the broken
FREE_INTERMEDIATE restarted from zero weights, 11.02, or diverged), end below where they started, and its log must
pass mlperf-logging's compliance checker. HALF and fp32 of the same platform agree within HALF_FP32_BAND.
The platforms clear tinygrad's kernel cache (CACHE_CLEAR): these runs get a cache file of their own (CACHEDB).
"""
from __future__ import annotations
import json, os, re, shutil, subprocess, sys
from pathlib import Path

import pytest
import yaml

from workflow_helpers import REPO, snakemake, write_config
from mlperf_bert.constants import platform_path
from mlperf_bert.audit.mlperf_tools import compliance_check
from mlperf_bert.audit.report import step_records
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.inputs import RunInputs
from mlperf_bert.train.phases import train_job
from mlperf_bert.train.rehearsal import rehearsal_settings

pytestmark = pytest.mark.slow

# the largest difference of a loss between the HALF and the fp32 rehearsal of one platform over its 12 steps: the
# losses are printed to 0.01, fp16 holds a loss of 11 to 0.008 and the casts follow tinygrad's (docs/parity.md row 5);
# measured on tinybox_green on 2026-12-01: 0.01 at most (11.03 ... 10.89 against 11.03 ... 10.88)
HALF_FP32_BAND = 0.05
TOPICS = 8
TRAIN_OVERRIDE = ("train={EVAL_STEP_FREQ: 4}",)


def losses(log_text: str) -> list[float]:
  seen = {r["step"]: r["loss"] for r in step_records(log_text.splitlines())}
  return [seen[k] for k in sorted(seen)]


def check_trains(ls: list[float], eval_every: int = 4):
  assert len(ls) == 12, ls
  for s in range(eval_every, len(ls), eval_every):            # the step right after each eval
    assert ls[s] <= ls[s - 1] * 1.01, (s, ls)
  assert ls[-1] < ls[0], ls


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
  old = os.environ.get("CACHEDB")
  os.environ["CACHEDB"] = str(tmp_path_factory.mktemp("tinygrad-cache") / "cache.db")
  yield
  if old is None: os.environ.pop("CACHEDB", None)
  else: os.environ["CACHEDB"] = old


@pytest.fixture(scope="module")
def green(tmp_path_factory, cache):
  wd = tmp_path_factory.mktemp("rehearse")
  shared = tmp_path_factory.mktemp("shared")
  shutil.copy2(REPO / "resources/demo/eval.md5", shared / "eval.md5")
  cfg = write_config(wd / "config.yaml", Path("base"), eval_md5=str(shared / "eval.md5"))
  # train={EVAL_STEP_FREQ: 4} is the rehearsal's own value (the same run): Snakemake hands it over as text ('4'),
  # which the workflow records and the audit rebuilds typed alike (config.typed_config)
  snakemake(wd, "--cores", "2", "all", "--config", "platform=tinybox_green", "rehearse=true", *TRAIN_OVERRIDE,
            configfile=cfg, timeout=1800)
  return wd, cfg


def test_green_rehearsal_runs_the_dag_trains_through_evals_and_audits(green):
  wd, cfg = green
  base = wd / "base"
  log = base / "results/tinybox_green-rehearsal/result_bert_0.log"
  job_log = (base / "logs/train/tinybox_green-rehearsal/seed_0.log").read_text()
  assert "rehearsal: GPUS 6 -> " in job_log or "rehearsal: GPUS 6 as 6" in job_log
  assert "INIT phase: process" in job_log and "RUN phase: process" in job_log    # two processes, as the platform
  check_trains(losses(job_log))
  # the run-time knobs reach the job (a param Snakemake does not compare): the record names the platform's GPU target,
  # which the audit's roofline reads; the compared settings hold no knob
  rec = json.loads(log.with_name("result_bert_0.train.json").read_text())
  assert rec["machine"]["gpu_target"] == "CUDA:sm_89" and "DRESS_TARGET" not in rec["settings"], rec["machine"]
  text = log.read_text()
  assert text.count('"key": "eval_accuracy"') == 3
  assert '"submission_division", "value": "open"' in text and '"submission_platform", "value": "tinybox_green"' in text
  ok, out = compliance_check(log)
  assert ok, out
  assert (base / "report/tinybox_green-rehearsal/run_0.png").is_file()
  # the least coverage: one shard, one eval batch and one training segment of the multi-device run (bit-exact on
  # 2 CPU devices as on one), however long
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "audit", str(base), "--workdir", str(wd), "--configfile",
                      str(cfg), "--config", "platform=tinybox_green", "rehearse=true", *TRAIN_OVERRIDE,
                      "--reexecute-budget", "1%"], capture_output=True, text=True, timeout=900, cwd=wd)
  assert "Traceback" not in p.stdout + p.stderr
  assert p.returncode == 0, p.stdout + p.stderr
  assert not [l for l in p.stdout.splitlines() if l.startswith("FAIL")], p.stdout
  assert re.search(r"PASS\s+re-execution\s+results/tinybox_green-rehearsal/result_bert_0\.log\s+1 of 3 training "
                   r"segments \(drawn with seed \d+; steps (0-4|4-8|8-12)\) trained again .*: bit-exact", p.stdout), p.stdout
  # its logged time holds the CPU seconds the segment takes here
  assert re.search(r"PASS\s+time\s+results/tinybox_green-rehearsal/result_bert_0\.log\s+every window of its logged "
                   r"times holds its floor", p.stdout), p.stdout


def _rehearse_with_train_job(wd: Path, platform: str, tmp: Path, **over) -> list[float]:
  """The train rule's function with the settings the workflow resolves for `platform` under rehearse=true."""
  base = wd / "base"
  settings, _ = rehearsal_settings(load_platform(platform_path(REPO, platform)))
  hp = resolve(settings, over, seed=0, eval_examples=10000)
  out, log = tmp / "result_bert_0.log", tmp / "job.log"
  train_job(hp, RunInputs.of(shards=sorted((base / "shards").glob("*.shard")), eval_set=base / "eval/eval.shard",
                             bert_config=base / "download/bert_config.json", log=out, work_log=tmp / "partial.log",
                             ckpt_dir=tmp / "ckpt", max_seq_length=128, max_predictions_per_seq=20), log=log)
  ok, msg = compliance_check(out)
  assert ok, msg
  return losses(log.read_text())


@pytest.mark.full  # a second rehearsal: green's (the fixture) runs the rehearsal path once
@pytest.mark.parametrize("platform", ["tinybox_8xMI300X", "dev_1gpu"])
def test_other_platforms_rehearse(green, tmp_path, platform):
  check_trains(_rehearse_with_train_job(green[0], platform, tmp_path))


@pytest.mark.full  # a second rehearsal: green's (the fixture) runs the rehearsal path once
def test_half_and_fp32_rehearsals_agree(green, tmp_path):
  half = losses((green[0] / "base/logs/train/tinybox_green-rehearsal/seed_0.log").read_text())
  fp32 = _rehearse_with_train_job(green[0], "tinybox_green", tmp_path, DEFAULT_FLOAT="FLOAT32", SUM_DTYPE=None)
  check_trains(fp32)
  assert max(abs(a - b) for a, b in zip(half, fp32)) <= HALF_FP32_BAND, (half, fp32)

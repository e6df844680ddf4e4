"""INIT and RUN phases (train/run.py `phase`, train/phases.py): tinygrad's run_and_time.sh runs them as two
processes appending to one log; INIT_PROCESS separate does the same. Real runs of the tiny BERT of test_train.py,
real child processes, mlperf-logging's compliance checker; nothing mocked."""
import os, re

import pytest

from mlperf_bert.audit.mlperf_tools import compliance_check
from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import resolve, rule_params
from mlperf_bert.train.phases import train_job
from mlperf_bert.mlperf_log import event_keys
from mlperf_bert.train.inputs import RunInputs
from mlperf_bert.train.resume import list_checkpoints
from mlperf_bert.train.settings import Settings
from test_train import PRED, SEQ, cpu_kernels, data, make_run  # noqa: F401  (data: the tiny shards, a module-scoped fixture; cpu_kernels: autouse)

SETTINGS = dict(DEV="CPU", BS=4, EVAL_BS=8, OPT_BASE_LEARNING_RATE=0.01, NUM_WARMUP_STEPS=3, TRAIN_STEPS=8,
                EVAL_STEP_FREQ=4, SAVE_CKPT_FREQ=4, KEEP_CKPT_AMOUNT=2, TARGET=0.99, EVAL_SAMPLES=16, BERT_LAYERS=1,
                INIT_BENCHMARK_STEPS=0, SUBMISSION_PLATFORM="test_cpu", SUBMISSION_DIVISION="open",
                CACHE_CLEAR=False, CKPT=True, PARALLEL=0)  # CACHE_CLEAR off: the kernel cache is shared on this machine


@pytest.fixture
def quick_children(monkeypatch):
  """Each new process lowers every kernel again (tinygrad's disk cache keeps only the compiled binaries): ~45 s for
  this tiny model on the loaded 2-core machine, ~15 s with NOOPT=1 (no kernel optimizations) and PARALLEL=0 (no
  compile worker pool). The children inherit them; these tests check processes and logs, not kernels."""
  monkeypatch.setenv("NOOPT", "1")
  monkeypatch.setenv("PARALLEL", "0")


def job(data, tmp_path, stop_after=None, **over):
  hp = rule_params(resolve({}, {**SETTINGS, **over}, seed=3, eval_examples=20))  # what the rule passes
  inputs = RunInputs.of(shards=data["shards"], eval_set=data["eval"], bert_config=data["config"],
                        log=tmp_path / "results" / "result_bert_3.log", work_log=tmp_path / "logs" / "partial.log",
                        ckpt_dir=tmp_path / "ckpt", max_seq_length=SEQ, max_predictions_per_seq=PRED)
  return train_job(Settings.from_dict(hp), inputs, log=tmp_path / "job.log", stop_after=stop_after)


def phase_segments(job_log: str, procs) -> dict[str, str]:
  """The job log's text from each child's first line (`train: phase X in process PID`) to the next one's."""
  marks = [job_log.index(f"train: phase {p.phase} in process {p.pid}\n") for p in procs]
  return {p.phase: job_log[a:b] for p, a, b in zip(procs, marks, marks[1:] + [len(job_log)])}


@pytest.mark.full  # test_train.py's Snakemake train rule, killed and rerun, resumes across the same two processes
def test_two_processes_then_a_rerun_resumes(data, tmp_path, quick_children):
  # INIT_PROCESS separate (the default): an INIT process, then a RUN process "killed" after step 5 (checkpoint: 4)
  first = job(data, tmp_path, stop_after=5)
  assert [p.phase for p in first] == ["init", "run"]
  assert len({p.pid for p in first} | {os.getpid()}) == 3          # two children, neither this process
  seg = phase_segments((tmp_path / "job.log").read_text(), first)
  for key in ("init_start", "init_stop"):
    assert f'"key": "{key}"' in seg["init"] and f'"key": "{key}"' not in seg["run"]
  for key in ("run_start", "eval_accuracy"):
    assert f'"key": "{key}"' in seg["run"] and f'"key": "{key}"' not in seg["init"]
  assert [s for s, _ in list_checkpoints(tmp_path / "ckpt")] == [4]
  assert not (tmp_path / "results" / "result_bert_3.log").exists()
  kept = (tmp_path / "logs" / "partial.log").read_text()

  # the rule rerun: the INIT process must keep the resumable work log and checkpoint; the RUN process continues
  second = job(data, tmp_path)
  assert len({p.pid for p in first + second}) == 4
  seg = phase_segments((tmp_path / "job.log").read_text(), second)
  assert '"key": "init_start"' not in seg["init"] and '"key": "run_start"' not in seg["run"]  # nothing logged twice
  assert "resuming from" in seg["run"] and "at step 4" in seg["run"] and '"key": "run_stop"' in seg["run"]
  result = tmp_path / "results" / "result_bert_3.log"
  assert result.read_text().startswith(kept)
  keys = event_keys(result.read_text())
  assert keys.count("init_start") == keys.count("init_stop") == keys.count("run_start") == 1
  assert keys.count("resume_from_init_weights") == 1 and keys.count("eval_accuracy") == 2
  assert keys.index("init_stop") < keys.index("run_start") and keys[-1] == "run_stop"
  ok, out = compliance_check(result)
  assert ok, out
  assert not (tmp_path / "logs" / "partial.log").exists() and list_checkpoints(tmp_path / "ckpt") == []


def test_run_phase_needs_an_init_log(data, tmp_path):
  run = make_run(data, tmp_path)
  with pytest.raises(UserError) as e:
    run.run(phase="run")
  msg = str(e.value)
  assert "\n" not in msg and str(tmp_path / "logs" / "partial.log") in msg
  assert "is missing" in msg and "ends with init_stop" in msg and "--phase init" in msg
  # an INIT phase cut short (killed before init_stop) is not enough either
  (tmp_path / "logs").mkdir(exist_ok=True)
  init_log = make_run(data, tmp_path / "i", INIT_BENCHMARK_STEPS=0)
  init_log.run(phase="init")
  lines = (tmp_path / "i" / "logs" / "partial.log").read_text().splitlines()
  (tmp_path / "logs" / "partial.log").write_text("\n".join(lines[:-1]) + "\n")
  with pytest.raises(UserError, match="but it ends with 'init_start'; run the INIT phase first"):
    run.run(phase="run")
  with pytest.raises(UserError, match="phase 'both'"):
    run.run(phase="both")


def test_a_failing_phase_is_one_line_and_leaves_no_result(data, tmp_path):
  bad = dict(data, shards=[tmp_path / "missing.shard"])
  with pytest.raises(UserError) as e:
    job(bad, tmp_path)
  msg = str(e.value)
  assert "\n" not in msg and re.match(r"the INIT phase \(process \d+\) failed \(exit 2\): error: ", msg), msg
  assert "missing.shard" in msg and str(tmp_path / "job.log") in msg
  assert not (tmp_path / "results" / "result_bert_3.log").exists()
  assert "train: phase run" not in (tmp_path / "job.log").read_text()  # no RUN process after a failed INIT
  # the INIT process read the job's settings from its standard input (its error is the shard's); no file is left
  assert list((tmp_path / "logs").glob("*")) == []

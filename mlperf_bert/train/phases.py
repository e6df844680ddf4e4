"""The train rule's job: the INIT and RUN phases in two processes, as tinygrad's run_and_time.sh, or in one.

tinygrad's v5.1 run_and_time.sh starts examples/mlperf/model_train.py twice, appending to one log:

    BENCHMARK=10 INITMLPERF=1 BERT_LAYERS=2 python3 examples/mlperf/model_train.py   # init_start .. init_stop
    PARALLEL=0 RUNMLPERF=1 python3 examples/mlperf/model_train.py                    # run_start .. run_stop

(tinybox_red unloads the GPU driver before the first). The INIT process fills tinygrad's kernel disk cache; the RUN
process shares nothing else with it: it imports tinygrad afresh and captures its JIT from the cached kernels.

The platform key INIT_PROCESS chooses: `separate` (tinygrad's; the default) runs `python -m mlperf_bert train
--phase init`, then `--phase run`, each a new process with the job's resolved settings (JSON on its standard input,
`--settings -`: read back as they are, not resolved again; no file, so a killed job leaves none behind), which
exports their tinygrad environment itself, its output appended to the job's log; `same` runs both phases in this
process (TrainRun.run(phase="all")), after exporting the settings' tinygrad environment here
(environment.export_tinygrad_env: once a process, in the process that imports tinygrad). Nothing else here imports
tinygrad.
"""
from __future__ import annotations
import ctypes, dataclasses, os, select, signal, subprocess, sys, time
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import FULL
from mlperf_bert.train.environment import export_tinygrad_env
from mlperf_bert.train.footprint import check_train_space
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.inputs import RunInputs
from mlperf_bert.train.settings import Settings, read_json, to_json

PACKAGE_PARENT = Path(__file__).resolve().parents[2]   # the folder that holds mlperf_bert/ (for the children)


@dataclasses.dataclass
class PhaseProcess:
  phase: str      # init | run
  pid: int
  seconds: float  # wall time of the process, start to exit


def command_settings(platform_file, overrides: dict[str, Any] | None, seed: int | None, eval_set,
                     settings_file=None) -> Settings:
  """The settings of `python -m mlperf_bert train`: a platform file with its --set overrides and --seed (default 0),
  resolved here, once; or --settings (a file, or - for standard input: what train_job hands its processes), the
  resolved settings read as they are (resolve is not called again) and so refused beside --platform-file, --set
  or --seed."""
  if settings_file is None:
    if platform_file is None: raise UserError("train: pass --platform-file (platforms/<name>/platform.yaml) or "
                                              "--settings (resolved settings as JSON: a file, or - for standard input)")
    from mlperf_bert.data.shards import Shard
    return resolve(load_platform(platform_file), overrides, seed=0 if seed is None else seed,
                   eval_examples=len(Shard(eval_set)), where="--set")
  given = [f for f, v in (("--platform-file", platform_file), ("--set", overrides), ("--seed", seed)) if v is not None]
  if given: raise UserError(f"--settings {settings_file} holds resolved settings, used as they are; drop "
                            f"{', '.join(given)} (or drop --settings and resolve a platform file)")
  return read_json(settings_file)


def _die_with_parent():
  """In the child, before exec: SIGTERM when the job's process dies (Linux), so no orphan writes the work log."""
  try: ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError): pass


def _failure_detail(tail: bytes, log: Path | None) -> str:
  """The child's own one-line error (or its last line) from the end of its output."""
  if log is None: return "its output is above"
  lines = [l.strip() for l in tail.decode(errors="replace").replace("\r", "\n").splitlines() if l.strip()]
  errors = [l for l in lines if l.startswith("error: ")]
  last = (errors or lines or ["(no output)"])[-1][:300]
  return f"{last} (its output: {log})"


TAIL_BYTES = 1 << 16  # the end of a child's output kept in memory, for its error line


def _copy_output(p: subprocess.Popen, log: Path) -> tuple[bytes, int]:
  """Append what the child `p` writes to its stdout pipe to `log` as it comes, until the pipe is closed or, once the
  child has exited, is silent for a second (a grandchild may hold it); a write the disk refuses is dropped, not fatal
  (the child's own error line is still read). Returns the output's last TAIL_BYTES and the bytes dropped."""
  tail, lost, src = b"", 0, p.stdout.fileno()
  fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
  try:
    while True:
      if not select.select([src], [], [], 1.0)[0]:
        if p.poll() is not None: break
        continue
      chunk = os.read(src, 1 << 16)
      if not chunk: break
      tail = (tail + chunk)[-TAIL_BYTES:]
      try: os.write(fd, chunk)
      except OSError as e:
        if e.errno not in FULL: raise
        lost += len(chunk)
  finally:
    os.close(fd)
  return tail, lost


def run_phase(phase: str, cmd: list[str], env: dict[str, str], log: Path | None, stdin: str | None = None
              ) -> PhaseProcess:
  """Run one phase's process to its end, `stdin` (text) on its standard input, its stdout and stderr appended to
  `log` through this process (None: this process's own; a full disk drops the log's lines, never the child's error
  line); a non-zero exit is a one-line UserError naming the phase, the child's error line and the log. Interrupted
  (Ctrl-C, the job stopped), it gives the child (which usually got the same signal through its process group) 2 s
  to stop, then sends it SIGINT (the resumable way: checkpoints are written atomically) and after 30 s SIGKILL.
  Killed itself, its child gets SIGTERM (Linux: PR_SET_PDEATHSIG), so no orphan goes on writing the work log."""
  sys.stdout.flush(); sys.stderr.flush()
  if log is not None: log.parent.mkdir(parents=True, exist_ok=True)
  print(f"train: {phase.upper()} phase: a new process, python -m mlperf_bert train --phase {phase} ...", flush=True)
  st, tail, lost = time.perf_counter(), b"", 0
  p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if log else None,
                       stderr=subprocess.STDOUT if log else None, stdin=subprocess.PIPE if stdin is not None else None,
                       preexec_fn=_die_with_parent if sys.platform == "linux" else None)
  try:
    try:
      if stdin is not None:
        try: p.stdin.write(stdin.encode())
        except BrokenPipeError: pass  # the child ended before reading: its exit code and output say why
        finally: p.stdin.close()
      if log is not None: tail, lost = _copy_output(p, log)
      rc = p.wait()
    except BaseException:  # the child mostly got the same signal; else it is asked, then made, to stop
      for sig, secs in ((None, 2), (signal.SIGINT, 30), (signal.SIGKILL, None)):
        if sig is not None and p.poll() is None: p.send_signal(sig)
        try: p.wait(timeout=secs); break
        except subprocess.TimeoutExpired: pass
      raise
  finally:
    if p.stdout is not None: p.stdout.close()
  secs = time.perf_counter() - st
  if lost: print(f"warning: {lost} bytes of the {phase.upper()} process's output are missing from {log}: its disk was "
                 "full", flush=True)
  print(f"train: {phase.upper()} phase: process {p.pid} exited with {rc} after {secs:.1f} s", flush=True)
  if rc != 0:
    how = f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"failed (exit {rc})"
    raise UserError(f"the {phase.upper()} phase (process {p.pid}) {how}: {_failure_detail(tail, log)}")
  return PhaseProcess(phase, p.pid, secs)


def train_job(s: Settings, inputs: RunInputs, *, log=None, stop_after: int | None = None
              ) -> list[PhaseProcess] | Any:
  """The train rule: train with resolved settings `s` on `inputs` and write the result log `inputs.log`.

  INIT_PROCESS separate: the INIT phase, then the RUN phase, each in a new process (`python -m mlperf_bert train
  --phase init|run --settings -`, which reads `s` back unresolved from its standard input; output appended to
  `log`); returns their PhaseProcess records. A failing phase is a one-line UserError; the result log is only ever
  written, whole, at the end of the RUN phase. A rerun after a killed RUN phase resumes: the INIT process keeps a
  resumable work log and checkpoint (TrainRun.run). INIT_PROCESS same: both phases in this process; returns
  TrainRun.run's RunResult. Call it before tinygrad is imported: the `same` branch exports the settings' tinygrad
  environment into this process first."""
  if inputs.space_check:  # before the INIT phase (hours of compiling on a GPU box): the run must fit
    check_train_space(s, inputs)
  if s.init.process == "same":  # resolve() checked it is separate or same
    for note in export_tinygrad_env(s, os.environ): print(note, flush=True)  # before tinygrad is imported
    from mlperf_bert.train.run import TrainRun
    res = TrainRun(s, inputs).run(stop_after=stop_after, phase="all")
    print(res.summary())
    return res
  paths = [str(PACKAGE_PARENT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
  # each child exports the settings' tinygrad environment itself (`python -m mlperf_bert train`), once
  env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
  env.pop("BENCHMARK", None)  # the CLI's --benchmark default; the phases never benchmark
  log = Path(log) if log is not None else None
  settings = to_json(s)
  cmd = [sys.executable, "-m", "mlperf_bert", "train", "--settings", "-", *inputs.argv(), "--benchmark", "0"]
  done = [run_phase("init", cmd + ["--phase", "init"], env, log, stdin=settings)]
  stop = ["--stop-after", str(stop_after)] if stop_after is not None else []
  done.append(run_phase("run", cmd + ["--phase", "run"] + stop, env, log, stdin=settings))
  return done

"""Train BERT with tinygrad as tinygrad's MLPerf submission does, writing an MLPerf result log.

    run = TrainRun(settings, RunInputs.of(shards=..., eval_set=..., bert_config=..., log=..., ckpt_dir=...,
                                          max_seq_length=128, max_predictions_per_seq=20))
    result = run.run()        # or run.run(phase="init") then, in a new process, run.run(phase="run"); run.benchmark(n)

Phases (as train_bert with INITMLPERF then RUNMLPERF):
  INIT  init_start; a throw-away model of INIT_BERT_LAYERS layers compiles the jitted train and eval steps on
        fake data for INIT_BENCHMARK_STEPS steps (kernels land in tinygrad's cache); init_stop.
  RUN   run_start, seed, hyperparameters; the real model (seeded init or the initial weights) trains on the
        shard stream; every EVAL_STEP_FREQ steps (and at TRAIN_STEPS) the eval set's masked-LM accuracy is
        measured; reaching TARGET stops with run_stop success, TRAIN_STEPS without it with run_stop aborted.
`run(phase="all")` runs both in this process; tinygrad's run_and_time.sh runs them as two processes, which
`phase="init"` (a fresh work log ending with init_stop) and then `phase="run"` (appends to it) reproduce; the
platform key INIT_PROCESS chooses for the train rule (mlperf_bert/train/phases.py).
Resume: with CKPT on (off by default, as train_bert), every SAVE_CKPT_FREQ steps a checkpoint (train/resume.py)
goes to the checkpoint folder, keeping KEEP_CKPT_AMOUNT. A new run with the same settings continues from the newest
one, appending to the kept work log (an INIT phase leaves such a log and checkpoint alone and only compiles);
checkpoints of other settings are removed.
The result log appears only when the run finished; until then (or after an abort) it is the work log.
A NaN/inf loss stops the run: run_stop aborted in the work log and a TrainingDiverged error (exit non-zero).
The RUN phase is one loop (TrainRun._run_phase): its step is train/step.py's `timed_step`, its eval and metric
train/evaluation.py's `eval_at`; the BENCHMARK mode is train/benchmark.py's.
"""
from __future__ import annotations
import dataclasses, hashlib, json, math, shutil, time
from pathlib import Path
from typing import Callable

import numpy as np
from tinygrad import Tensor
from tinygrad.helpers import Context
from tqdm import tqdm

from mlperf_bert.errors import UserError
from mlperf_bert.data.loader import TrainLoader, open_shards
from mlperf_bert.mlperf_log import event_keys
from mlperf_bert.train.benchmark import benchmark
from mlperf_bert.train.evaluation import eval_at
from mlperf_bert.train.evidence import save_final_weights, weights_path
from mlperf_bert.train.footprint import check_train_space
from mlperf_bert.train.hparams import fingerprinted
from mlperf_bert.train.init_weights import check_weight_shapes
from mlperf_bert.train.inputs import RunInputs, check_train_inputs
from mlperf_bert.train.mllog import ResultLog
from mlperf_bert.train.record import publish_result, record_path
from mlperf_bert.train.resume import find_resume, list_checkpoints, load_state, save_state
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.states import KeptStates, states_path
from mlperf_bert.train.step import timed_step
from mlperf_bert.train.trainer import ModelTrainer, devices_for, fake_batch, model_config

PHASES = ("all", "init", "run")


class TrainingDiverged(UserError):
  """The loss became NaN or infinite."""


def clear_kernel_cache(enabled: bool) -> bool:
  """CACHE_CLEAR: empty tinygrad's disk cache of compiled kernels (CACHEDB, ~/.cache/tinygrad/cache.db) as
  train_bert's INIT phase does before it logs cache_clear; returns whether it did (the value logged)."""
  if not enabled: return False
  from tinygrad.helpers import diskcache_clear
  diskcache_clear()
  return True


@dataclasses.dataclass
class RunResult:
  status: str              # success | aborted | stopped (interrupted on purpose, no result log) | init (phase init done)
  steps: int
  samples: int
  accuracies: list[tuple[int, float]]
  losses: list[float]
  log_path: Path | None
  step_ms: float = float("nan")

  def summary(self) -> str:
    """The line the train command and the train rule print at the end."""
    return (f"training finished: status {self.status} after {self.steps} steps ({self.samples} samples), "
            f"eval accuracies {self.accuracies}, median step {self.step_ms:.1f} ms")


@dataclasses.dataclass(frozen=True)
class PhaseStart:
  """What this process's phase finds and does. `resume`: the checkpoint of these settings to continue from (and its
  metadata). `kept`: a resumable run's work log (it has run_start) is continued, so no header is logged again.
  `new_log`: the work log starts afresh with init_start (a phase that is not "run" of a run that is not kept)."""
  resume: tuple[Path, dict] | None
  kept: bool
  new_log: bool


class TrainRun:
  def __init__(self, settings: Settings, inputs: RunInputs, *, devices: tuple[str, ...] | None = None,
               echo: bool = True, progress: bool = True):
    s = self.s = settings
    self.inputs = inputs
    self.seq, self.pred = inputs.max_seq_length, inputs.max_predictions_per_seq
    self.echo, self.progress = echo, progress
    self.devices = devices or devices_for(s.tinygrad.dev, s.gpus)
    if len(self.devices) != s.gpus:
      raise UserError(f"GPUS={s.gpus} but {len(self.devices)} devices given; make them agree")
    # validate every input before any work: shards, eval set, model config
    self.shards = open_shards(inputs.shards, self.seq, self.pred)
    self.eval_shard = open_shards([inputs.eval_set], self.seq, self.pred, what="eval set")[0]
    check_train_inputs(inputs.shards, inputs.eval_set, inputs.bert_config)  # not the eval set; vocab fits
    if len(self.eval_shard) < s.eval.samples:
      raise UserError(f"{inputs.eval_set}: the eval set has {len(self.eval_shard)} rows, fewer than EVAL_SAMPLES="
                      f"{s.eval.samples}; rebuild the eval set or lower EVAL_SAMPLES")
    self.cfg = model_config(inputs.bert_config, s.model)
    if inputs.init_weights is not None and not inputs.init_weights.is_file():
      raise UserError(f"{inputs.init_weights}: initial weights not found; run the convert_init_weights rule first")
    if inputs.init_weights is not None: check_weight_shapes(inputs.init_weights, self.cfg)  # before any compile
    self.last_eval: dict | None = None  # the last eval's batches (evaluation.eval_entry), for the train record
    self.kept = KeptStates(inputs.ckpt_dir / "states", s.checkpoint.evidence_freq)  # the state at each eval
    self.fingerprint = hashlib.sha256(json.dumps(
      {"hp": fingerprinted(s), "shards": [p.name for p in inputs.shards], "seq": self.seq, "pred": self.pred,
       "model": dataclasses.asdict(self.cfg),
       "init": inputs.init_weights.name if inputs.init_weights else None},  # names, not paths: a moved tree resumes
      sort_keys=True, default=str).encode()).hexdigest()

  def say(self, msg: str):
    if self.echo: tqdm.write(msg)

  # ---------------------------------------------------------------------------------------------------
  def _init_phase(self, log: ResultLog | None):
    """Compile the steps on fake data with a throw-away model of INIT_BERT_LAYERS layers (as train_bert's INIT)."""
    s = self.s
    if log: log.init_header(s.submission, cache_cleared=clear_kernel_cache(s.init.cache_clear))
    n = s.init.benchmark_steps
    if n > 0:
      st = time.perf_counter()
      cfg = dataclasses.replace(self.cfg, num_hidden_layers=min(s.init.bert_layers, self.cfg.num_hidden_layers))
      warm = ModelTrainer(cfg, s, self.devices, seed=s.seed, zero=True)
      rng = np.random.default_rng(0)
      for _ in range(n):
        loss, _, _ = warm.train(fake_batch(s.batch_size, self.seq, self.pred, self.cfg.vocab_size, rng))
        loss.item()
      fb = fake_batch(s.eval.batch_size, self.seq, self.pred, self.cfg.vocab_size, rng)
      for _ in range(min(n, 3)): warm.evaluate(fb, np.ones(s.eval.batch_size, np.float32))[0].item()
      del warm
      self.say(f"init: compiled {n} train steps of a {cfg.num_hidden_layers}-layer model in "
               f"{time.perf_counter() - st:.1f} s")
    if log: log.init_stop()

  def _build(self) -> ModelTrainer:
    Tensor.manual_seed(self.s.seed)
    return ModelTrainer(self.cfg, self.s, self.devices, seed=self.s.seed, init_weights=self.inputs.init_weights)

  # ---------------------------------------------------------------------------------------------------
  def _start(self, phase: str) -> PhaseStart:
    """Look at the checkpoints and the work log: resume or start afresh; the RUN phase alone needs an INIT phase's
    log (it ends with init_stop) or a resumable run's."""
    if phase not in PHASES: raise UserError(f"phase {phase!r}: use one of {', '.join(PHASES)}")
    work_log = self.inputs.work_log
    resume = find_resume(self.inputs.ckpt_dir, self.fingerprint, self.say)
    try: keys = event_keys(work_log.read_text(errors="replace"))
    except FileNotFoundError: keys = []
    kept = resume is not None and "run_start" in keys
    init_logged = bool(keys) and keys[-1] == "init_stop"
    if phase == "run" and not (kept or init_logged):
      found = "is missing" if not work_log.exists() else f"ends with {keys[-1]!r}" if keys else "has no MLPerf events"
      raise UserError(f"{work_log}: the RUN phase needs the work log of an INIT phase that ends with init_stop (or a "
                      f"resumable run's log with its checkpoint), but it {found}; run the INIT phase first (train "
                      f"--phase init with the same settings) or use --phase all")
    return PhaseStart(resume, kept, new_log=phase != "run" and not kept)

  def run(self, stop_after: int | None = None, on_step: Callable[[int, float], None] | None = None,
          phase: str = "all") -> RunResult:
    """Train to TARGET or TRAIN_STEPS; `stop_after` ends (status "stopped") after that many steps of this process.

    phase "all": the INIT then the RUN phase in this process. "init": the INIT phase alone (a fresh work log that
    ends with init_stop; status "init"). "run": the RUN phase alone, appended to the work log an INIT phase left (in
    another process: tinygrad's run_and_time.sh). A resumable run (a checkpoint of these settings and a work log
    with run_start) is continued in every phase: "init" and "all" only compile then, nothing is logged twice."""
    start = self._start(phase)
    if self.inputs.space_check:  # before anything is written: what the run writes to its end must fit
      check_train_space(self.s, self.inputs)
    if start.new_log: self.inputs.work_log.unlink(missing_ok=True)
    log = ResultLog(self.inputs.work_log, echo=self.echo, append=not start.new_log)
    try:
      if phase != "run":
        if start.kept:
          self.say(f"a resumable run: {self.inputs.work_log} and {start.resume[0]} are kept; the INIT phase "
                   "compiles, logs nothing")
        self._init_phase(log if start.new_log else None)
      if phase == "init": return RunResult("init", 0, 0, [], [], None)
      return self._run_phase(log, start, stop_after, on_step)
    finally:
      log.close()

  def _run_phase(self, log: ResultLog, start: PhaseStart, stop_after, on_step) -> RunResult:
    """The RUN phase, one loop: the header (unless a kept log has it) and the model (resumed or new); then a timed
    step after step (train/step.py), every EVAL_STEP_FREQ steps (and at TRAIN_STEPS) an eval (train/evaluation.py) that ends the run
    at TARGET, every SAVE_CKPT_FREQ steps a block and, under CKPT, a checkpoint; TRAIN_STEPS without TARGET ends it
    aborted, and `stop_after` steps of this process stop it resumably (no result log)."""
    s = self.s
    gbs, train_steps = s.global_batch_size, s.optimizer.train_steps
    if not start.kept: log.run_header(s, self.seq, self.pred)
    trainer = self._build()
    step, position = 0, 0
    if start.resume is not None:
      path, meta = start.resume
      load_state(trainer, path)
      step, position = int(meta["step"]), int(meta["position"])
      self.say(f"resuming from {path} at step {step} (sample {position})")
      log.event("resume_from_init_weights", None, step_num=step, samples_count=position)
    self.kept.reset(step if start.resume is not None else None, self.fingerprint)
    if not start.kept: log.epoch_start(step * gbs)
    accs: list[tuple[int, float]] = []
    losses: list[float] = []
    times: list[float] = []
    start_step, prev_ckpt_step, status = step, step, None
    cpu = (0.0, 0)  # CPU seconds of this process's train steps since the last kept state, and their number
    # PARALLEL: the v5.1 scripts run the RUN phase with PARALLEL=0 (the INIT phase keeps tinygrad's default)
    with Context(**({"PARALLEL": s.tinygrad.parallel} if s.tinygrad.parallel is not None else {})):
      bar = tqdm(total=train_steps, initial=step, disable=not self.progress, mininterval=5, unit="step")
      loader = TrainLoader(self.shards, s.batch_size, seed=s.seed, position=position, cycle_length=s.num_cpu_threads)
      try:
        batch_end, data = next(loader)  # the first batch, and the stream's position just after it
        while step < train_steps:
          if stop_after is not None and step - start_step >= stop_after:
            status = "stopped"; break
          c0 = time.process_time()
          t, (next_end, data) = timed_step(trainer, data, loader, step, self.devices, self.say)  # fetches the next
          cpu = (cpu[0] + time.process_time() - c0, cpu[1] + 1)  # the kept state's CPU seconds (train/states.py)
          # `position`: the stream just after the batch this step trained on (where a checkpoint resumes);
          # `batch_end`: just after the batch fetched for the next step
          position, batch_end = batch_end, next_end
          step += 1
          times.append(t.total_s)
          losses.append(t.loss)
          bar.update(1)
          if on_step: on_step(step, t.loss)
          if not math.isfinite(t.loss): self._diverged(log, step, t.loss)
          if step % s.eval.step_freq == 0 or step == train_steps:
            log.eval_start(step * gbs, step)
            acc, secs, self.last_eval = eval_at(trainer, step, self.eval_shard, s, self.devices)
            log.eval_stop(step * gbs, step, s.eval.logged_samples)
            log.eval_accuracy(acc, step * gbs)
            self.say(f"eval at step {step}: masked-LM accuracy {acc:.6f} over {s.eval.logged_samples} samples, "
                     f"metric {s.eval.metric} ({secs:.1f} s)")
            accs.append((step, acc))
            if self.kept.keep(trainer, eval_number=(step - 1) // s.eval.step_freq + 1,
                              last=acc >= s.eval.target or step == train_steps, step=step, position=position,
                              seed=s.seed, fingerprint=self.fingerprint, cpu=cpu):  # evidence of the steps
              cpu = (0.0, 0)
            if acc >= s.eval.target:
              self.say(f"target {s.eval.target} reached after {step * gbs} samples")
              log.epoch_stop(step * gbs)
              log.run_stop(True, step * gbs)
              status = "success"; break
          if step % s.checkpoint.save_freq == 0 and step < train_steps:
            if step > prev_ckpt_step: log.block_stop(step, step - prev_ckpt_step)
            if s.checkpoint.enabled:  # tinygrad saves only under CKPT
              saved = save_state(trainer, self.inputs.ckpt_dir, step=step, position=position, seed=s.seed,
                                 fingerprint=self.fingerprint, keep=s.checkpoint.keep)
              self.say(f"saved checkpoint {saved}")
            log.block_start(step * gbs, step)
            prev_ckpt_step = step
        if status is None:
          self.say(f"TRAIN_STEPS={train_steps} done without reaching TARGET {s.eval.target}: run_stop aborted")
          log.epoch_stop(step * gbs)
          log.run_stop(False, step * gbs)
          status = "aborted"
      finally:
        loader.close()
        bar.close()
      step_ms = float(np.median(times) * 1e3) if times else float("nan")
      if status == "stopped":
        return RunResult("stopped", step, step * gbs, accs, losses, None, step_ms)
      log.close()
      self._publish(status, accs, trainer)
      return RunResult(status, step, step * gbs, accs, losses, self.inputs.log, step_ms)

  def _diverged(self, log: ResultLog, step: int, loss: float):
    log.run_stop(False, step * self.s.global_batch_size, reason=f"loss {loss} at step {step}")
    raise TrainingDiverged(
      f"the loss became {loss} at step {step}: training stopped (run_stop aborted). The partial MLPerf log is kept "
      f"at {self.inputs.work_log}. Lower OPT_BASE_LEARNING_RATE, raise NUM_WARMUP_STEPS, or under fp16 lower "
      f"LOSS_SCALER; delete {self.inputs.ckpt_dir} to start over")

  def _publish(self, status: str, accs: list[tuple[int, float]], trainer: ModelTrainer):
    """The result log and, beside it, the train record of what this process read and wrote (train/record.py) with
    the final weights (train/evidence.py) and the last eval's batches (train/evaluation.py); the run is complete,
    so nothing is left to resume."""
    i = self.inputs
    weights = weights_path(i.log)  # written first: a log never stands without its record, nor a record without them
    final = save_final_weights(trainer, weights, record_path(i.log).parent) if self.last_eval else None
    states = states_path(i.log)
    try:
      kept = self.kept.publish(states, record_path(i.log).parent)
      publish_result(i.work_log, i.log, shards=self.shards, eval_shard=self.eval_shard, init_weights=i.init_weights,
                     bert_config=i.bert_config, settings=self.s, status=status, accuracies=accs,
                     final_weights=final, last_eval=self.last_eval, kept_states=kept)
    except BaseException:
      weights.unlink(missing_ok=True)
      shutil.rmtree(states, ignore_errors=True)
      raise
    i.work_log.unlink()
    for _, p in list_checkpoints(i.ckpt_dir): p.unlink()

  def benchmark(self, n: int) -> dict[str, float]:
    """BENCHMARK=n: n steps on real data from a fresh model; prints the estimated time to TRAIN_STEPS
    (train/benchmark.py)."""
    return benchmark(self._build, self.shards, self.s, n, self.devices, self.say)

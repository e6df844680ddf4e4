"""Write MLPerf Training result logs (`:::MLLOG {...}` lines) with mlperf-logging's mllog.

One `ResultLog` per run writes to its own file (a private `logging.Logger`, so several runs in one process never
share handlers) and, optionally, echoes each line to stdout. The keys and their order follow tinygrad's
train_bert: the INIT phase (submission_*, cache_clear, init_start, init_stop) then the RUN phase (run_start,
seed, hyperparameters, epoch/block/eval events, run_stop). Each line is appended whole or not at all: a write the
disk refuses (full, quota, size limit) is cut back to the line before and is fileio's one-line error, so a rerun
resumes from the checkpoint on an intact log (logging's own FileHandler would print a traceback and go on).
"""
from __future__ import annotations
import itertools, logging, os, sys
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import mllog
from mlperf_logging.mllog import constants as C

from mlperf_bert.fileio import write_error
from mlperf_bert.mlperf_log import REHEARSAL_KEY
from mlperf_bert.train.settings import Settings, SubmissionSettings

_ids = itertools.count()


class _WholeLines(logging.Handler):
  """Appends each record to `path` as one whole line; a refused write truncates the file back to the line before and
  raises (fileio.write_error's one line)."""
  def __init__(self, path: Path, append: bool):
    super().__init__()
    self.path = path
    self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if append else os.O_TRUNC), 0o666)

  def emit(self, record: logging.LogRecord) -> None:
    data = memoryview((self.format(record) + "\n").encode())
    size = os.fstat(self.fd).st_size
    try:
      while data:
        data = data[os.write(self.fd, data):]
    except OSError as e:
      try: os.ftruncate(self.fd, size)
      except OSError: pass
      raise (write_error(e, self.path) or e) from None

  def close(self) -> None:
    if self.fd >= 0:
      os.close(self.fd)
      self.fd = -1
    super().close()


class _Echo(logging.StreamHandler):
  """The echo to stdout: best effort (a job log on a full disk loses the line, the result log keeps it)."""
  def handleError(self, record: logging.LogRecord) -> None:
    pass


class ResultLog:
  def __init__(self, path: str | os.PathLike, echo: bool = True, append: bool = False):
    self.path = Path(path)
    try:
      self.path.parent.mkdir(parents=True, exist_ok=True)
      lines = _WholeLines(self.path, append)
    except OSError as e:
      raise (write_error(e, self.path) or e) from None
    self._logger = logging.getLogger(f"mlperf_bert.result.{os.getpid()}.{next(_ids)}")
    self._logger.propagate = False
    self._logger.setLevel(logging.INFO)
    self._handlers: list[logging.Handler] = [lines]
    if echo: self._handlers.append(_Echo(sys.stdout))
    for h in self._handlers:
      h.setLevel(logging.INFO)
      self._logger.addHandler(h)
    self.ml = mllog.MLLogger(logger=self._logger, default_stack_offset=2,
                             root_dir=str(Path(__file__).resolve().parents[2]))

  # ---- generic ----
  # _depth: stack frames between the caller to record (file/lineno metadata) and mllog
  def event(self, key: str, value: Any = None, _depth: int = 2, **metadata):
    self.ml.event(key=key, value=value, metadata=metadata or None, stack_offset=_depth)

  def start(self, key: str, value: Any = None, _depth: int = 2, **metadata):
    self.ml.start(key=key, value=value, metadata=metadata or None, stack_offset=_depth)

  def end(self, key: str, value: Any = None, _depth: int = 2, **metadata):
    self.ml.end(key=key, value=value, metadata=metadata or None, stack_offset=_depth)

  def close(self):
    for h in self._handlers:
      h.flush(); h.close(); self._logger.removeHandler(h)
    self._handlers = []

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()

  # ---- phases ----
  def _event(self, key, value=None, **md): self.event(key, value, _depth=4, **md)
  def _start(self, key, value=None, **md): self.start(key, value, _depth=4, **md)
  def _end(self, key, value=None, **md): self.end(key, value, _depth=4, **md)

  def init_header(self, sub: SubmissionSettings, cache_cleared: bool = True):
    """Submission keys, cache_clear (whether tinygrad's kernel cache was cleared) and init_start."""
    self._event(C.SUBMISSION_ORG, sub.org)
    self._event(C.SUBMISSION_PLATFORM, sub.platform)
    self._event(C.SUBMISSION_DIVISION, sub.division)
    self._event(C.SUBMISSION_STATUS, sub.status)
    if sub.rehearsal:  # rehearse=true: the audit reads this line ("rehearsal: not a submission")
      self._event(REHEARSAL_KEY, f"{sub.platform} rehearsed on the CPU: not a submission")
    self._event(C.SUBMISSION_BENCHMARK, C.BERT)
    self._event(C.CACHE_CLEAR, bool(cache_cleared))
    self._start(C.INIT_START)

  def init_stop(self): self._event(C.INIT_STOP)

  def run_header(self, s: Settings, max_seq_length: int, max_predictions_per_seq: int):
    """run_start, seed and every hyperparameter the BERT rules ask for."""
    o = s.optimizer
    self._start(C.RUN_START)
    self._event(C.SEED, s.seed)
    self._event(C.GLOBAL_BATCH_SIZE, s.global_batch_size)
    self._event(C.MAX_SEQUENCE_LENGTH, max_seq_length)
    self._event("max_predictions_per_seq", max_predictions_per_seq)
    self._event(C.OPT_NAME, "LAMB")
    self._event(C.OPT_BASE_LR, o.base_lr)
    self._event(C.OPT_LAMB_WEIGHT_DECAY, o.weight_decay)
    self._event(C.OPT_LAMB_BETA_1, o.beta_1)
    self._event(C.OPT_LAMB_BETA_2, o.beta_2)
    self._event(C.OPT_LAMB_LR_DECAY_POLY_POWER, o.poly_power)
    self._event(C.OPT_LAMB_EPSILON, o.epsilon)
    self._event(C.OPT_LR_WARMUP_STEPS, o.warmup_steps)
    self._event(C.NUM_WARMUP_STEPS, o.warmup_steps)
    self._event("start_warmup_step", 0)
    self._event("opt_learning_rate_training_steps", o.train_steps)
    self._event(C.GRADIENT_ACCUMULATION_STEPS, o.gradient_acc_steps)
    self._event(C.EVAL_SAMPLES, s.eval.logged_samples)
    # how eval_accuracy is computed (EVAL_METRIC, docs/parity.md): tinygrad's per-batch mean or the pooled one
    self._event("eval_metric", s.eval.metric)
    self._event(C.TRAIN_SAMPLES, s.global_batch_size * o.train_steps)

  def epoch_start(self, samples: int): self._start(C.EPOCH_START, samples, epoch_num=samples)
  def epoch_stop(self, samples: int): self._end(C.EPOCH_STOP, samples, epoch_num=samples)

  def block_start(self, samples: int, step: int):
    self._start(C.BLOCK_START, None, first_epoch_num=1, epoch_num=1, epoch_count=1, samples_count=samples,
               step_num=step, first_step_num=step + 1)

  def block_stop(self, step: int, step_count: int):
    self._end(C.BLOCK_STOP, None, first_epoch_num=1, epoch_num=1, first_step_num=step, step_num=step,
             step_count=step_count)

  def eval_start(self, samples: int, step: int): self._start(C.EVAL_START, None, epoch_num=samples, step_num=step)

  def eval_stop(self, samples: int, step: int, eval_samples: int):
    self._end(C.EVAL_STOP, samples, epoch_num=samples, epoch_count=samples, step_num=step, samples_count=eval_samples)

  def eval_accuracy(self, acc: float, samples: int):
    self._event(C.EVAL_ACCURACY, float(acc), epoch_num=samples, masked_lm_accuracy=float(acc))

  def run_stop(self, success: bool, samples: int | None = None, **extra):
    self._end(C.RUN_STOP, None, status=C.SUCCESS if success else C.ABORTED, **({"epoch_num": samples} if samples
             is not None else {}), **extra)

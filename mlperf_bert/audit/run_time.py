"""A result log's run, read from what an edit of its times cannot dodge: the samples it trained.

    evals = log_evals(log, global_bs)      # each eval: its events, the samples trained before it, its step
    step_mismatches(evals, global_bs)      # the eval events whose step_num is not their samples / global_bs
    interval_steps(evals)                  # the step time (ms) of each eval interval, an eval_stop to the next eval_start
    warmup_s(log, global_bs)               # what the run spent beyond its steps and evals (tools/record_published_runs.py)

MLPerf BERT logs count training in samples: each eval's `epoch_num` (eval_start's metadata, and eval_accuracy's,
which mlperf-logging's closed_bert.yaml requires) is the samples trained before it. So the steps trained before an
eval are epoch_num / global_batch_size, whatever the events' `step_num` say (a trainer's own key: tinygrad's logs
carry it; none of mlperf-logging's checkers reads it). A step_num that is not those steps is an edit of the log.
"""
from __future__ import annotations
import dataclasses, statistics

from mlperf_bert.audit.logs import MLPerfLog
from mlperf_bert.mlperf_log import LogEvent


def _int(v: object) -> int | None:
  return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclasses.dataclass
class Eval:
  """One eval of a log: its eval_start, eval_stop and eval_accuracy (as they follow each other), the samples trained
  before it (the first epoch_num of its events) and so its step."""
  start: LogEvent | None = None
  stop: LogEvent | None = None
  accuracy: LogEvent | None = None
  samples: int | None = None
  steps: float | None = None

  def events(self) -> list[LogEvent]:
    return [e for e in (self.start, self.stop, self.accuracy) if e is not None]


def log_evals(log: MLPerfLog, global_bs: int) -> list[Eval]:
  """The log's evals in file order: an eval_start opens one, its eval_stop and eval_accuracy close it (an eval_stop or
  eval_accuracy without an open eval opens its own); each eval's samples are the first integer epoch_num of its
  events, its steps those samples / global_bs."""
  out: list[Eval] = []
  for e in log.events:
    if e.key not in ("eval_start", "eval_stop", "eval_accuracy"): continue
    slot = {"eval_start": "start", "eval_stop": "stop", "eval_accuracy": "accuracy"}[e.key]
    if e.key == "eval_start" or not out or getattr(out[-1], slot) is not None:
      out.append(Eval())
    setattr(out[-1], slot, e)
  for ev in out:
    ev.samples = next((s for e in ev.events() if (s := _int(e.metadata.get("epoch_num"))) is not None), None)
    ev.steps = None if ev.samples is None else ev.samples / global_bs
  return out


def step_mismatches(evals: list[Eval], global_bs: int) -> list[str]:
  """Each eval event whose step_num x global_bs is not the samples its eval trained (epoch_num), and each eval whose
  samples are no whole number of global batches: in words naming the event and its line."""
  out = []
  for ev in evals:
    if ev.samples is not None and ev.samples % global_bs:
      e = next(e for e in ev.events() if _int(e.metadata.get("epoch_num")) is not None)
      out.append(f"{e.key} (line {e.lineno}): epoch_num {ev.samples} samples is no whole number of global batches "
                 f"of {global_bs}")
      continue
    for e in ev.events():
      step = e.metadata.get("step_num")
      if step is None or ev.samples is None: continue
      if _int(step) is None or step * global_bs != ev.samples:
        out.append(f"{e.key} (line {e.lineno}): step_num {str(step)[:20]} x global_batch_size {global_bs} is not "
                   f"the {ev.samples} samples its eval trained (epoch_num)")
  return out


def interval_steps(evals: list[Eval]) -> list[float]:
  """A log's step times (ms), one an eval interval: between an eval's eval_stop and the next eval's eval_start only
  train steps run, so (time between them) / (the steps between them, from the samples) is a clean step time. The
  first interval, from run_start to the first eval, holds the warm-up and is not one; an interval without samples on
  both ends, or with no step in it, is left out."""
  out = []
  for a, b in zip(evals, evals[1:]):
    if a.stop is None or b.start is None or a.steps is None or b.steps is None or b.steps <= a.steps: continue
    out.append((b.start.time_ms - a.stop.time_ms) / (b.steps - a.steps))
  return out


LOW_QUANTILE = 0.1   # an eval interval's step is held at this quantile of a log's: tinycorp's published intervals lie
                     # within 0.4 % of their log's median (v4.1, v5.0), so any low one is an edit or a clock's step


def low_quantile(values: list[float], q: float) -> float:
  """The q-quantile of values by the lower nearest rank: sorted(values)[floor(q (n - 1))]."""
  v = sorted(values)
  return v[int(q * (len(v) - 1))]


def trained_steps(evals: list[Eval]) -> float | None:
  """The steps the run trained at least: the most samples any eval trained, in steps."""
  steps = [ev.steps for ev in evals if ev.steps is not None]
  return max(steps) if steps else None


def eval_walls_ms(evals: list[Eval]) -> list[float]:
  """The wall time of each eval with both ends: its eval_start to its eval_stop."""
  return [ev.stop.time_ms - ev.start.time_ms for ev in evals if ev.start is not None and ev.stop is not None]


def warmup_s(log: MLPerfLog, global_bs: int) -> float | None:
  """What a run spent beyond its train steps and its evals (the JIT captures, the weights loaded, the first steps and
  eval slower than the rest): run_start to run_stop, less its trained steps at its median interval step, less every
  eval's wall. None without run_start, run_stop, an eval interval or samples."""
  evals = log_evals(log, global_bs)
  per, steps = interval_steps(evals), trained_steps(evals)
  if log.run_start_ms is None or log.run_stop_ms is None or not per or steps is None: return None
  return (log.run_stop_ms - log.run_start_ms - steps * statistics.median(per) - sum(eval_walls_ms(evals))) / 1000

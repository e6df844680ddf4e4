"""Two MLPerf BERT result logs side by side (`python -m mlperf_bert compare LOG_A LOG_B`), e.g. this project's
trainer and tinygrad's own train_bert for the same seed on the same data (docs/tinygrad-trainer.md).

Printed: each log's submitter, platform, seed, status, init time (first init_start -> init_stop) and run time
(run_start -> run_stop); each eval's masked-LM accuracy in both logs by training step (eval_accuracy's epoch_num,
the samples seen, over global_batch_size) with the difference; the step at which each first reached the target
(--target, default the closed division's 0.720); and where the two first differ: the first logged setting (a
point-in-time event outside the timing and eval keys, compared in order by key) and the first eval whose
accuracies are more than --tol apart. The logs are read with mlperf_bert/audit/logs.py's reader; a malformed
:::MLLOG line is refused, naming it (file:line), since a skipped line could hide the difference.
"""
from __future__ import annotations
import dataclasses, os
from typing import Any

from mlperf_bert.audit.logs import BERT_TARGET_ACCURACY, MLPerfLog, read_log
from mlperf_bert.errors import UserError

# events whose values are times, counters of the run's progress or per-run identity, not settings
_NOT_SETTINGS = {"init_start", "init_stop", "run_start", "run_stop", "eval_start", "eval_stop", "eval_accuracy",
                 "epoch_start", "epoch_stop", "block_start", "block_stop", "checkpoint_start", "checkpoint_stop",
                 "cache_clear", "submission_org", "submission_platform", "submission_status", "submission_division"}


@dataclasses.dataclass
class Side:
  log: MLPerfLog
  evals: dict[int, float]   # step -> accuracy

  @classmethod
  def read(cls, path: str | os.PathLike) -> "Side":
    log = read_log(path)
    if log.unread: raise UserError(f"{path}: {log.unread}")
    if not log.events: raise UserError(f"{path}: no :::MLLOG lines; give an MLPerf result log")
    if log.malformed:  # a skipped line could hide the very setting or eval that differs
      m = log.malformed[0]
      more = f" (and {len(log.malformed) - 1} more)" if len(log.malformed) > 1 else ""
      raise UserError(f"{path}:{m.lineno}: a malformed :::MLLOG line{more}: {m.error}; compare reads every line of "
                      "both logs: repair or remove it, or compare an unedited copy of the log")
    gbs = log.global_batch_size
    evals = {}
    for e in log.eval_accuracies:
      md = e.metadata if isinstance(e.metadata, dict) else {}
      samples = md.get("epoch_num", md.get("samples_count"))
      try: step = int(samples // gbs) if gbs else int(samples)
      except (TypeError, ValueError): continue
      try: evals[step] = float(e.value)
      except (TypeError, ValueError): continue
    return cls(log, evals)

  def settings(self) -> list[tuple[str, Any]]:
    return [(e.key, e.value) for e in self.log.events if e.key not in _NOT_SETTINGS and e.event_type != "INTERVAL_END"]

  def reached(self, target: float) -> int | None:
    return next((s for s in sorted(self.evals) if self.evals[s] >= target), None)


def first_setting_difference(a: Side, b: Side) -> str | None:
  """The first logged setting whose value differs (or that only one log has), in log A's order."""
  sa, sb = dict(a.settings()), dict(b.settings())
  for k, _ in a.settings() + b.settings():
    if sa.get(k, "(absent)") != sb.get(k, "(absent)"):
      return f"{k}: {sa.get(k, '(absent)')} vs {sb.get(k, '(absent)')}"
  return None


def first_eval_difference(a: Side, b: Side, tol: float) -> str | None:
  for s in sorted(set(a.evals) | set(b.evals)):
    va, vb = a.evals.get(s), b.evals.get(s)
    if va is None or vb is None: return f"step {s}: an eval only in log {'A' if vb is None else 'B'}"
    if abs(va - vb) > tol: return f"step {s}: accuracy {va:.6f} vs {vb:.6f} (|diff| {abs(va - vb):.2e} > {tol:g})"
  return None


def _minutes(m: float | None) -> str:
  return "-" if m is None else f"{m * 60:.1f} s"


def compare(path_a: str | os.PathLike, path_b: str | os.PathLike, target: float = BERT_TARGET_ACCURACY,
            tol: float = 0.0) -> tuple[list[str], dict]:
  """The report's lines and its facts (dict) for two logs."""
  a, b = Side.read(path_a), Side.read(path_b)
  lines = [f"A: {path_a}", f"B: {path_b}", ""]
  rows = [("", "A", "B")]
  for label, get in (("submitter", lambda s: s.log.org), ("platform", lambda s: s.log.platform),
                     ("seed", lambda s: s.log.seed), ("status", lambda s: s.log.status),
                     ("global batch size", lambda s: s.log.global_batch_size),
                     ("init time", lambda s: _minutes(s.log.init_minutes)),
                     ("run time", lambda s: _minutes(s.log.run_minutes)),
                     (f"step reaching {target:g}", lambda s: s.reached(target))):
    rows.append((label, str(get(a)), str(get(b))))
  w = max(len(r[0]) for r in rows)
  lines += [f"{r[0]:<{w}}  {r[1]:>24}  {r[2]:>24}" for r in rows]
  if a.log.seed != b.log.seed: lines.append(f"note: the seeds differ ({a.log.seed} vs {b.log.seed})")
  lines += ["", f"{'step':>8}  {'accuracy A':>12}  {'accuracy B':>12}  {'B - A':>10}"]
  for s in sorted(set(a.evals) | set(b.evals)):
    va, vb = a.evals.get(s), b.evals.get(s)
    d = f"{vb - va:+.6f}" if va is not None and vb is not None else "-"
    lines.append(f"{s:>8}  {'-' if va is None else f'{va:.6f}':>12}  {'-' if vb is None else f'{vb:.6f}':>12}  {d:>10}")
  setting, ev = first_setting_difference(a, b), first_eval_difference(a, b, tol)
  lines += ["", f"first differing setting: {setting or 'none'}", f"first differing eval: {ev or 'none'}"]
  facts = {"evals_a": a.evals, "evals_b": b.evals, "reached_a": a.reached(target), "reached_b": b.reached(target),
           "init_s": [None if s.log.init_minutes is None else s.log.init_minutes * 60 for s in (a, b)],
           "run_s": [None if s.log.run_minutes is None else s.log.run_minutes * 60 for s in (a, b)],
           "first_setting_difference": setting, "first_eval_difference": ev}
  return lines, facts

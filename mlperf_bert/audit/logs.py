"""Read MLPerf result logs: the `:::MLLOG {json}` lines mllog writes, as events.

The reader is tolerant: a line that carries the `:::MLLOG` token but is not a valid record (bad JSON, not an
object, no `key`, no numeric `time_ms`) is skipped and reported as a `MalformedLine` with its line number, so a
damaged log is named, never a traceback. Lines without the token (the trainer's own prints) are counted and
kept aside in `MLPerfLog.other_lines` for the report's per-step plots.

The helpers answer what the audit and the submission need: run time in minutes (run_start -> run_stop), the
run_stop status, the final eval_accuracy, seed, benchmark, division, org, platform and init duration.
"""
from __future__ import annotations
import os, stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from mlperf_bert.audit.untrusted import MAX_LINE_BYTES, MAX_LOG_BYTES
from mlperf_bert.mlperf_log import TOKEN, LogEvent, MalformedLine, parse_line  # noqa: F401 (the audit's names)

BOUND_ERRORS = ("line is", "JSON nested")  # how the MalformedLine errors of the bounds begin
# the BERT closed-division target (masked-LM accuracy), as mlperf-logging's closed_bert.yaml checks it
BERT_TARGET_ACCURACY = 0.720


@dataclass
class MLPerfLog:
  """A parsed result log. `events` are in file order."""
  path: Path | None
  events: list[LogEvent] = field(default_factory=list)
  malformed: list[MalformedLine] = field(default_factory=list)
  other_lines: list[tuple[int, str]] = field(default_factory=list)
  other_bytes: int = 0  # bytes of the lines that are no :::MLLOG record (blank ones and line ends included)
  non_utf8: list[int] = field(default_factory=list)  # line numbers holding bytes that are not UTF-8
  unread: str | None = None  # why the file was not parsed at all (not a regular file, over the size bound)
  over_bounds: bool = False  # a line over the line bound or nested deeper than the JSON bound: mlperf-logging's
                             # parser (whose regular expressions are slow on such lines) must not read it

  # -- generic access
  def all(self, key: str) -> list[LogEvent]:
    return [e for e in self.events if e.key == key]

  def first(self, key: str) -> LogEvent | None:
    return next((e for e in self.events if e.key == key), None)

  def last(self, key: str) -> LogEvent | None:
    return next((e for e in reversed(self.events) if e.key == key), None)

  def value(self, key: str, default: Any = None) -> Any:
    e = self.first(key)
    return default if e is None else e.value

  # -- submission info
  @property
  def benchmark(self) -> str | None: return self.value("submission_benchmark")
  @property
  def division(self) -> str | None: return self.value("submission_division")
  @property
  def org(self) -> str | None: return self.value("submission_org")
  @property
  def platform(self) -> str | None: return self.value("submission_platform")
  @property
  def submission_status(self) -> str | None: return self.value("submission_status")

  @property
  def seed(self) -> int | None:
    v = self.value("seed")
    try:
      return None if v is None else int(v)
    except (TypeError, ValueError):
      return None

  @property
  def seeds(self) -> list[Any]:
    return [e.value for e in self.all("seed")]

  @property
  def eval_samples(self) -> Any: return self.value("eval_samples")
  @property
  def global_batch_size(self) -> Any: return self.value("global_batch_size")
  @property
  def train_samples(self) -> Any: return self.value("train_samples")

  @property
  def claimed_ruleset(self) -> str | None:
    """The MLPerf ruleset the log says it follows, if it says (mllog has no standard key; trainers that
    record one use a key naming the ruleset, e.g. `ruleset` or `submission_ruleset`)."""
    for e in self.events:
      if "ruleset" in e.key.lower() and e.value not in (None, ""):
        return normalize_ruleset(str(e.value))
    return None

  # -- timing
  @property
  def run_start_ms(self) -> float | None:
    e = self.first("run_start"); return None if e is None else e.time_ms
  @property
  def run_stop_ms(self) -> float | None:
    e = self.first("run_stop"); return None if e is None else e.time_ms

  @property
  def run_minutes(self) -> float | None:
    """Time to train as MLPerf scores it: run_stop - run_start, in minutes (None without both)."""
    if self.run_start_ms is None or self.run_stop_ms is None: return None
    return (self.run_stop_ms - self.run_start_ms) / 60 / 1000  # as result_summarizer divides

  @property
  def init_minutes(self) -> float | None:
    """Initialisation time: first init_start -> init_stop, in minutes (the closed division allows < 30)."""
    starts, stop = self.all("init_start"), self.first("init_stop")
    if not starts or stop is None: return None
    return (stop.time_ms - min(e.time_ms for e in starts)) / 60000.0

  @property
  def status(self) -> str | None:
    """run_stop's metadata status ('success', 'aborted'), or None when there is no run_stop."""
    e = self.first("run_stop")
    if e is None: return None
    return e.metadata.get("status") if isinstance(e.metadata, dict) else None

  # -- evaluation
  @property
  def eval_accuracies(self) -> list[LogEvent]:
    return self.all("eval_accuracy")

  @property
  def final_eval_accuracy(self) -> float | None:
    e = self.last("eval_accuracy")
    try:
      return None if e is None else float(e.value)
    except (TypeError, ValueError):
      return None

  @property
  def converged(self) -> bool:
    """run_stop with status success (what mlperf-logging's RCP checker and result summarizer count)."""
    return self.status == "success"

  def nonconvergence_reason(self) -> str | None:
    """Why this run does not count as converged, in words; None when it converged."""
    if self.converged: return None
    parts = []
    acc = self.final_eval_accuracy
    if acc is not None and acc < BERT_TARGET_ACCURACY:
      parts.append(f"final eval_accuracy {acc:.4f} < target {BERT_TARGET_ACCURACY}")
    elif acc is None:
      parts.append("no eval_accuracy")
    parts.append("no run_stop" if self.run_stop_ms is None else f"run_stop status {self.status!r}")
    return ", ".join(parts)

  def summary(self) -> dict:
    """The facts the audit and the submission print, as a plain dict."""
    return {"path": str(self.path) if self.path else None, "benchmark": self.benchmark, "division": self.division,
            "org": self.org, "platform": self.platform, "seed": self.seed, "status": self.status,
            "run_minutes": self.run_minutes, "init_minutes": self.init_minutes,
            "final_eval_accuracy": self.final_eval_accuracy, "eval_samples": self.eval_samples,
            "events": len(self.events), "malformed": len(self.malformed)}


def normalize_ruleset(text: str) -> str:
  """'4.1' -> '4.1.0', 'v5.0' -> '5.0.0', '5.0.0' -> '5.0.0'."""
  t = text.strip().lstrip("vV")
  parts = t.split(".")
  while len(parts) < 3: parts.append("0")
  return ".".join(parts[:3])


def parse_lines(lines: Iterable[str], path: str | os.PathLike | None = None) -> MLPerfLog:
  log = MLPerfLog(Path(path) if path is not None else None)
  for n, line in enumerate(lines, 1):
    r = parse_line(line, n)
    if r is None:
      if line.strip(): log.other_lines.append((n, line.rstrip("\n")))
    elif isinstance(r, MalformedLine):
      log.malformed.append(r)
    else:
      log.events.append(r)
  return log


def read_log(path: str | os.PathLike, max_bytes: int = MAX_LOG_BYTES, max_line: int = MAX_LINE_BYTES) -> MLPerfLog:
  """Parse a result log file (read as latin-1, as mlperf-logging does, so no byte sequence raises). Bounded: a
  file that is not a regular file or is over `max_bytes` is not parsed (`unread` says why); a line over
  `max_line` bytes is a MalformedLine; lines with bytes that are not UTF-8 are listed in `non_utf8`."""
  log = MLPerfLog(Path(path))
  try:
    st = os.stat(path)
  except OSError as e:
    log.unread = f"cannot be read ({e.strerror})"; return log
  if not stat.S_ISREG(st.st_mode):
    log.unread = "is not a regular file"; return log
  if st.st_size > max_bytes:
    log.unread = f"is {st.st_size:,} bytes, over the audit's bound of {max_bytes:,}"; return log
  with open(path, "rb") as f:
    data = f.read(max_bytes + 1)
  if len(data) > max_bytes:
    log.unread = f"is over the audit's bound of {max_bytes:,} bytes"; return log
  try:
    data.decode("utf-8"); utf8 = True
  except UnicodeDecodeError:
    utf8 = False
  lines, other_bytes, token = [], 0, TOKEN.encode()
  for n, raw in enumerate(data.splitlines(keepends=True), 1):
    if token not in raw: other_bytes += len(raw)
    raw = raw.rstrip(b"\r\n")
    if not utf8:
      try: raw.decode("utf-8")
      except UnicodeDecodeError: log.non_utf8.append(n)
    if len(raw) > max_line:
      log.malformed.append(MalformedLine(n, raw[:80].decode("latin-1"), f"line is {len(raw):,} bytes, over the "
                                         f"audit's bound of {max_line:,}"))
      lines.append("")
    else:
      lines.append(raw.decode("latin-1"))
  parsed = parse_lines(lines, path)
  parsed.malformed = sorted(log.malformed + parsed.malformed, key=lambda m: m.lineno)
  parsed.non_utf8 = log.non_utf8
  parsed.other_bytes = other_bytes
  parsed.over_bounds = any(m.error.startswith(BOUND_ERRORS) for m in parsed.malformed)
  return parsed


def olympic_mean(values: list[float], drop: int = 1) -> float | None:
  """Drop the `drop` fastest and slowest and average the rest (the MLPerf olympic score); None if none remain."""
  v = sorted(values)
  kept = v[drop:len(v) - drop]
  return sum(kept) / len(kept) if kept else None


def olympic_score(run_minutes: list[float | None], drop: int = 1) -> float | None:
  """The BERT score as mlperf-logging's result_summarizer computes it from a result directory's runs:
  non-converged runs (None) count as the slowest ones dropped; more than `drop` of them -> no score."""
  ok = sorted(m for m in run_minutes if m is not None)
  missing = len(run_minutes) - len(ok)
  if missing > drop: return None
  kept = ok[drop:len(ok) - (drop - missing)]
  return sum(kept) / len(kept) if kept else None

"""The lines of an MLPerf log: `:::MLLOG {json}` records as mllog writes them, parsed one at a time.

Shared by the train wing (which reads back its own work log: mlperf_bert/train/run.py) and the audit
(mlperf_bert/audit/logs.py builds a whole log's MLPerfLog from these). A line that carries the token but is not a
valid record is a MalformedLine, never an exception; a line without the token is None.
"""
from __future__ import annotations
import json, math
from dataclasses import dataclass
from typing import Any

TOKEN = ":::MLLOG"
MAX_JSON_DEPTH = 64               # nesting of arrays/objects in any JSON the audit parses
REHEARSAL_KEY = "rehearsal"       # a rehearsal's line (rehearse=true): train/mllog.py writes it, the audit reads it


@dataclass(frozen=True)
class LogEvent:
  """One `:::MLLOG` record."""
  key: str
  value: Any
  time_ms: float
  metadata: dict
  event_type: str = ""
  lineno: int = 0  # 1-based line number in the file


@dataclass(frozen=True)
class MalformedLine:
  lineno: int
  text: str
  error: str

  def __str__(self) -> str:
    return f"line {self.lineno}: {self.error}"


def json_depth_ok(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
  """True when no array/object in `text` nests deeper than max_depth (brackets inside strings are skipped)."""
  if text.count("[") + text.count("{") <= max_depth:
    return True
  depth, in_str, esc = 0, False, False
  for ch in text:
    if in_str:
      if esc: esc = False
      elif ch == "\\": esc = True
      elif ch == '"': in_str = False
    elif ch == '"': in_str = True
    elif ch in "[{":
      depth += 1
      if depth > max_depth: return False
    elif ch in "]}":
      depth -= 1
  return True


def parse_line(line: str, lineno: int = 0) -> LogEvent | MalformedLine | None:
  """One line -> LogEvent, MalformedLine (token present, record bad) or None (no token)."""
  i = line.find(TOKEN)
  if i < 0: return None
  payload = line[i + len(TOKEN):].strip()
  text = line.rstrip("\n")
  if not json_depth_ok(payload):
    return MalformedLine(lineno, text[:200], f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
  try:
    rec = json.loads(payload)
  except json.JSONDecodeError as e:
    return MalformedLine(lineno, text, f"not valid JSON ({e.msg} at column {e.colno})")
  except RecursionError:
    return MalformedLine(lineno, text[:200], "JSON nested too deep to parse")
  if not isinstance(rec, dict):
    return MalformedLine(lineno, text, f"record is a {type(rec).__name__}, expected a JSON object")
  if not isinstance(rec.get("key"), str):  # an empty key is one (mlperf-logging's parser reads it; a published
    return MalformedLine(lineno, text, "record has no 'key'")  # v1.0 logger wrote "key": "" for submission_org)
  t = rec.get("time_ms")
  if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
    return MalformedLine(lineno, text, f"'time_ms' is {t!r}, expected a number")
  meta = rec.get("metadata", {})
  if not isinstance(meta, dict):
    return MalformedLine(lineno, text, f"'metadata' is a {type(meta).__name__}, expected a JSON object")
  if "value" not in rec:
    return MalformedLine(lineno, text, "record has no 'value'")
  return LogEvent(rec["key"], rec["value"], float(t), meta, str(rec.get("event_type", "")), lineno)


def event_keys(text: str) -> list[str]:
  """The keys of the valid records of a log's text, in order (a torn last line is no record)."""
  return [r.key for r in (parse_line(line) for line in text.splitlines()) if isinstance(r, LogEvent)]

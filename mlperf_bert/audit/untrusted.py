"""A received submission is untrusted input: what the audit reads of it, and within which bounds.

Every path the audit opens under a submission goes through `problem()` first: a symlink that resolves outside
the submission, a FIFO, socket or device file, a directory where a file belongs, or a file over its size bound is
never opened; each is one FAIL that names it. JSON is parsed with a nesting bound (`loads_bounded`), so a
deeply nested document is a finding, not a RecursionError. The official tools run on `safe_copy`, which copies
only the regular files that passed these checks.
"""
from __future__ import annotations
import json, os, shutil, stat
from pathlib import Path

from mlperf_bert.mlperf_log import MAX_JSON_DEPTH, json_depth_ok  # noqa: F401 (the audit's names)

# the bounds (docs/audit.md states them). The largest published BERT result log (v4.0-v5.0) is 3.1 MB, its
# longest line 2.2 KB; a systems json is a few KB.
MAX_LOG_BYTES = 16 << 20          # a result log
MAX_LINE_BYTES = 64 << 10         # one line of a result log
MAX_JSON_BYTES = 1 << 20          # systems/<system>.json, scaling.json
MAX_LOGS_CHECKED = 20             # result logs per system checked one by one (MLPerf scores BERT from 10)
MAX_COPY_FILES = 20000            # files copied for the official tools (benchmarks/bert included)
MAX_COPY_BYTES = 512 << 20        # bytes copied for the official tools


def _kind(mode: int) -> str | None:
  if stat.S_ISFIFO(mode): return "a FIFO"
  if stat.S_ISCHR(mode) or stat.S_ISBLK(mode): return "a device file"
  if stat.S_ISSOCK(mode): return "a socket"
  return None


def problem(path: Path, root: Path, *, max_bytes: int | None = None, want: str = "file") -> str | None:
  """Why `path` (under the submission `root`) must not be read, or None when it is a regular file (want='file')
  or directory (want='dir') inside the submission, within `max_bytes`. Never opens the path."""
  try:
    st = os.lstat(path)
  except OSError as e:
    return f"cannot be examined ({e.strerror})"
  if stat.S_ISLNK(st.st_mode):
    target = Path(os.path.realpath(path))
    try:
      target.relative_to(Path(os.path.realpath(root)))
    except ValueError:
      return f"is a symlink to {os.readlink(path)!r}, outside the submission: replace it with the file itself"
    try:
      st = os.stat(path)
    except OSError:
      return f"is a broken symlink to {os.readlink(path)!r}"
  k = _kind(st.st_mode)
  if k:
    return f"is {k}, not a regular file: a submission holds only files and directories"
  if want == "dir":
    return None if stat.S_ISDIR(st.st_mode) else "is not a directory"
  if stat.S_ISDIR(st.st_mode):
    return "is a directory, expected a file"
  if max_bytes is not None and st.st_size > max_bytes:
    return f"is {st.st_size:,} bytes, over the audit's bound of {max_bytes:,}: not read"
  return None


def loads_bounded(text: str, max_depth: int = MAX_JSON_DEPTH):
  """json.loads with a nesting bound: raises ValueError (json.JSONDecodeError for bad JSON) past it."""
  if not json_depth_ok(text, max_depth):
    raise ValueError(f"JSON nested deeper than {max_depth} levels")
  return json.loads(text)


def read_untrusted_json(path: Path, root: Path) -> tuple[object | None, str | None]:
  """A submission's JSON file -> (value, None) or (None, why it was not read or parsed)."""
  why = problem(path, root, max_bytes=MAX_JSON_BYTES)
  if why: return None, why
  try:
    return loads_bounded(path.read_bytes().decode("utf-8")), None
  except UnicodeDecodeError as e:
    return None, f"is not UTF-8 ({e.reason} at byte {e.start})"
  except json.JSONDecodeError as e:
    return None, f"is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
  except (ValueError, OSError) as e:
    return None, str(e)


def safe_copy(src: Path, dest: Path, root: Path, budget: list[int]) -> None:
  """Copy the regular files under `src` (a file or a directory tree) to `dest`, never following a symlink out of
  `root` nor reading a FIFO or device; budget = [files left, bytes left] bounds the whole copy."""
  if not os.path.islink(src) and problem(src, root, want="dir") is None:
    for dirpath, _dirs, filenames in os.walk(src, followlinks=False):  # symlinked directories are not entered
      d = Path(dirpath)
      for n in sorted(filenames):
        safe_copy(d / n, dest / d.relative_to(src) / n, root, budget)
    return
  if problem(src, root, max_bytes=MAX_LOG_BYTES) is not None or budget[0] <= 0:
    return
  size = os.stat(src).st_size
  if size > budget[1]:
    return
  budget[0] -= 1; budget[1] -= size
  dest.parent.mkdir(parents=True, exist_ok=True)
  shutil.copyfile(src, dest)


def links_out(root: Path, limit: int = 1000) -> list[tuple[str, str]]:
  """(path under `root`, where it resolves) for each symlink under a workflow tree that resolves outside it (or
  nowhere), walked without following links, sorted; at most `limit` of them."""
  out: list[tuple[str, str]] = []
  top = Path(os.path.realpath(root))
  for d, dirs, files in os.walk(root):
    for name in sorted(dirs + files):
      p = Path(d) / name
      if not p.is_symlink(): continue
      target = Path(os.path.realpath(p))
      if not target.is_relative_to(top) or not target.exists():
        out.append((str(p.relative_to(root)), str(target)))
        if len(out) >= limit: return sorted(out)
    dirs.sort()
  return sorted(out)

"""Glue for workflow/scripts: run a job with its output going to the rule's `log:` file.

    with job_log(snakemake.log[0]):
        ...call the package...

stdout and stderr (Python's and the file descriptors, so tqdm and tinygrad output too) go to the log file.
A UserError is written to the log and to the console, and the job exits non-zero, so Snakemake removes the
job's outputs and reports the log; so is a write the disk refused that no writer turned into one line (an OSError
ENOSPC, EDQUOT, EFBIG or EROFS: fileio.write_error, which tells a filesystem out of inodes from a full one); any other
exception keeps its traceback in the log. The log itself never stops a job: Python's writes to it that the disk
refuses are dropped (and counted, in a warning on the console); a log that cannot be opened at all is one line and
exit 1 (out of inodes, a file of the basedir's inode reserve makes room for it: reserve_inodes).
A warning the package raises (`warnings.warn`) is written to the log and to the console as one `warning: ...` line.

A job never outlives its workflow: when the log lies in a basedir whose lock (logs/workflow.lock, held by the
Snakemake process for the whole run) is held as the job starts, a watchdog thread checks the lock every second; once
it is free (Snakemake was killed, even with SIGKILL), the job says so in one line, is interrupted as by Ctrl-C (the
train job's phase processes stop at their resumable point) and is killed if it has not ended 45 s later.
"""
from __future__ import annotations
import contextlib, errno, fcntl, io, json, os, signal, socket, sys, threading, time, traceback, warnings
from pathlib import Path
from typing import IO, Iterator

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import FULL, atomic_path, write_error
from mlperf_bert.space import INODE_FIX, out_of_inodes
from mlperf_bert.urls import redact


class _LogSink(io.RawIOBase):
  """A job log's file descriptor for Python's stdout or stderr: a write the disk refuses (FULL) is dropped and
  counted, so that printing a progress line never ends a job whose real outputs still fit."""
  def __init__(self, fd: int):
    super().__init__()
    self.fd, self.lost = fd, 0

  def writable(self) -> bool: return True
  def fileno(self) -> int: return self.fd

  def write(self, b) -> int:
    try:
      return os.write(self.fd, b)
    except OSError as e:
      if e.errno not in FULL: raise
      self.lost += len(b)
      return len(b)


def _tolerant(fd: int, like: IO) -> tuple[IO, _LogSink]:
  sink = _LogSink(fd)
  return io.TextIOWrapper(io.BufferedWriter(sink), encoding=getattr(like, "encoding", None) or "utf-8",
                          errors=getattr(like, "errors", None) or "strict", line_buffering=True), sink


def _open_log(log_path: Path) -> IO:
  """The job log opened for appending (its folder made), or one `error:` line on stderr and SystemExit(1) when the
  disk refuses it (full, out of inodes, read-only, not writable: fileio.write_error says which). Out of inodes, one
  file of the basedir's inode reserve is deleted so that the log exists and holds the line: Snakemake creates a
  failed job's missing log itself, and its own failure there is a traceback."""
  try:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return open(log_path, "a", buffering=1)
  except OSError as e:
    err = write_error(e, log_path) or UserError(f"cannot open the job log {log_path}: {e.strerror or e}; check that "
                                                 "its folder is writable and rerun")
    if e.errno == errno.ENOSPC and release_reserved_inode(log_path):
      try:
        with open(log_path, "a") as f: f.write(f"error: {err}\n")
      except OSError:
        pass
    print(f"error: {err}", file=sys.stderr, flush=True)
    raise SystemExit(1) from None


# Empty files the workflow's `onstart` hook keeps in the basedir (reserve_inodes): a job whose log cannot be created
# on a filesystem out of inodes deletes one and creates its log in its place (job_log).
INODE_RESERVE = Path("logs", "inode_reserve")
RESERVED_INODES = 16  # more than the jobs a workstation runs at once (--cores): each failing job takes one


def reserve_inodes(basedir: str | os.PathLike, n: int = RESERVED_INODES) -> int:
  """Keep `n` empty files in <basedir>/logs/inode_reserve; returns how many there are. Best effort: a file the disk
  refuses is not made (the basedir lock refused a filesystem with no inode left)."""
  folder = Path(basedir) / INODE_RESERVE
  try:
    folder.mkdir(parents=True, exist_ok=True)
    have = len(list(folder.iterdir()))
    for i in range(have, n):
      (folder / f"{i:02d}").touch()
      have += 1
  except OSError:
    pass
  return have if folder.is_dir() else 0


def release_reserved_inode(path: str | os.PathLike) -> bool:
  """Delete one file of the inode reserve of the basedir that holds `path` (the nearest <dir>/logs/inode_reserve
  above it); False when there is none left."""
  for d in Path(path).resolve().parents:
    folder = d / INODE_RESERVE
    if folder.is_dir():
      for f in sorted(folder.iterdir()):
        try:
          f.unlink(); return True
        except OSError:
          continue
      return False
  return False


@contextlib.contextmanager
def job_log(log_path: str | os.PathLike) -> Iterator[None]:
  log_path = Path(log_path)
  log_file = _open_log(log_path)
  console = os.fdopen(os.dup(2), "w")
  saved = os.dup(1), os.dup(2)
  sys.stdout.flush(); sys.stderr.flush()
  def show(message, category, filename, lineno, file=None, line=None):
    print(f"warning: {message}", file=sys.stderr, flush=True)
    print(f"warning: {message}\n(log: {log_path})", file=console, flush=True)

  def fail(e: Exception):
    print(f"error: {e}", file=sys.stderr, flush=True)
    print(f"error: {e}\n(log: {log_path})", file=console, flush=True)
    raise SystemExit(1)

  shown, streams = warnings.showwarning, (sys.stdout, sys.stderr)
  with log_file as f:
    os.dup2(f.fileno(), 1); os.dup2(f.fileno(), 2)
    (sys.stdout, out), (sys.stderr, err) = _tolerant(1, streams[0]), _tolerant(2, streams[1])
    warnings.showwarning = show
    watch = LockWatch.start(workflow_lock_of(log_path))
    try:
      yield
    except UserError as e:
      fail(e)
    except OSError as e:
      full = write_error(e, Path(e.filename)) if e.errno in (*FULL, errno.EROFS) and e.filename else None
      if full is None and e.errno == errno.ENOSPC and (inodes := out_of_inodes(log_path.parent)):
        full = UserError(f"a write under {log_path.parent} failed: {e.strerror}: {inodes}; {INODE_FIX}")
      if full is None and e.errno in FULL:
        full = UserError(f"a write under {log_path.parent} failed: {e.strerror}; free space on that disk (or point "
                         "the config's basedir at a larger one) and rerun")
      if full is None:
        traceback.print_exc()
        raise
      fail(full)
    except BaseException:
      if watch is not None and watch.lost.is_set():  # the watchdog said why, in one line
        raise SystemExit(1) from None
      traceback.print_exc()
      raise
    finally:
      if watch is not None: watch.stop()
      warnings.showwarning = shown
      for stream in (sys.stdout, sys.stderr):
        try: stream.flush()
        except OSError: pass
      sys.stdout, sys.stderr = streams
      os.dup2(saved[0], 1); os.dup2(saved[1], 2)
      os.close(saved[0]); os.close(saved[1])
      if out.lost + err.lost:
        print(f"warning: {out.lost + err.lost} bytes of this job's output are missing from {log_path}: its disk was "
              "full", file=console, flush=True)
      console.close()


# The command line of the Snakemake run, for the provenance records and the submission README. Written by the
# workflow's `onstart` hook (rules/common.smk; Snakemake runs it once, in its own process, before the first job, and
# never in a dry run) into the basedir, where the jobs read it back. It is neither a param (one that changes with
# every invocation would trip Snakemake's params rerun trigger, and a finished tree's dry run would never be clean)
# nor an environment variable set while the Snakefile is parsed.
COMMAND_RECORD = Path("logs", "snakemake_command.json")


def record_command(basedir: str | os.PathLike, argv: list[str]) -> Path:
  """Write `snakemake ARGS...` (argv[0], Snakemake's entry point, recorded as "snakemake") for the run's jobs; a URL's
  credentials in an argument are never written (the workflow refuses them in --config; mlperf_bert/urls.py)."""
  path = Path(basedir) / COMMAND_RECORD
  with atomic_path(path) as tmp:
    tmp.write_text(json.dumps(["snakemake", *map(redact, argv[1:])]) + "\n")
  return path


def recorded_command(basedir: str | os.PathLike) -> list[str] | None:
  """The command line record_command wrote for this basedir, or None when there is none (e.g. --no-hooks)."""
  path = Path(basedir) / COMMAND_RECORD
  try: cmd = json.loads(path.read_text())
  except (OSError, ValueError): return None
  return cmd if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd) else None


# The basedir's lock: Snakemake locks its working directory, but two checkouts (two working directories) on one
# basedir would delete each other's outputs. The workflow's `onstart` hook takes this lock (an flock, so a killed
# run leaves no stale lock) and holds it until the Snakemake process ends; dry runs take none.
LOCK_RECORD = Path("logs", "workflow.lock")


def lock_basedir(basedir: str | os.PathLike, *, checkout: str | os.PathLike, argv: list[str]) -> IO:
  """Take <basedir>/logs/workflow.lock for this process and write who holds it; keep the returned file open for as
  long as the run lasts. UserError (one line naming the lock and its holder) when another process holds it, and
  (one line, before any job) when the basedir cannot be written: read-only, not writable, full or out of inodes."""
  path = Path(basedir) / LOCK_RECORD
  if inodes := out_of_inodes(basedir):  # the lock file may exist already, but no job could make its log
    raise UserError(f"basedir {basedir}: {inodes}; {INODE_FIX}")
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")
  except OSError as e:
    err = write_error(e, path)
    fix = "" if err else "; point the config's basedir at a folder this user can write, and rerun"
    raise UserError(f"basedir {basedir} cannot be written: {err or e.strerror or e}{fix}") from None
  try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    f.seek(0)
    holder = f.read().strip() or "another process"
    f.close()
    raise UserError(f"{path} is held by {holder}: another workflow run is using this basedir; wait for it to end "
                    "or give this run another basedir") from None
  f.seek(0); f.truncate()
  f.write(f"pid {os.getpid()} on {socket.gethostname()} (checkout {checkout}, since "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {' '.join(['snakemake', *argv[1:]])[:200]})\n")
  f.flush()
  return f


def workflow_lock_of(path: str | os.PathLike) -> Path | None:
  """The basedir lock of a job whose log is `path` (every rule's log is under <basedir>/logs/): the nearest
  <dir>/logs/workflow.lock above it, or None."""
  for d in Path(path).resolve().parents:
    if d.name == LOCK_RECORD.parts[0] and (d.parent / LOCK_RECORD).is_file():
      return d.parent / LOCK_RECORD
  return None


def lock_is_held(path: str | os.PathLike) -> bool:
  """True while some process holds the flock of `path` (lock_basedir's); False when it is free or unreadable. The
  probe takes a shared lock for an instant when it is free."""
  try: f = open(path, "rb")
  except OSError: return False
  with f:
    try:
      fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
      return True
    fcntl.flock(f, fcntl.LOCK_UN)
    return False


class LockWatch:
  """A daemon thread that ends this process once the workflow's lock is free (its Snakemake process is gone): a
  one-line error on stderr, SIGINT to the main thread (as Ctrl-C: a clean, resumable stop), and SIGKILL `grace_s`
  later if the process still runs. `lost` is set once the lock was found free."""

  def __init__(self, lock: Path, interval_s: float, grace_s: float):
    self.lock, self.interval_s, self.grace_s = lock, interval_s, grace_s
    self.lost, self._stop = threading.Event(), threading.Event()
    self._main = threading.main_thread().ident
    self.thread = threading.Thread(target=self._run, name="workflow-lock-watch", daemon=True)

  @classmethod
  def start(cls, lock: Path | None, interval_s: float = 1.0, grace_s: float = 45.0) -> "LockWatch | None":
    """Watch `lock` if it is held now (a job of a running workflow); None otherwise (no lock: run by hand, a dry
    run, a cluster node that does not share the lock)."""
    if lock is None or not lock_is_held(lock):
      return None
    if (threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN):  # a background job of a shell without job control
      signal.signal(signal.SIGINT, signal.default_int_handler)
    w = cls(lock, interval_s, grace_s)
    w.thread.start()
    return w

  def stop(self) -> None:
    self._stop.set()

  def _run(self) -> None:
    while not self._stop.wait(self.interval_s):
      if lock_is_held(self.lock):
        continue
      self.lost.set()
      print(f"error: {self.lock} is no longer held: the Snakemake run that started this job is gone (killed); "
            f"this job (process {os.getpid()}) stops too. Rerun the same snakemake command to continue (training "
            "resumes from its last checkpoint)", file=sys.stderr, flush=True)
      signal.pthread_kill(self._main, signal.SIGINT)
      if not self._stop.wait(self.grace_s):
        os.kill(os.getpid(), signal.SIGKILL)
      return

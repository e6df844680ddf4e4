"""Small file helpers every stage uses: atomic outputs (safetensors' too) and file digests."""
from __future__ import annotations
import contextlib, errno, hashlib, os, re, shutil, socket, tempfile
from pathlib import Path
from typing import Iterator

from mlperf_bert.errors import UserError
from mlperf_bert.space import INODE_FIX, out_of_inodes

# errors of writing that the user fixes on the machine (space, limits, permissions), not in the program
_FIXES = {
  errno.ENOSPC: "free space on that disk (or point the config's basedir at a larger one) and rerun",
  errno.EDQUOT: "free space within your disk quota (or point the config's basedir elsewhere) and rerun",
  errno.EFBIG: "the file is larger than this process may write (ulimit -f): raise the limit and rerun",
  errno.EACCES: "make that folder writable for this user (or point the config's basedir elsewhere) and rerun",
  errno.EPERM: "make that folder writable for this user (or point the config's basedir elsewhere) and rerun",
  errno.EROFS: "the file system is read-only: point the config's basedir at a writable one and rerun",
}


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the writes that stop because the disk (or a limit) is full


def _owner() -> str:
  """pid@host of this process: temp names carry it, so a later run can tell a dead writer's leftovers."""
  return f"{os.getpid()}@{socket.gethostname()}"


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def remove_stale_temps(folder: str | os.PathLike, prefix: str, suffix: str) -> list[Path]:
  """Delete `<prefix><random>.<pid>@<host><suffix>` entries (files or folders) of `folder` whose writer is dead.

  A writer on this host is dead when its pid is gone; an entry of another host, or one without an owner (older
  versions), is left over by definition: Snakemake runs one job per target, and only that job calls this.
  Returns what was removed."""
  folder, gone = Path(folder), []
  if not folder.is_dir():
    return gone
  host = socket.gethostname()
  for p in folder.iterdir():
    name = p.name
    if not (name.startswith(prefix) and name.endswith(suffix)):
      continue
    middle = name[len(prefix):len(name) - len(suffix)]
    _, _, owner = middle.partition(".")
    pid, _, ohost = owner.partition("@")
    if ohost == host and pid.isdigit() and (int(pid) == os.getpid() or _pid_alive(int(pid))):
      continue  # a live writer (this process included)
    try:
      shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
      gone.append(p)
    except FileNotFoundError:
      pass
  return gone


def write_error(e: OSError, path: Path) -> UserError | None:
  """A one-line UserError for an OSError that the user fixes (disk full, out of inodes, quota, permissions), else
  None."""
  fix = _FIXES.get(e.errno)
  if fix is None:
    return None
  why = e.strerror or os.strerror(e.errno)
  if e.errno == errno.ENOSPC and (inodes := out_of_inodes(e.filename or path)):  # bytes free, no file can be made
    why, fix = f"{why}: {inodes}", INODE_FIX
  other = e.filename and Path(e.filename) != path and not Path(e.filename).name.startswith(f".{path.name}.")
  if other:
    return UserError(f"{e.filename}: {why} (while writing {path}); {fix}")
  return UserError(f"cannot write {path}: {why}; {fix}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
  """Yield a temporary path beside `path`; on success rename it onto `path`, on any error delete it.

  A failed or interrupted job therefore never leaves a half-written target behind, and the temp files a killed
  writer of the same target left (`.<name>.*.part`) are removed first. Disk full, quota and permission errors
  become a one-line UserError naming the path and what to do.
  """
  path = Path(path)
  tmp = None
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent, f".{path.name}.", ".part")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".{_owner()}.part", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a target gets the usual permissions
    tmp = Path(tmp)
    yield tmp
    os.replace(tmp, path)
  except BaseException as e:
    if tmp is not None:
      Path(tmp).unlink(missing_ok=True)
    err = write_error(e, path) if isinstance(e, OSError) else None
    if err is None:
      raise
    raise err from None


def save_safetensors(arrays: dict, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write numpy `arrays` as safetensors to `path` with safetensors' own writer, through atomic_path: its I/O errors
  (a SafetensorError, not an OSError: "... (os error 28)") become the OSError they are, so a full disk is
  atomic_path's one line and leaves no file; the target gets the usual permissions (the writer makes 0600)."""
  from safetensors import SafetensorError
  from safetensors.numpy import save_file
  with atomic_path(path) as tmp:
    mode = tmp.stat().st_mode & 0o777
    try:
      save_file(arrays, str(tmp), metadata=metadata)
    except SafetensorError as e:
      m = re.search(r"\(os error (\d+)\)", str(e))
      if m is None:
        raise
      code = int(m.group(1))
      raise OSError(code, os.strerror(code), str(tmp)) from None
    os.chmod(tmp, mode)


@contextlib.contextmanager
def scratch_dir(folder: str | os.PathLike, prefix: str) -> Iterator[Path]:
  """A private folder `<prefix><random>.<pid>@<host>.tmp` in `folder`, removed when the block ends; the ones a
  killed process left (same prefix, writer dead) are removed first."""
  Path(folder).mkdir(parents=True, exist_ok=True)
  remove_stale_temps(folder, prefix, ".tmp")
  d = Path(tempfile.mkdtemp(prefix=prefix, suffix=f".{_owner()}.tmp", dir=folder))
  try:
    yield d
  finally:
    shutil.rmtree(d, ignore_errors=True)


def file_digest(path: str | os.PathLike, algo: str = "md5", chunk: int = 1 << 20) -> str:
  """Hex digest of a file's bytes, read in chunks."""
  h = hashlib.new(algo)
  with open(path, "rb") as f:
    while block := f.read(chunk):
      h.update(block)
  return h.hexdigest()


def copy_to_part(src: str | os.PathLike, part: str | os.PathLike) -> None:
  """Copy a local source file to a download's temp file; on any failure remove the partial copy."""
  try:
    shutil.copyfile(src, part)
  except BaseException:
    Path(part).unlink(missing_ok=True)
    raise

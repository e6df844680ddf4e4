"""Small file helpers every stage uses: atomic outputs and file digests."""
from __future__ import annotations
import contextlib, hashlib, os, tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
  """Yield a temporary path beside `path`; on success rename it onto `path`, on any error delete it.

  A failed or interrupted job therefore never leaves a half-written target behind.
  """
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
  os.close(fd)
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a target gets the usual permissions
  tmp = Path(tmp)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException:
    tmp.unlink(missing_ok=True)
    raise


def file_digest(path: str | os.PathLike, algo: str = "md5", chunk: int = 1 << 20) -> str:
  """Hex digest of a file's bytes, read in chunks."""
  h = hashlib.new(algo)
  with open(path, "rb") as f:
    while block := f.read(chunk):
      h.update(block)
  return h.hexdigest()

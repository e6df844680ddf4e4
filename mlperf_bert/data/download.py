"""Fetch one MLPerf artifact (Google Drive id, URL or local path) and check its published MD5.

A source is written as
  gdrive:<id>            a Google Drive file id, fetched with gdown (as tinygrad's wikipedia_download.py does)
  http://... https://... any URL, fetched with gdown as well (an offline mirror, a loopback server in tests)
  <path>                 a local file, absolute or relative to `root` (the demo uses its bundled files this way)
The target only appears once the whole file has arrived and its MD5 matched: an interrupted or corrupt
download leaves nothing at the target path.
"""
from __future__ import annotations
import os, shutil, tempfile
from pathlib import Path
from typing import Callable

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path, file_digest

GDRIVE_URL = "https://drive.google.com/uc?id={id}"


def resolve_source(source: str, *, root: str | Path = ".", gdrive_url: str = GDRIVE_URL) -> tuple[str, str]:
  """('url', URL) or ('path', absolute path) for a source string."""
  if source.startswith("gdrive:"):
    file_id = source.removeprefix("gdrive:")
    if not file_id:
      raise UserError(f"source {source!r} has no Google Drive id; write it as gdrive:<id>")
    return "url", gdrive_url.format(id=file_id)
  if source.startswith(("http://", "https://")):
    return "url", source
  path = Path(source)
  return "path", str(path if path.is_absolute() else Path(root) / path)


def fetch(source: str, dest: str | Path, *, md5: str | None, root: str | Path = ".",
          gdrive_url: str = GDRIVE_URL, log: Callable[[str], None] = print, quiet: bool = False) -> dict:
  """Bring `source` to `dest`, verifying `md5` when one is given. Returns {"source", "md5", "bytes"}."""
  dest = Path(dest)
  kind, where = resolve_source(source, root=root, gdrive_url=gdrive_url)
  with atomic_path(dest) as tmp:
    if kind == "path":
      if not Path(where).is_file():
        raise UserError(f"{dest.name}: source file {where} does not exist; fix the path under "
                        f"sources/{dest.name}/url in the config, or point it at a URL or gdrive:<id>")
      log(f"copying {where} -> {dest}")
      shutil.copyfile(where, tmp)
    else:
      import gdown
      log(f"downloading {where} -> {dest}")
      # gdown keeps partial files of its own beside its output: give it a private folder that always goes away
      with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as scratch:
        out = Path(scratch) / dest.name
        try:
          got = gdown.download(url=where, output=str(out), quiet=quiet, use_cookies=False)
        except Exception as e:  # gdown raises requests/urllib errors and its own FileURLRetrievalError
          raise UserError(f"{dest.name}: download from {where} failed ({type(e).__name__}: {e}); check the "
                          f"network or the source under sources/{dest.name}/url, then rerun the same command") from e
        if got is None or not out.is_file():
          raise UserError(f"{dest.name}: download from {where} produced no file; check the source under "
                          f"sources/{dest.name}/url, then rerun")
        os.replace(out, tmp)
    actual = file_digest(tmp, "md5")
    if md5 is not None and actual != md5.lower():
      raise UserError(f"{dest.name}: MD5 mismatch for {where}: expected {md5}, got {actual}; the file is corrupt "
                      f"or not the MLPerf file. Rerun to fetch it again, or fix sources/{dest.name} in the config")
    size = Path(tmp).stat().st_size
  log(f"{dest.name}: {size} bytes, md5 {actual}" + (" (matches the published md5)" if md5 else " (no published md5)"))
  return {"source": source, "md5": actual, "bytes": size}

"""Safe extraction of `results_text.tar.gz` into `results4/`.

Member paths are never trusted: an absolute path, a `..` component, a link, a device or any other special
member stops the extraction with an error naming the tarball and the member. Files are extracted into a
staging folder beside the destination and moved into place only when the whole archive was read and every
file the md5 manifest lists is present; the tarball itself is kept. The gzip stream is read to its end, so its
CRC-32 and length are checked: a damaged archive is called corrupt, whatever its tar headers say. A file whose
bytes did not change keeps its modification time, so re-extracting a touched or restored tarball rebuilds nothing
downstream; staging folders a killed extraction left behind are removed by the next one.
"""
from __future__ import annotations
import gzip, os, shutil, tarfile, tempfile, zlib
from pathlib import Path, PurePosixPath
from typing import Callable

from mlperf_bert.data.footprint import check_extract_space
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import _owner, atomic_path, remove_stale_temps, write_error

TOP = "results4"


def parse_manifest(path: str | Path) -> dict[str, str]:
  """`<md5>  ./<file>` lines (bert_reference_results_text_md5.txt) -> {file: md5}, in file order."""
  out: dict[str, str] = {}
  for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
    if not line.strip():
      continue
    parts = line.split()
    if len(parts) != 2 or len(parts[0]) != 32 or any(c not in "0123456789abcdef" for c in parts[0].lower()):
      raise UserError(f"{path}:{n}: expected '<md5>  ./<file>', got {line!r}; download the manifest again "
                      "(delete it and rerun) or fix the line")
    name = parts[1].removeprefix("./")
    if "/" in name or name in ("", ".", ".."):
      raise UserError(f"{path}:{n}: file name {parts[1]!r} is not a plain file name of results4/; fix the manifest")
    out[name] = parts[0].lower()
  if not out:
    raise UserError(f"{path}: the md5 manifest lists no files; download it again (delete it and rerun)")
  return out


def topics(manifest: dict[str, str] | str | Path) -> list[str]:
  """Training topics (part-XXXXX-of-NNNNN) of a manifest, sorted; eval.txt is not a topic."""
  m = manifest if isinstance(manifest, dict) else parse_manifest(manifest)
  return sorted(k for k in m if k != "eval.txt")


def _member_name(tarball: Path, member: tarfile.TarInfo) -> PurePosixPath | None:
  """The member's path below results4/, or None for the results4 folder itself; raises on unsafe members."""
  raw = member.name
  p = PurePosixPath(raw)
  if p.is_absolute() or raw.startswith("/"):
    raise UserError(f"{tarball}: member {raw!r} has an absolute path; refusing to extract. The archive is not "
                    "the MLPerf results_text.tar.gz: download it again")
  parts = [x for x in p.parts if x != "."]
  if ".." in parts:
    raise UserError(f"{tarball}: member {raw!r} climbs out with '..'; refusing to extract. Download the archive again")
  if not (member.isfile() or member.isdir()):
    kind = "link" if (member.issym() or member.islnk()) else "special file"
    raise UserError(f"{tarball}: member {raw!r} is a {kind}; only regular files are allowed. Download the archive again")
  if not parts or parts[0] != TOP:
    raise UserError(f"{tarball}: member {raw!r} is outside {TOP}/; the archive is not the MLPerf "
                    "results_text.tar.gz: download it again")
  rest = parts[1:]
  if not rest:
    return None
  if len(rest) > 1:
    raise UserError(f"{tarball}: member {raw!r} is in a sub-folder of {TOP}/; download the archive again")
  return PurePosixPath(*rest)


def _same_bytes(a: Path, b: Path, chunk: int = 1 << 22) -> bool:
  if a.stat().st_size != b.stat().st_size:
    return False
  with open(a, "rb") as fa, open(b, "rb") as fb:
    while True:
      x, y = fa.read(chunk), fb.read(chunk)
      if x != y:
        return False
      if not x:
        return True


def _drain(gz: gzip.GzipFile) -> None:
  """Read the gzip stream to its end: the gzip module then checks the trailer's CRC-32 and length."""
  while gz.read(1 << 22):
    pass


def extract_results(tarball: str | Path, manifest_path: str | Path, dest: str | Path,
                    listing: str | Path | None = None, log: Callable[[str], None] = print,
                    space_check: bool = True) -> list[str]:
  """Extract the regular files of `tarball`'s results4/ into `dest`; returns the extracted file names.

  `listing`, when given, is written last (atomically): one `<size>  <name>` line per extracted file. The
  workflow uses it as the extract step's output, so each extracted file keeps its own modification time
  and an edited topic reruns exactly that topic's chain. A file already in `dest` with the same bytes keeps its
  modification time (a touched tarball rebuilds nothing after the extraction). With `space_check`, the text must fit
  beside `dest` before anything is written (data/footprint.py).
  """
  tarball, dest = Path(tarball), Path(dest)
  wanted = parse_manifest(manifest_path)
  if space_check:
    check_extract_space(tarball, dest)
  corrupt = f"{tarball}: the archive is corrupt or truncated (%s); delete it and rerun to download it again"
  try:
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(dest.parent, f".{dest.name}.", ".partial")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=f".{_owner()}.partial", dir=dest.parent))
  except OSError as e:
    raise (write_error(e, dest) or e) from None
  names: list[str] = []
  kept = 0
  try:
    try:
      with open(tarball, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
        try:
          with tarfile.open(fileobj=gz, mode="r|") as tf:
            for member in tf:
              rel = _member_name(tarball, member)
              if rel is None or member.isdir():
                continue
              src = tf.extractfile(member)
              assert src is not None
              with open(staging / rel.name, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
              names.append(rel.name)
              log(f"extracted {rel.name} ({member.size} bytes)")
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
          _drain(gz)  # a damaged gzip stream is the cause more often than a bad tar header: say so when it is
          raise UserError(corrupt % f"{type(e).__name__}: {e}") from None
        _drain(gz)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
      raise UserError(corrupt % f"gzip check failed: {type(e).__name__}: {e}") from None
    except UserError:
      raise
    except OSError as e:
      err = write_error(e, dest)
      if err is not None:
        raise err from None
      raise UserError(f"{tarball}: cannot read the archive ({type(e).__name__}: {e}); delete it and rerun to "
                      "download it again") from None
    missing = [n for n in wanted if n not in names]
    if missing:
      raise UserError(f"{tarball}: {len(missing)} file(s) listed in {manifest_path} are not in the archive "
                      f"(first: {missing[0]}); the archive and the manifest do not belong together: download both again")
    extra = sorted(set(names) - set(wanted))
    if extra:
      log(f"note: {len(extra)} file(s) in the archive are not in the manifest and are not used (first: {extra[0]})")
    for n in names:  # unchanged bytes keep their time: Snakemake then sees nothing new downstream
      old = dest / n
      if old.is_file() and _same_bytes(old, staging / n):
        st = old.stat()
        os.utime(staging / n, ns=(st.st_atime_ns, st.st_mtime_ns))
        kept += 1
    if dest.exists():
      shutil.rmtree(dest)
    os.chmod(staging, 0o755)
    os.replace(staging, dest)
  finally:
    if staging.exists():
      shutil.rmtree(staging, ignore_errors=True)
  if kept:
    log(f"{kept} of {len(names)} file(s) had the same bytes as before and keep their modification time")
  if listing is not None:
    with atomic_path(listing) as tmp:
      Path(tmp).write_text("".join(f"{(dest / n).stat().st_size}  {n}\n" for n in names))
  return names

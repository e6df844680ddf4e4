"""MLCommons' R2 storage (training.mlcommons-storage.org), read as mlcommons/r2-downloader lays it out.

A dataset is named by its `.uri` URL, e.g. https://training.mlcommons-storage.org/metadata/bert-input-files.uri:
  * GET the `.uri`: its body is the dataset's base URL;
  * the md5 list sits beside it: <dirname of the .uri>/<dataset name>.md5, one `<md5>  ./<relative path>` a line;
  * each file is GET <base URL>/<relative path>.
A local mirror is a directory laid out as that downloader leaves it: `<dataset name>.md5` at its top and the
files at their relative paths (`bash mlc-r2-downloader.sh -d DIR URL`).

In the config a dataset is written `mlcommons-r2:<.uri URL>` (a plain URL ending in `.uri` means the same) or
`mlcommons-r2:<directory>`. The workflow fetches the listing once (`fetch_listing`, cached under
`download/r2/`) and then each file as its own job (data/http.py `download_file`): HTTP Range resume from a `.part` file
beside the target (kept across a failed attempt, never at the target path), md5-checked, retried with backoff
for network errors only, a tqdm bar (bytes, rate, ETA) in the job's log.
"""
from __future__ import annotations
import contextlib, errno, re
from pathlib import Path, PurePosixPath
from typing import Callable
from urllib.parse import quote, urlsplit, urlunsplit

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path, copy_to_part
from mlperf_bert.space import INODE_FIX, out_of_inodes
from mlperf_bert.data.http import FetchPolicy, download_file, drop_stale_parts, finish_part, get_text, part_path
from mlperf_bert.urls import has_credentials, redact

PREFIX = "mlcommons-r2:"
URI_SUFFIXES = (".uri", ".url")  # the downloader's older metadata files end in .url
TEXT_NAME = re.compile(r"part-\d{5}-of-\d{5}|eval\.txt")

# ------------------------------------------------------------------------------------------------ naming

def is_r2(source: str) -> bool:
  """Whether a config source names an R2 dataset (mlcommons-r2:... or a URL ending in .uri)."""
  if source.startswith(PREFIX):
    return True
  return source.startswith(("http://", "https://")) and urlsplit(source).path.endswith(URI_SUFFIXES)


def location(source: str) -> str:
  """The dataset's .uri URL or mirror directory, without the mlcommons-r2: prefix."""
  loc = source.removeprefix(PREFIX).strip()
  if not loc:
    raise UserError(f"source {redact(source)!r} names no dataset; write mlcommons-r2:<URL of its .uri> or mlcommons-r2:<directory>")
  return loc


def _is_url(loc: str) -> bool:
  return loc.startswith(("http://", "https://"))


def dataset_name(source: str, *, root: str | Path = ".") -> str:
  """bert-input-files for .../metadata/bert-input-files.uri; for a mirror directory, the stem of its one .md5 file."""
  loc = location(source)
  if _is_url(loc):
    path = urlsplit(loc).path
    if not path.endswith(URI_SUFFIXES):
      raise UserError(f"source {redact(source)!r}: the URL must name a dataset's .uri file (e.g. "
                      "https://training.mlcommons-storage.org/metadata/bert-input-files.uri)")
    name = PurePosixPath(path).stem
    if not name:
      raise UserError(f"source {redact(source)!r}: cannot tell the dataset name from the URL; point it at <name>.uri")
    return name
  return _mirror_md5(loc, root, source).stem


def _mirror_md5(loc: str, root: str | Path, source: str) -> Path:
  d = Path(loc) if Path(loc).is_absolute() else Path(root) / loc
  if d.is_file() and d.suffix == ".md5":
    return d
  if not d.is_dir():
    raise UserError(f"source {redact(source)!r}: mirror directory {d} does not exist; download the dataset there with "
                    "mlcommons/r2-downloader (bash mlc-r2-downloader.sh -d DIR URL) or fix the path in the config")
  found = sorted(d.glob("*.md5"))
  if len(found) != 1:
    raise UserError(f"source {redact(source)!r}: mirror directory {d} must hold exactly one <dataset>.md5 list at its top "
                    f"(found {len(found)}: {', '.join(p.name for p in found) or 'none'}); name the list itself: "
                    f"mlcommons-r2:{d}/<dataset>.md5")
  return found[0]


def md5_list_url(uri_url: str) -> str:
  """<dirname of the .uri path>/<dataset name>.md5, on the .uri's host."""
  parts = urlsplit(uri_url)
  p = PurePosixPath(parts.path)
  return urlunsplit((parts.scheme, parts.netloc, str(p.parent / (p.stem + ".md5")), "", ""))


# ------------------------------------------------------------------------------------------------ listing

def parse_md5_list(text: str, where: str) -> dict[str, str]:
  """`<md5>  ./relative/path` lines (md5sum's format; `*path` for binary mode too) -> {relative path: md5}."""
  out: dict[str, str] = {}
  for n, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    m = re.fullmatch(r"([0-9a-fA-F]{32}) [ *](.+)", line.rstrip("\r"))
    if not m:
      raise UserError(f"{redact(where)}:{n}: expected '<md5>  ./<path>', got {line[:80]!r}; the md5 list is damaged or "
                      "not an md5 list (an HTML page?): delete it and rerun to fetch it again")
    rel = m.group(2).strip()
    p = PurePosixPath(rel)
    parts = [x for x in p.parts if x != "."]
    if p.is_absolute() or ".." in parts or not parts:
      raise UserError(f"{redact(where)}:{n}: path {rel!r} is not a relative path inside the dataset; refusing it")
    key, md5 = "/".join(parts), m.group(1).lower()
    if out.get(key, md5) != md5:
      raise UserError(f"{redact(where)}:{n}: {rel!r} is listed twice with two md5s ({out[key]}, {md5}); the list "
                      "contradicts itself: refusing it (delete it and rerun to fetch it again, or fix the mirror's list)")
    out[key] = md5
  if not out:
    raise UserError(f"{redact(where)}: the md5 list names no files; delete it and rerun to fetch it again")
  return out


def read_listing(md5_path: str | Path) -> dict[str, str]:
  return parse_md5_list(Path(md5_path).read_text(encoding="utf-8", errors="replace"), str(md5_path))


def find_entry(listing: dict[str, str], path: str, dataset: str) -> str:
  """The listed relative path that is `path` or ends in /`path` (the dataset may nest its files in a folder)."""
  want = "/".join(x for x in PurePosixPath(path).parts if x != ".")
  hits = [k for k in listing if k == want] or [k for k in listing if k.endswith("/" + want)]
  if len(hits) == 1:
    return hits[0]
  if not hits:
    near = [k for k in listing if PurePosixPath(k).name == PurePosixPath(want).name]
    raise UserError(f"dataset {dataset}: its md5 list has no file {want!r}" +
                    (f" (files of that name: {', '.join(near[:5])}); set `path:` of this source to one of them"
                     if near else f" ({len(listing)} files listed); fix `path:` of this source in the config"))
  raise UserError(f"dataset {dataset}: {want!r} matches {len(hits)} files ({', '.join(hits[:5])}); set `path:` "
                  "of this source to the one to use")


def text_entries(listing: dict[str, str], dataset: str) -> dict[str, str]:
  """{part-XXXXX-of-NNNNN or eval.txt: relative path} of a dataset holding the extracted text."""
  out: dict[str, str] = {}
  for rel in listing:
    name = PurePosixPath(rel).name
    if TEXT_NAME.fullmatch(name):
      if name in out:
        raise UserError(f"dataset {dataset}: {name} is listed twice ({out[name]}, {rel}); cannot tell which to use")
      out[name] = rel
  if not any(n != "eval.txt" for n in out):
    tarball = [k for k in listing if k.endswith(".tar.gz")]
    hint = (f" It holds {tarball[0]}: point sources/results_text.tar.gz and bert_reference_results_text_md5.txt "
            "at it (url + path) instead of sources/results4." if tarball else "")
    raise UserError(f"dataset {dataset}: its md5 list names no part-XXXXX-of-NNNNN text files, so it is not the "
                    f"extracted MLPerf text.{hint}")
  if "eval.txt" not in out:
    raise UserError(f"dataset {dataset}: its md5 list has the text parts but no eval.txt; the eval set needs it")
  return out


def write_manifest(listing_md5: str | Path, out: str | Path, dataset: str) -> int:
  """The md5 manifest of the extracted text (`<md5>  ./<name>`, as bert_reference_results_text_md5.txt)."""
  listing = read_listing(listing_md5)
  names = text_entries(listing, dataset)
  with atomic_path(out) as tmp:
    tmp.write_text("".join(f"{listing[rel]}  ./{name}\n" for name, rel in sorted(names.items())))
  return len(names)


# ------------------------------------------------------------------------------------------------ datasets

def fetch_listing(source: str, md5_out: str | Path, uri_out: str | Path, *, root: str | Path = ".",
                  attempts: int = 5, backoff: float = 2.0, policy: FetchPolicy = FetchPolicy(),
                  log: Callable[[str], None] = print) -> int:
  """Cache a dataset's md5 list (`md5_out`) and its base URL or mirror directory (`uri_out`); returns the file count."""
  loc = location(source)
  name = dataset_name(source, root=root)
  if _is_url(loc):
    base = get_text(loc, f"dataset {name} (.uri)", attempts=attempts, backoff=backoff, policy=policy,
                    log=log).strip()
    if not re.fullmatch(r"https?://\S+", base):
      raise UserError(f"dataset {name}: {redact(loc)} should hold the dataset's base URL, got {redact(base)[:80]!r}; check the "
                      "source URL in the config")
    if has_credentials(base):  # cached in download/r2/ and a part of every file's URL: never kept
      raise UserError(f"dataset {name}: {redact(loc)} names a base URL with a user name or password "
                      f"({redact(base)[:80]}); refusing to keep it: the logins this workflow uses come from ~/.netrc "
                      "(docs/download.md); mirror the dataset (mlc-r2-downloader.sh -d DIR) and use mlcommons-r2:DIR")
    list_url = md5_list_url(loc)
    text = get_text(list_url, f"dataset {name} (md5 list)", attempts=attempts, backoff=backoff, policy=policy,
                    log=log)
    where = list_url
  else:
    md5_file = _mirror_md5(loc, root, source)
    # the mirror as configured (a relative path stays relative to the repository: no checkout path is cached)
    base = str(Path(loc).parent if Path(loc).suffix == ".md5" else Path(loc)) if not Path(loc).is_absolute() \
      else str(md5_file.parent)
    where = str(md5_file)
    text = md5_file.read_text(encoding="utf-8", errors="replace")
  listing = parse_md5_list(text, where)
  with one_line_os_errors(Path(md5_out)), atomic_path(md5_out) as tmp:
    tmp.write_text("".join(f"{m}  ./{rel}\n" for rel, m in listing.items()))
  with one_line_os_errors(Path(uri_out)), atomic_path(uri_out) as tmp:
    tmp.write_text(base.rstrip("/") + "\n")
  log(f"dataset {name}: {len(listing)} files listed, base {redact(base)}")
  return len(listing)


def fetch_member(listing_md5: str | Path, uri_file: str | Path, rel: str, dest: str | Path, *, dataset: str,
                 root: str | Path = ".",
                 md5: str | None = None, validate: Callable[[Path], None] | None = None, attempts: int = 5,
                 backoff: float = 2.0, policy: FetchPolicy = FetchPolicy(), progress: bool = True,
                 log: Callable[[str], None] = print) -> dict:
  """One file of a cached dataset listing into `dest`, checked against the listed md5 (and `md5`, when given)."""
  listing = read_listing(listing_md5)
  rel = find_entry(listing, rel, dataset)
  listed = listing[rel]
  if md5 is not None and md5.lower() != listed:
    raise UserError(f"dataset {dataset}: {rel} is listed with md5 {listed}, but the config expects {md5} for "
                    f"{Path(dest).name}; the source or its `path:` points at another file: fix the config")
  base = Path(uri_file).read_text().strip()
  what = f"{dataset}/{rel}"
  if _is_url(base):
    url = base.rstrip("/") + "/" + "/".join(quote(x) for x in rel.split("/"))
    return download_file(url, dest, md5=listed, what=what, attempts=attempts, backoff=backoff, policy=policy,
                         progress=progress, validate=validate, log=log)
  src = (Path(base) if Path(base).is_absolute() else Path(root) / base) / rel
  if not src.is_file():
    raise UserError(f"{what}: {src} is missing from the mirror directory; complete the mirror (rerun "
                    "mlc-r2-downloader.sh, which resumes) or fix the source in the config")
  dest = Path(dest)
  dest.parent.mkdir(parents=True, exist_ok=True)
  part = part_path(dest, listed, str(src))
  drop_stale_parts(dest, part)
  log(f"copying {src} -> {dest}")
  copy_to_part(src, part)
  return finish_part(part, dest, md5=listed, source=str(src), what=what, validate=validate, log=log)


def fetch_text_file(listing_md5: str | Path, uri_file: str | Path, name: str, dest: str | Path, *, dataset: str,
                    root: str | Path = ".",
                    attempts: int = 5, backoff: float = 2.0, policy: FetchPolicy = FetchPolicy(),
                    progress: bool = True, log: Callable[[str], None] = print) -> dict:
  """results4/<name> (a part-XXXXX-of-NNNNN or eval.txt) from a dataset that holds the text extracted."""
  names = text_entries(read_listing(listing_md5), dataset)
  if name not in names:
    raise UserError(f"dataset {dataset}: its md5 list has no {name}; the topic list comes from that list: delete "
                    "download/r2/ and rerun if the dataset changed")
  with one_line_os_errors(Path(dest)):
    return fetch_member(listing_md5, uri_file, names[name], dest, dataset=dataset, root=root, attempts=attempts,
                        backoff=backoff, policy=policy, progress=progress, log=log)


@contextlib.contextmanager
def one_line_os_errors(dest: Path):
  """Turn a full disk or a permission problem while writing `dest` into a one-line UserError."""
  try:
    yield
  except OSError as e:
    err = download_write_error(e, dest)
    if err is None:
      raise
    raise err from None


def download_write_error(e: OSError, dest: Path) -> UserError | None:
  """A one-line UserError for a full disk or a permission problem while writing `dest`; None for other errors."""
  where = e.filename or dest
  if e.errno == errno.ENOSPC and (inodes := out_of_inodes(where)):  # bytes free, but no file can be created
    return UserError(f"{redact(where)}: cannot write {dest.name} ({e.strerror}): {inodes}; {INODE_FIX}")
  if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
    return UserError(f"{redact(where)}: no space left to write {dest.name} ({e.strerror}); free space on that filesystem "
                     "or point basedir at a larger one, then rerun (a partial download resumes)")
  if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
    return UserError(f"{redact(where)}: cannot write {dest.name} ({e.strerror}); make {dest.parent} writable for this user "
                     "or point basedir elsewhere, then rerun")
  return None

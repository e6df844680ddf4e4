"""Fetch one MLPerf artifact and check it: its published MD5, and what its kind allows to check.

A source is written as
  mlcommons-r2:<.uri URL>   a file of a dataset on MLCommons' R2 storage (or a plain URL ending in .uri); the
                            file is the listed one named like the target or given by the source's `path:`.
                            `mlcommons-r2:<directory>` reads a local mirror of such a dataset (see data/r2.py)
  gdrive:<id>               a Google Drive file id, fetched with gdown (as tinygrad's wikipedia_download.py does)
  http://... https://...    any other URL, fetched with HTTP Range resume (a Google Drive URL goes through gdown)
  <path>                    a local file, absolute or relative to `root` (the demo uses its bundled files this way)
The target only appears once the whole file has arrived, its MD5 matched and its content passed the checks of
its kind (bert_config.json parses and has BERT's keys, the md5 manifest parses, a .tar.gz lists to its end):
an interrupted, corrupt or mistaken download leaves nothing at the target path. An HTTP download keeps a hidden
`.part` beside the target across a failed attempt, and the next run resumes it. Every HTTP fetch is bounded (a
deadline, a stall timeout, a size bound: data/http.py; a gdown fetch by the deadline only). Network errors
are retried with backoff inside the job; nothing deterministic (an MD5 mismatch, a missing path, an HTTP 403) is retried.
Beside the target, `<target>.sha256` records the sha256 of what was accepted (the provenance record reads it).
"""
from __future__ import annotations
import gzip, json, os, tarfile, zlib
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path, copy_to_part, scratch_dir
from mlperf_bert.data import r2
from mlperf_bert.data.http import FetchPolicy, NetworkError, download_file, finish_part, part_path, \
  warn_loose_netrc, with_retries
from mlperf_bert.urls import redact

GDRIVE_URL = "https://drive.google.com/uc?id={id}"
GDRIVE_HOSTS = ("drive.google.com", "docs.google.com", "drive.usercontent.google.com")
MANIFEST = "bert_reference_results_text_md5.txt"
BERT_CONFIG_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                    "max_position_embeddings", "type_vocab_size")


def resolve_source(source: str, *, root: str | Path = ".", gdrive_url: str = GDRIVE_URL) -> tuple[str, str]:
  """('r2', location), ('gdrive', URL), ('url', URL) or ('path', absolute path) for a source string."""
  if r2.is_r2(source):
    return "r2", r2.location(source)
  if source.startswith("gdrive:"):
    file_id = source.removeprefix("gdrive:")
    if not file_id:
      raise UserError(f"source {source!r} has no Google Drive id; write it as gdrive:<id>")
    return "gdrive", gdrive_url.format(id=file_id)
  if source.startswith(("http://", "https://")):
    return ("gdrive" if urlsplit(source).hostname in GDRIVE_HOSTS else "url"), source
  path = Path(source)
  return "path", str(path if path.is_absolute() else Path(root) / path)


# ------------------------------------------------------------------------------------------------ checks by kind

def validate_content(path: Path, name: str) -> str | None:
  """Check what the file named `name` must be; raise UserError if it is not. Returns what was checked."""
  if name == "bert_config.json":
    try:
      cfg = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise UserError(f"{name}: not valid JSON ({e}); the download is not BERT's config (an error page?): "
                      "check its source in the config and rerun") from None
    missing = [k for k in BERT_CONFIG_KEYS if not isinstance(cfg, dict) or not isinstance(cfg.get(k), int)]
    if missing:
      raise UserError(f"{name}: JSON without BERT's integer keys {', '.join(missing)}; this is not BERT's "
                      "bert_config.json: check its source in the config and rerun")
    return f"JSON with BERT's keys (hidden_size {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers)"
  if name == MANIFEST:
    from mlperf_bert.data.extract import parse_manifest
    n = len(parse_manifest(path))
    return f"md5 manifest of {n} files"
  if name == "vocab.txt":
    head = Path(path).read_bytes()[: 1 << 20].decode("utf-8", errors="replace").split("\n")
    missing = [t for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]") if t not in head]
    if missing:
      raise UserError(f"{name}: no {', '.join(missing)} line in its first MB; this is not a BERT WordPiece "
                      "vocabulary: check its source in the config and rerun")
    return "WordPiece vocabulary with BERT's special tokens"
  if name.endswith((".tar.gz", ".tgz")):
    n = 0
    try:
      # gzip.open, not tarfile's own "r|gz" (which skips the gzip trailer): reading to the end checks CRC and length
      with gzip.open(path, "rb") as gz:
        with tarfile.open(fileobj=gz, mode="r|") as tf:
          for m in tf:
            n += 1
            if m.isfile():
              f = tf.extractfile(m)
              while f is not None and f.read(1 << 20):
                pass
        while gz.read(1 << 20):
          pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
      raise UserError(f"{name}: the archive is corrupt or truncated ({type(e).__name__}: {e}); the download is "
                      "damaged: rerun to fetch it again, or check its source in the config") from None
    return f"archive of {n} members, gzip CRC intact"
  return None


# ------------------------------------------------------------------------------------------------ fetch

def fetch(source: str, dest: str | Path, *, md5: str | None, root: str | Path = ".", path: str | None = None,
          listing: str | Path | None = None, uri: str | Path | None = None, gdrive_url: str = GDRIVE_URL,
          attempts: int = 5, backoff: float = 2.0, policy: FetchPolicy = FetchPolicy(), sidecar: bool = False,
          log: Callable[[str], None] = print, quiet: bool = False) -> dict:
  """Bring `source` to `dest`, verifying `md5` when one is given and the content by its kind.

  An R2 source needs the dataset's cached `listing` (md5 list) and `uri` (base URL) files; `path` names the
  file in the dataset (default: the target's name). `sidecar` writes `<dest>.sha256` once the target is in
  place. `policy` bounds an HTTP fetch (deadline, stall, size; see data/http.py).
  Returns {"source", "md5", "sha256", "bytes", "checked"}.
  """
  dest = Path(dest)
  checked: list[str] = []

  def validate(p: Path) -> None:
    c = validate_content(p, dest.name)
    if c: checked.append(c)

  with r2.one_line_os_errors(dest):
    info = _fetch(source, dest, md5=md5, root=root, path=path, listing=listing, uri=uri, gdrive_url=gdrive_url,
                  attempts=attempts, backoff=backoff, policy=policy, validate=validate, log=log, quiet=quiet)
    if sidecar:
      with atomic_path(dest.with_name(dest.name + ".sha256")) as tmp:
        tmp.write_text(f"{info['sha256']}  {dest.name}\n")
  if checked:
    log(f"{dest.name}: {checked[0]}")
  return {**{k: info[k] for k in ("source", "md5", "sha256", "bytes")}, "checked": checked[0] if checked else None}


def _fetch(source, dest: Path, *, md5, root, path, listing, uri, gdrive_url, attempts, backoff, policy, validate, log,
           quiet):
  kind, where = resolve_source(source, root=root, gdrive_url=gdrive_url)
  dest.parent.mkdir(parents=True, exist_ok=True)
  net = dict(attempts=attempts, backoff=backoff, policy=policy, log=log)
  if kind == "r2":
    name = r2.dataset_name(source, root=root)
    if listing is None or uri is None:  # the command line: list the dataset into a scratch folder first
      with scratch_dir(dest.parent, f".{dest.name}.") as d:
        r2.fetch_listing(source, d / "list.md5", d / "list.uri", root=root, **net)
        return r2.fetch_member(d / "list.md5", d / "list.uri", path or dest.name, dest, dataset=name, root=root,
                               md5=md5, validate=validate, progress=not quiet, **net)
    return r2.fetch_member(listing, uri, path or dest.name, dest, dataset=name, root=root, md5=md5, validate=validate,
                           progress=not quiet, **net)
  if kind == "url":
    log(f"downloading {redact(where)} -> {dest}")
    return download_file(where, dest, md5=md5, what=dest.name, allow_redirects=True, progress=not quiet,
                         validate=validate, **net)
  part = part_path(dest, md5, where)
  if kind == "path":
    if not Path(where).is_file():
      raise UserError(f"{dest.name}: source file {redact(where)} does not exist; fix the path under "
                      f"sources/{dest.name}/url in the config, or point it at a URL or gdrive:<id>")
    log(f"copying {redact(where)} -> {dest}")
    copy_to_part(where, part)
  else:
    _gdown(where, dest, part, attempts=attempts, backoff=backoff, policy=policy, log=log, quiet=quiet)
  return finish_part(part, dest, md5=md5, source=redact(source), what=dest.name, validate=validate, log=log)


def _gdown(url: str, dest: Path, part: Path, *, attempts, backoff, policy: FetchPolicy, log, quiet) -> None:
  """gdown into `part`; bounded by policy.deadline_s (gdown does its own reads: no stall or size bound here)."""
  import gdown, requests
  log(f"downloading {redact(url)} -> {dest}")
  warn_loose_netrc(url, log)   # gdown's requests session reads it too

  def once():
    # gdown keeps partial files of its own beside its output: give it a private folder that always goes away
    with scratch_dir(dest.parent, f".{dest.name}.") as scratch:
      out = scratch / dest.name
      try:
        got = gdown.download(url=url, output=str(out), quiet=quiet, use_cookies=False)
      except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as e:
        raise NetworkError(f"{type(e).__name__}: {e}") from e
      except Exception as e:  # gdown's FileURLRetrievalError (quota, private file) and HTTP errors: not retried
        raise UserError(f"{dest.name}: download from {redact(url)} failed ({type(e).__name__}: {redact(e)}); check the source under "
                        f"sources/{dest.name}/url, or use MLCommons' storage (config/mlperf.yaml), then rerun") from e
      if got is None or not out.is_file():
        raise UserError(f"{dest.name}: download from {redact(url)} produced no file; check the source under "
                        f"sources/{dest.name}/url, then rerun")
      os.replace(out, part)

  with_retries(once, url, dest.name, attempts=attempts, backoff=backoff, log=log, deadline=policy.file_deadline())

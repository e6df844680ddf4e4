"""What the workflow reads, while it plans, of the lists its jobs wrote: the topics of the md5 manifest
(bert_reference_results_text_md5.txt) or of an R2 dataset's cached md5 list (download/r2/<dataset>.md5), and the md5
that list gives a download.

Snakemake asks for these per job (every shard, train, provenance and download job, several times while it plans); each
file is read once per version of it (its path and mtime), so that planning many seeds or topics stays fast
(bench/bench_dryrun.py). A list not fetched yet, or one that does not parse, reads as nothing: the job that fetches it
(checkpoint r2_listing) comes first, and the jobs that read it name its problems in one line.
"""
from __future__ import annotations
import functools, hashlib, os
from pathlib import Path
from typing import Any

from mlperf_bert.data import r2
from mlperf_bert.data.extract import topics
from mlperf_bert.errors import UserError


def manifest_topics(manifest: str | Path) -> list[str]:
  """The training topics (part-XXXXX-of-NNNNN) of the md5 manifest, sorted."""
  return list(_manifest_topics(str(manifest), os.stat(manifest).st_mtime_ns))


@functools.lru_cache(maxsize=None)
def _manifest_topics(path: str, mtime_ns: int) -> tuple[str, ...]:
  return tuple(topics(path))


def dataset_topics(listing: str | Path, dataset: str) -> list[str]:
  """The training topics of an R2 dataset holding the extracted text, from its cached md5 list; UserError (one line)
  when the list is not the extracted MLPerf text."""
  return sorted(n for n in r2.text_entries(r2.read_listing(listing), dataset) if n != "eval.txt")


def listed(listing: str | Path) -> tuple[dict[str, str] | None, dict[str, str] | None]:
  """({relative path: md5}, {text name (part-XXXXX-of-NNNNN, eval.txt): md5}) of a cached md5 list; (None, None)
  before it is fetched or when it does not parse. The text names are empty when the dataset holds no extracted text."""
  try:
    return _listed(str(listing), os.stat(listing).st_mtime_ns)
  except (OSError, UserError):
    return None, None


@functools.lru_cache(maxsize=None)
def _listed(path: str, mtime_ns: int) -> tuple[dict[str, str], dict[str, str]]:
  listing = r2.read_listing(path)
  try:
    names = r2.text_entries(listing, "?")
  except UserError:
    names = {}
  return listing, {n: listing[rel] for n, rel in names.items()}


def listed_md5(source: dict[str, Any], name: str, listings: str | Path, *, root: str | Path) -> str | None:
  """The md5 the cached list of its dataset (under `listings`, download/r2/) gives the download `name` of a config
  source ({url, path?}); None for a source that is no R2 dataset, a list not fetched yet, or a file it does not hold."""
  if not r2.is_r2(source["url"]):
    return None
  listing, _ = listed(Path(listings) / f"{r2.dataset_name(source['url'], root=root)}.md5")
  try:
    return listing[r2.find_entry(listing, source.get("path") or name, "?")] if listing else None
  except UserError:
    return None


def text_md5s(listing: str | Path) -> dict[str, str]:
  """{text name: md5} of a cached md5 list ({} before it is fetched)."""
  return listed(listing)[1] or {}


def text_digest(listing: str | Path) -> str:
  """A digest of the text's md5s in a cached md5 list: it changes when the text changes, not when the list is fetched
  again."""
  return hashlib.md5(repr(sorted(text_md5s(listing).items())).encode()).hexdigest()

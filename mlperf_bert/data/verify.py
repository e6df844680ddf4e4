"""Verification of extracted text: each file against the md5 manifest, eval.txt article by article."""
from __future__ import annotations
import hashlib
from pathlib import Path
from typing import Callable

from mlperf_bert.errors import UserError
from mlperf_bert.data.extract import parse_manifest
from mlperf_bert.fileio import atomic_path, file_digest


def verify_file(path: str | Path, manifest_path: str | Path, stamp: str | Path | None = None,
                log: Callable[[str], None] = print) -> str:
  """Check `path` against its line in the manifest; write `stamp` (`<md5>  <name>`) when it matches."""
  path = Path(path)
  manifest = parse_manifest(manifest_path)
  if path.name not in manifest:
    raise UserError(f"{path}: not listed in {manifest_path}; the manifest lists {len(manifest)} files. "
                    "Download the manifest again or remove the stray file")
  expected = manifest[path.name]
  actual = file_digest(path, "md5")
  if actual != expected:
    raise UserError(f"{path}: MD5 mismatch: expected {expected} (from {manifest_path}), got {actual}. The file "
                    "was changed or extracted from a different archive; extract it again with `snakemake --forcerun extract`")
  log(f"{path.name}: md5 {actual} matches the manifest")
  _stamp(stamp, f"{actual}  {path.name}\n")
  return actual


def eval_articles(text: str) -> list[str]:
  """Articles of eval.txt as MLCommons hashes them: split on a blank line, empty pieces dropped."""
  return [a for a in text.split("\n\n") if a.strip()]


def verify_eval_articles(eval_txt: str | Path, eval_md5: str | Path, stamp: str | Path | None = None,
                         log: Callable[[str], None] = print) -> int:
  """Check every article of eval.txt against the article hashes of `eval_md5` (md5 of `article.rstrip()`)."""
  want = [l.strip().lower() for l in Path(eval_md5).read_text(encoding="utf-8").splitlines() if l.strip()]
  arts = eval_articles(Path(eval_txt).read_text(encoding="utf-8", errors="replace"))
  got = [hashlib.md5(a.rstrip().encode("utf-8")).hexdigest() for a in arts]
  if len(got) != len(want):
    raise UserError(f"{eval_txt}: {len(got)} articles, but {eval_md5} lists {len(want)}; the eval text is not the "
                    "MLPerf one: extract it again, or point eval_md5 in the config at the matching hash list")
  for i, (g, w) in enumerate(zip(got, want)):
    if g != w:
      first = arts[i].strip().splitlines()[0][:60] if arts[i].strip() else ""
      raise UserError(f"{eval_txt}: article {i + 1} ({first!r}...) has md5 {g}, {eval_md5} expects {w}; "
                      "extract it again with `snakemake --forcerun extract`, or check eval_md5 in the config")
  log(f"{eval_txt}: all {len(got)} articles match {eval_md5}")
  _stamp(stamp, f"{len(got)} articles match {Path(eval_md5).name}\n")
  return len(got)


def _stamp(stamp: str | Path | None, text: str) -> None:
  """Write a verification stamp atomically (nothing when no stamp path is given)."""
  if stamp is not None:
    with atomic_path(stamp) as tmp:
      Path(tmp).write_text(text)

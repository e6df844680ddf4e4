"""What an audited PATH is: a submission org directory, a directory of them, or a workflow basedir."""
from __future__ import annotations
from pathlib import Path

from mlperf_bert.errors import UserError


def is_org_dir(p: Path) -> bool:
  return (p / "results").is_dir() and (p / "systems").is_dir()


def is_basedir(p: Path) -> bool:
  if any(p.glob("results/*/result_bert_*.log")): return True
  return (p / "shards").is_dir() or (p / "download").is_dir() or (p / "eval").is_dir()


def detect_kind(path: Path) -> str:
  """'org' (a submission org directory), 'orgs' (a directory of them) or 'basedir' (a workflow tree)."""
  if not path.is_dir():
    raise UserError(f"{path}: not a directory; pass a submission org directory (<org>/ with results/ and systems/), "
                    "a directory of them, or a workflow basedir")
  if is_org_dir(path): return "org"
  if is_basedir(path): return "basedir"
  if any(is_org_dir(c) for c in path.iterdir() if c.is_dir()): return "orgs"
  raise UserError(f"{path}: neither a submission org directory (results/ and systems/), a directory of them, nor a "
                  "workflow basedir (results/<platform>/result_bert_<seed>.log, shards/, download/)")

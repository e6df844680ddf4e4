"""The first links of a workflow tree's chain: config md5 -> download -> text. Every download the config pins an md5
for (`sources`) is checked against it, as the download rule checked it; every file of results4/ as the workflow's
verify rules checked it when it was extracted (data/verify.py): each topic and eval.txt against the download's own md5
list (download/bert_reference_results_text_md5.txt, itself pinned by the config, except an R2 dataset's), and eval.txt
article by article against the config's eval_md5 (a file of the checkout, never of the tree). A topic whose text was
replaced and its shard rebuilt from it honestly (which the re-execution then rebuilds byte for byte) stops here.

    check_text(audit, base, hasher, config, workflow_dir)
"""
from __future__ import annotations
from pathlib import Path
from typing import Callable

from mlperf_bert.audit.rows import CHAIN, Audit, shorten
from mlperf_bert.errors import UserError

LINK = "md5 list -> text"
PINNED = "config md5 -> download"
EVAL_LINK = "eval.md5 -> eval text"
EXTRACT = "extract it again: snakemake --forcerun extract (then the shards, the eval set and training rerun)"


def _eval_md5(config: dict, workflow_dir: Path) -> Path | None:
  """The config's eval_md5: absolute, or relative to the workflow (as rules/common.smk's repo_path reads it)."""
  p = config.get("eval_md5")
  if not isinstance(p, str) or not p: return None
  return Path(p) if Path(p).is_absolute() else workflow_dir / p


def check_downloads(audit: Audit, base: Path, hasher: Callable, config: dict) -> set[str]:
  """Each file of download/ the config pins an md5 for (`sources`) against it, as the download rule checked it; the
  names that differ (each a FAIL row)."""
  pins = {n: str(s["md5"]).lower() for n, s in (config.get("sources") or {}).items()
          if isinstance(s, dict) and s.get("md5") and (base / "download" / n).is_file()}
  bad = set()
  for name, want in sorted(pins.items()):
    if (got := hasher(base / "download" / name)["md5"]) != want:
      audit.add("FAIL", CHAIN, f"download/{name}", f"{PINNED}: md5 {got}, the config pins {want} for it: it is not the "
                f"file the config names; download it again (delete it, then snakemake all)"); bad.add(name)
  if pins and not bad:
    audit.add("PASS", CHAIN, "download", f"{PINNED}: the {len(pins)} download(s) the config pins an md5 for match it "
              f"({', '.join(sorted(pins))})")
  return bad


def read_manifest(audit: Audit, base: Path, bad: set[str]) -> dict[str, str] | None:
  """download/<md5 list> as {file: md5}, or None (a FAIL row said why)."""
  from mlperf_bert.data.download import MANIFEST
  from mlperf_bert.data.extract import parse_manifest
  path = base / "download" / MANIFEST
  rel = str(path.relative_to(base))
  if MANIFEST in bad: return None
  if not path.is_file():
    audit.add("FAIL", CHAIN, rel, f"{LINK}: missing, so results4/ cannot be checked; download it again (snakemake all)")
    return None
  try:
    return parse_manifest(path)
  except (UserError, OSError, UnicodeDecodeError) as e:
    audit.add("FAIL", CHAIN, rel, f"{LINK}: {e}"); return None


def check_eval_text(audit: Audit, base: Path, config: dict, workflow_dir: Path) -> None:
  """results4/eval.txt article by article against the config's eval_md5, whatever the md5 list says."""
  from mlperf_bert.data.verify import verify_eval_articles
  ev, eval_md5 = base / "results4" / "eval.txt", _eval_md5(config, workflow_dir)
  if not ev.is_file(): return
  if eval_md5 is None or not eval_md5.is_file():
    audit.add("WARN", CHAIN, "results4/eval.txt", f"{EVAL_LINK}: the config's eval_md5 ({config.get('eval_md5')}) is "
              "not there, so its articles are not checked; pass the run's config (--configfile)"); return
  try:
    n = verify_eval_articles(ev, eval_md5, log=lambda _: None)
  except (UserError, OSError) as e:
    audit.add("FAIL", CHAIN, "results4/eval.txt", f"{EVAL_LINK}: {e}"); return
  audit.add("PASS", CHAIN, "results4/eval.txt", f"{EVAL_LINK}: its {n} articles match {eval_md5.name}")


def check_text(audit: Audit, base: Path, hasher: Callable, config: dict | None, workflow_dir: Path) -> None:
  """The downloads the config pins, each file of results4/ against the md5 list, and eval.txt against eval_md5 (see
  the module doc)."""
  from mlperf_bert.data.download import MANIFEST
  cfg = config or {}
  bad_downloads = check_downloads(audit, base, hasher, cfg)
  texts = sorted(f for f in (base / "results4").iterdir() if f.is_file()) if (base / "results4").is_dir() else []
  if not texts: return
  check_eval_text(audit, base, cfg, workflow_dir)
  listed = read_manifest(audit, base, bad_downloads)
  if listed is None: return
  bad = 0
  for f in texts:
    rel = str(f.relative_to(base))
    if f.name not in listed:  # an archive's extra file is extracted but never used; a shard built from it is
      used = (base / "shards" / f"{f.name}.shard").is_file()
      audit.add("FAIL" if used else "WARN", CHAIN, rel, f"{LINK}: not listed in download/{MANIFEST}" +
                (f", yet shards/{f.name}.shard was built from it: not a file of the download; remove both and "
                 f"retrain" if used else ": not used by the workflow")); bad += used
    elif (md5 := hasher(f)["md5"]) != listed[f.name]:
      audit.add("FAIL", CHAIN, rel, f"{LINK}: md5 {md5}, download/{MANIFEST} lists {listed[f.name]}: the text was "
                f"changed after it was extracted (whatever was built from it since); {EXTRACT}"); bad += 1
  absent = [n for n in listed if not (base / "results4" / n).is_file()]
  if absent:
    audit.add("WARN", CHAIN, "results4", f"{LINK}: {len(absent)} file(s) the md5 list names are not present, so not "
              f"checked: {shorten(absent)}")
  if not bad:
    pinned = ((cfg.get("sources") or {}).get(MANIFEST) or {}).get("md5")
    how = "its md5 pinned by the config" if pinned else "taken on trust: the config pins no md5 for it"
    audit.add("PASS", CHAIN, "results4", f"{LINK}: the {sum(f.name in listed for f in texts)} file(s) of results4/ it "
              f"lists match download/{MANIFEST} ({how})")

"""`python -m mlperf_bert audit PATH`: check MLPerf BERT results with mlperf-logging's own tools.

PATH is one of (detected in this order):
  * a submission org directory: `<org>/` holding `results/<system>/bert/result_<i>.txt` and `systems/<system>.json`;
  * a directory of org directories (an MLCommons results repository, or `{basedir}/submission/`);
  * a workflow basedir (has `results/<platform>/result_bert_<seed>.log`, `shards/` or `download/`): Snakemake's
    dry run, every artifact re-hashed against the provenance records and the shard checksum list, and the log
    checks on every result log (tree.py's `audit_basedir`).

Every check is one row: PASS, FAIL, WARN (worth a look, not disqualifying), DROP (a run olympic scoring drops) or
SKIP (not applicable, with the reason). The exit status is 1 when any row FAILs, 0 otherwise, 2 for bad usage.
Nothing is written into the audited tree: the result summarizer and package checker run on a temporary copy.
See docs/audit.md.
"""
from __future__ import annotations
import os
from pathlib import Path

from mlperf_bert.constants import RULESET
from mlperf_bert.audit.bounded import Budget
from mlperf_bert.audit.org import audit_submission
from mlperf_bert.audit.path_kind import detect_kind
from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.tree import audit_basedir


def run_audit(path: str | os.PathLike, *, ruleset: str = RULESET, strict: bool = False,
              workflow_dir: str | os.PathLike | None = None, workdir: str | os.PathLike | None = None,
              configfiles: list[str] | None = None, config: list[str] | None = None, dry_run: bool = True,
              reexecute: bool = True, reexecute_seed: int | None = None,
              reexecute_budget: float | str | Budget | None = None,
              reexecute_parts: tuple[str, ...] | None = None) -> Audit:
  """Audit PATH, whichever kind it is."""
  p = Path(path)
  if detect_kind(p) == "basedir":
    return audit_basedir(p, ruleset=ruleset, strict=strict, workflow_dir=workflow_dir, workdir=workdir,
                         configfiles=configfiles, config=config, dry_run=dry_run, reexecute=reexecute,
                         reexecute_seed=reexecute_seed, reexecute_budget=reexecute_budget,
                         reexecute_parts=reexecute_parts)
  audit = audit_submission(p, ruleset, strict)
  audit.add("SKIP", "re-execution", str(p), "not re-executable: a received submission holds logs only (no shard "
            "text, no final weights); its numbers are checked, not redone")
  if any(r.check == "time" and r.status in ("PASS", "FAIL") for r in audit.rows):   # audit/step_band.py's rows
    audit.add("SKIP", "time", str(p), "steps taken on trust: a received submission holds no training states, so how "
              "many steps its runs took is not re-executed (they are counted from the samples the logs say they "
              "trained); where its system.json names cards the model knows, its logs' eval intervals and whole runs "
              "are held to the cost model's predicted band (the time rows above)")
  else:
    audit.add("SKIP", "time", str(p), "time and steps taken on trust: a received submission holds no training states, "
              "so neither how many steps its runs took nor how long is re-executed or bounded by its hardware (its "
              "system.json names no cards the cost model knows); its logs' times are scored as they say")
  return audit

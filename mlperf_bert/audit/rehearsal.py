"""A rehearsal's log (rehearse=true: a profile's submission path on the CPU, mlperf_bert/train/rehearsal.py) says so in
a `:::MLLOG` line of key `rehearsal`. The audit reads that line: "rehearsal: not a submission", a FAIL in a received
submission (it is no result) and a SKIP of the scoring in a workflow tree, which is then rebuilt as a rehearsal
(`rehearse=true`) when the audit's config does not say it, so its config and dry run compare like with like."""
from __future__ import annotations
from pathlib import Path

from mlperf_bert.audit.logs import MLPerfLog, read_log
from mlperf_bert.audit.rows import Row
from mlperf_bert.mlperf_log import REHEARSAL_KEY

REHEARSAL_SUFFIX = "-rehearsal"   # results/<platform>-rehearsal/: where the workflow puts a rehearsal's logs


def is_rehearsal(log: MLPerfLog) -> bool:
  return log.first(REHEARSAL_KEY) is not None


def check_rehearsal(log: MLPerfLog, s: str, scoring: bool) -> list[Row]:
  if not is_rehearsal(log):
    return []
  said = str(log.value(REHEARSAL_KEY))[:120]
  if scoring:
    return [Row("FAIL", "rehearsal", s, f"rehearsal: not a submission (its `rehearsal` line: {said!r}); submit the "
                "logs of real runs")]
  return [Row("SKIP", "rehearsal", s, f"rehearsal: not a submission ({said!r}); its logs are checked, not scored")]


def rehearsal_config(logs: list[Path], overrides: dict[str, str]) -> None:
  """A tree whose logs are all one platform's rehearsal is rebuilt with rehearse=true and that platform, unless the
  overrides (`--config`) say otherwise."""
  dirs = {l.parent.name for l in logs}
  if "rehearse" in overrides or len(dirs) != 1 or not dirs.pop().endswith(REHEARSAL_SUFFIX): return
  if all(is_rehearsal(read_log(l)) for l in logs):
    overrides["rehearse"] = "true"
    overrides.setdefault("platform", logs[0].parent.name.removesuffix(REHEARSAL_SUFFIX))

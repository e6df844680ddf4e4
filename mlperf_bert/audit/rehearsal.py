"""A rehearsal's log (rehearse=true: a platform's submission path on the CPU, mlperf_bert/train/rehearsal.py) says so in
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


def rehearsal_settings_rows(base: Path, logs: list[Path], workflow_dir: Path) -> list[Row]:
  """For each rehearsal log of a tree: every setting its run had (its train record) that is not its platform's
  (platforms/<platform>/platform.yaml of the workflow), as the workflow's rehearsal note names them."""
  from mlperf_bert.constants import PLATFORMS_DIR, platform_path
  from mlperf_bert.errors import UserError
  from mlperf_bert.train.hparams import load_platform
  from mlperf_bert.train.record import read_record, record_path
  from mlperf_bert.train.rehearsal import changed_settings
  from mlperf_bert.train.settings import Settings
  rows = []
  for log in logs:
    if not log.parent.name.endswith(REHEARSAL_SUFFIX) or not is_rehearsal(read_log(log)): continue
    platform = log.parent.name.removesuffix(REHEARSAL_SUFFIX)
    platform_file = platform_path(workflow_dir, platform)
    shown = f"{PLATFORMS_DIR}/{platform}/{platform_file.name}"
    try:
      run = Settings.from_dict(dict(read_record(record_path(log))["settings"]))
      changed = changed_settings(load_platform(platform_file), run)
    except (UserError, OSError, KeyError, TypeError, ValueError) as e:
      rows.append(Row("WARN", "rehearsal", str(log.relative_to(base)), f"its settings are not compared with "
                      f"{shown}: {e}")); continue
    rows.append(Row("SKIP", "rehearsal", str(log.relative_to(base)), f"rehearsal settings (its train record against "
                    f"{shown}): {', '.join(changed) or 'none changed'}; every other setting is the platform's"))
  return rows

"""A received submission's step times against the cost model's predicted band (mlperf_bert/train/cost/band.py).

    check_step_band(audit, org_dir, system, logs)

When systems/<system>.json names cards the model knows (its accelerator_model_name and accelerators_per_node are
those of one of CARD_PLATFORMS's platforms/<name>/system.json: tinycorp's boxes), each log's step time is read as the
published figures are (interval_steps, which tools/record_published_steps.py shares: between an eval_stop and the next eval_start only train steps run,
(time between them) / (steps between them); the log's figure is the median over its eval intervals) and held to the
low edge of the band predicted for that platform at the log's global_batch_size: a median below it FAILs (the log
trains faster than its hardware can). A system naming other cards is not held (no row); one whose cards are known
but whose batch has no prediction is a SKIP row saying so.
"""
from __future__ import annotations
import json, statistics
from pathlib import Path
from typing import Iterable

from mlperf_bert.audit.logs import MLPerfLog
from mlperf_bert.audit.rows import Audit, shorten
from mlperf_bert.audit.times import FASTER, TIME
from mlperf_bert.audit.untrusted import read_untrusted_json
from mlperf_bert.constants import REPO, system_path
from mlperf_bert.train.cost.band import PREDICTED, step_band

CARD_PLATFORMS = ("tinybox_green", "tinybox_red", "tinybox_8xMI300X")   # the platforms whose cards the cost model predicts


def _cards(desc: object) -> tuple[str, str] | None:
  """(model name, count) as a system description names its cards: stripped text, the count as a number's text."""
  if not isinstance(desc, dict): return None
  name, count = desc.get("accelerator_model_name"), desc.get("accelerators_per_node")
  if not isinstance(name, str) or isinstance(count, bool) or not isinstance(count, (str, int)): return None
  try: return name.strip(), str(int(str(count).strip()))
  except ValueError: return None


def known_platform(desc: object, repo: Path = REPO) -> str | None:
  """The CARD_PLATFORMS platform whose platforms/<name>/system.json names the same cards as `desc`, or None."""
  mine = _cards(desc)
  if mine is None: return None
  for name in CARD_PLATFORMS:
    try: ref = json.loads(system_path(repo, name).read_text())
    except (OSError, ValueError): continue
    if _cards(ref) == mine: return name
  return None


def interval_steps(events: Iterable) -> list[float]:
  """A log's step times (ms), one an eval interval, from its records (in file order): between an eval's eval_stop and
  the next eval's eval_start only train steps run, so (time between them) / (the steps between their step_num) is a
  clean step time. The first interval, from run_start to the first eval, holds the warm-up and is not one. Intervals
  without a step_num on both ends, or with no step between them, are left out."""
  out, stop = [], None
  for e in events:
    step = e.metadata.get("step_num")
    step = step if isinstance(step, int) and not isinstance(step, bool) else None
    if e.key == "eval_stop":
      stop = (step, e.time_ms)
    elif e.key == "eval_start":
      if stop is not None and stop[0] is not None and step is not None and step > stop[0]:
        out.append((e.time_ms - stop[1]) / (step - stop[0]))
      stop = None
  return out


def log_step_ms(log: MLPerfLog) -> tuple[float, int] | None:
  """(the median step time in ms over the log's eval intervals, how many), or None when it has none."""
  per = interval_steps(log.events)
  return (statistics.median(per), len(per)) if per else None


def check_step_band(audit: Audit, org_dir: Path, system: str, logs: list[MLPerfLog], repo: Path = REPO,
                    predicted: Path = PREDICTED) -> None:
  """The `time` rows of one results/<system>/ (see the module doc)."""
  desc, why = read_untrusted_json(org_dir / "systems" / f"{system}.json", org_dir)
  platform = None if why else known_platform(desc, repo)
  if platform is None: return   # cards the model does not know (or no readable description: its own row says so)
  name, count = _cards(desc)
  cards = f"{count} x {name} in systems/{system}.json"
  held, none, fails, bands, unpredicted = [], [], 0, {}, {}
  for lg in logs:
    if lg.unread or lg.path is None: continue
    subject = f"{system}/{lg.path.name}"
    bs = lg.global_batch_size
    step = log_step_ms(lg)
    if isinstance(bs, bool) or not isinstance(bs, int) or step is None:
      none.append(lg.path.name); continue
    band = bands[bs] if bs in bands else bands.setdefault(bs, step_band(platform, bs, predicted))
    if band is None:
      unpredicted.setdefault(bs, []).append(lg.path.name); continue
    ms, k = step
    if ms < band.low_ms:
      fails += 1
      audit.add("FAIL", TIME, subject, f"{ms:.1f} ms a step logged (the median of its {k} eval intervals, an "
                f"eval_stop to the next eval_start); {band.describe()} for its {cards}: {FASTER}")
    else:
      held.append((lg.path.name, ms, band))
  if held:
    lo, hi = min(h[1] for h in held), max(h[1] for h in held)
    said = "; ".join(dict.fromkeys(h[2].describe() for h in held))
    audit.add("PASS", TIME, system, f"{'the other ' if fails else ''}{len(held)} log(s)' step times, {lo:.1f}-{hi:.1f} "
              f"ms (each log's median over its eval intervals, an eval_stop to the next eval_start), hold the low edge "
              f"of the band predicted for its {cards}: {said}")
  for bs, names in unpredicted.items():
    audit.add("SKIP", TIME, system, f"{cards} are {platform}'s cards, but {predicted.name} holds no prediction for "
              f"{platform} at BS {bs} (the global_batch_size of {shorten(names)}): their step times are taken on trust")
  if none:
    audit.add("WARN", TIME, system, f"{len(none)} log(s) without an eval interval with step numbers or without a "
              f"numeric global_batch_size ({shorten(none)}): their step times are not held to {platform}'s band")

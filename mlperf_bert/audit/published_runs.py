"""tinycorp's published runs of each tinybox, as a received log's time is held to them (audit/step_band.py).

    least_warmup("tinybox_green")                                   # (118.5, "the least a published run ... had, ...")
    published_floor("tinybox_green", "tinygrad, branch mlperf_training_v5.0", 96)   # Floor(...) or None

resources/published/tinycorp-runs.json (tools/record_published_runs.py on every v4.1 and v5.0 BERT log of tinycorp
in MLCommons' repositories) holds, per run: its round, log, global batch, the `framework` its system.json names, its
warm-up (audit/run_time.py warmup_s), its eval intervals' LOW_QUANTILE step and their median; and `machine_spread`, the
widest spread of one platform's runs of one software (slowest median over fastest, less 1: tinybox_red v5.0's).

A received log on a box's cards whose system.json names the software of a published submission of that box (its
`framework`, compared without case and spacing), at a published global batch, reproduces that submission: its steps
cannot be faster than the fastest published run's by more than one box's machines differ. That floor is far closer
than the cost model's band (-15 %): it is measured, on the same cards, with the same software.
"""
from __future__ import annotations
import dataclasses, functools, json
from pathlib import Path

from mlperf_bert.constants import REPO

PUBLISHED_RUNS = REPO / "resources" / "published" / "tinycorp-runs.json"


@dataclasses.dataclass(frozen=True)
class Floor:
  """The least step (ms) a reproduction of a published submission can log, and where it comes from."""
  step_ms: float        # the fastest published run's LOW_QUANTILE interval step / (1 + the machines' spread)
  fastest_ms: float     # that run's LOW_QUANTILE interval step
  spread: float         # machine_spread
  runs: int             # the published runs of that software and batch
  said: str             # in words: which runs, the fastest, the spread and where it is from


def framework_key(framework: object) -> str:
  """A system.json's `framework` as the runs are matched: lower case, without spaces."""
  return "".join(str(framework).lower().split())


@functools.lru_cache(maxsize=4)
def _read_record(path: str, mtime_ns: int) -> dict:
  try: data = json.loads(Path(path).read_text())
  except (OSError, ValueError): return {}
  return data if isinstance(data, dict) else {}


def read_runs(path: Path = PUBLISHED_RUNS) -> dict:
  """The record ({} when absent or unreadable: nothing is held to it)."""
  try: return _read_record(str(path), Path(path).stat().st_mtime_ns)
  except OSError: return {}


def _platform_record(platform: str, path: Path) -> dict:
  rec = read_runs(path).get("platforms", {})
  got = rec.get(platform) if isinstance(rec, dict) else None
  return got if isinstance(got, dict) else {}


def _num(v: object) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def least_warmup(platform: str, path: Path = PUBLISHED_RUNS) -> tuple[float, str]:
  """(seconds, where from) of the least warm-up a published run of `platform` had; (0, why) without a figure."""
  rec = _platform_record(platform, path)
  if not _num(rec.get("least_warmup_s")):
    return 0.0, f"no published warm-up of {platform} on record ({Path(path).name}): none counted"
  return float(rec["least_warmup_s"]), f"the least a published run of {platform} had, {rec.get('least_in')}"


def published_floor(platform: str, framework: object, global_bs: int, path: Path = PUBLISHED_RUNS) -> Floor | None:
  """The floor of a reproduction of `platform`'s published submission whose software is `framework` at `global_bs`;
  None when no published run of the platform names that software at that batch (or the record has no spread)."""
  data = read_runs(path)
  spread = data.get("machine_spread", {}).get("value") if isinstance(data.get("machine_spread"), dict) else None
  if not _num(spread) or spread < 0 or not framework: return None
  key = framework_key(framework)
  runs = [r for r in _platform_record(platform, path).get("runs", []) if isinstance(r, dict)
          and framework_key(r.get("framework", "")) == key and r.get("global_batch_size") == global_bs
          and _num(r.get("interval_q_ms"))]
  if not runs: return None
  fast = min(runs, key=lambda r: r["interval_q_ms"])
  step = fast["interval_q_ms"] / (1 + spread)
  said = (f"{len(runs)} published run(s) of {platform} with this software ('{fast.get('framework')}') at BS "
          f"{global_bs}, the fastest v{fast.get('round')} {fast.get('log')} at {fast['interval_q_ms']:.1f} ms, less "
          f"the {spread:.1%} one box's machines differ ({data['machine_spread'].get('from', 'machine_spread')}; "
          f"{Path(path).name}): {step:.1f} ms")
  return Floor(round(step, 2), float(fast["interval_q_ms"]), float(spread), len(runs), said)

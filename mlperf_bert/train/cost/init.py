"""The INIT phase's time (mlperf_bert/train/cost/): every distinct program of the train and eval steps is a BEAM search
on the box, against MLPerf's limit (closed: init < 30 min;
constants.INIT_LIMIT_MIN).

    init = init_time(programs=490 + 52, beam_s=beam_seconds("tinybox_green").seconds)

- **BEAM seconds a program** cannot be read from tinygrad's BEAM code (a search's time is its candidates' compiles
  and timed runs on the card), so it is estimated from tinycorp's published v5.0 INIT phases
  (resources/published/tinycorp-v5.0-overheads.json: init_stop - init_start, the median of each system's runs,
  tools/record_published_overheads.py) over the distinct programs of tinygrad's own train and eval steps,
  TINYGRAD_PROGRAMS: the median over the *other* systems (the system predicted left out), their lowest and highest
  runs as the band. The whole INIT process is in that figure (Python, the model's build, the 10 short steps), so
  it is an upper figure a program.
- **The weights**: none are loaded in the INIT phase (tinygrad's model_train.py at e0139fa zeroes the model's
  weights "for init"; the checkpoint is loaded after run_start, inside the warm-up), so WEIGHT_LOAD_S = 0.
"""
from __future__ import annotations
import json, statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlperf_bert.constants import INIT_LIMIT_MIN
from mlperf_bert.train.cost.totrain import OVERHEADS_FILE

WEIGHT_LOAD_S = 0.0     # the INIT phase loads no weights (model_train.py at e0139fa: "for init, zero out all weights")
# distinct programs of tinygrad's own train_step_bert + eval_step_bert at e0139fa (v5.1), tinybox_green, BS 96:
# tools/dress_tinygrad.py, tests/fixtures/dress-tinygrad/tinybox_green-e0139fa-bs96.json, docs/benchmarks.md; the
# dressed commit nearest the v5.0 logs whose figures it divides (v5.0's own code was not dressed)
TINYGRAD_PROGRAMS = 252 + 68


@dataclass(frozen=True)
class BeamSeconds:
  seconds: float
  low: float
  high: float
  how: str


def beam_seconds(platform: str, path: Path = OVERHEADS_FILE, programs: int = TINYGRAD_PROGRAMS) -> BeamSeconds:
  """Seconds of INIT a distinct program: the other systems' published INIT phases over `programs`."""
  systems = json.loads(Path(path).read_text())["systems"]
  used = {n: v for n, v in systems.items() if n != platform}
  mid = statistics.median(v["init_s"] for v in used.values()) / programs
  low = min(v["init_s_range"][0] for v in used.values()) / programs
  high = max(v["init_s_range"][1] for v in used.values()) / programs
  secs = ", ".join(f"{v['init_s']:.0f}" for v in used.values())
  return BeamSeconds(mid, low, high, f"tinycorp's v5.0 INIT phases of {', '.join(used)} (median "
                     f"{secs} s) over tinygrad's own {programs} "
                     f"train and eval programs at e0139fa, {'leaving out ' + platform if platform in systems else 'all systems'}")


def init_time(programs: int, beam_s: float, low_s: float | None = None, high_s: float | None = None,
              weight_load_s: float = WEIGHT_LOAD_S, division: str = "closed") -> dict[str, Any]:
  """The INIT phase's minutes: `programs` BEAM searches of `beam_s` each (+ the weights' load), with its band
  (`low_s`/`high_s` a program), against the division's limit (closed: 30 min)."""
  m = lambda s: (programs * s + weight_load_s) / 60
  limit = INIT_LIMIT_MIN[division]
  out = {"minutes": round(m(beam_s), 1), "programs": programs, "beam_s_per_program": round(beam_s, 2),
         "weight_load_s": weight_load_s, "division": division, "limit_min": limit, "within_limit": m(beam_s) < limit}
  if low_s is not None and high_s is not None:
    out["low_minutes"], out["high_minutes"] = round(m(low_s), 1), round(m(high_s), 1)
  return out


def predict_init(platform: str, programs: int, path: Path = OVERHEADS_FILE) -> dict[str, Any]:
  """init_time of `programs` distinct programs with the BEAM seconds of the other systems, and how."""
  b = beam_seconds(platform, path)
  return {**init_time(programs, b.seconds, b.low, b.high), "how": b.how, "sources": "mlperf_bert/train/cost/init.py"}

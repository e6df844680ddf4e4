"""The predicted step time of a dress (mlperf_bert/train/cost/): each measured depth's calls simulated (simulate.py),
the step on the line through two depths at the config's depth, as the dress extrapolates memory.

    step = predict_step([(2, calls2), (4, calls4)], "CUDA:sm_89", depth=24)      # {"ms", "low_ms", "high_ms", ...}
    cost = predict_cost(answer)       # answer["cost"] of a dress's answer (COST-INTERFACES.md section 2), or None

The step from sources alone (`source_only_ms`) is multiplied by the box's `held_out` (hardware.py HELD_OUT: measured /
predicted of the other systems tinycorp published, never the system's own).

BEAM: the NULL device cannot time a kernel, so the dress compiles tinygrad's hand-coded options; the model never times
those. It runs every kernel at the fraction of the card's peak that tinygrad's BEAM'd kernels reach in tinygrad's own
speed test (hardware.py), i.e. it predicts the BEAM'd step from the hand-coded step's FLOPs, bytes, launch dimensions
and tensor-core use.
"""
from __future__ import annotations
import dataclasses
from typing import Any

from mlperf_bert.train.cost.hardware import BAND_HIGH, BAND_LOW, BOXES, Box
from mlperf_bert.train.cost.simulate import Simulated, critical_path, simulate

SOURCES = "mlperf_bert/train/cost/hardware.py"


def _at_depth(a: float, b: float, da: int, db: int, depth: int) -> float:
  return a + (b - a) * (depth - da) / (db - da)


def predict_step(points: list[tuple[int, list[dict]]], target: str, depth: int, devices: list[str] | None = None,
                 box: Box | None = None) -> tuple[dict[str, Any], Simulated]:
  """The step at `depth` layers from one or two measured depths' calls ((layers, calls) pairs) on `target`'s box:
  the answer's step dict (COST-INTERFACES.md section 2) and the simulation of the deepest depth measured."""
  box = box or BOXES[target]
  sims = [(layers, simulate(calls, box, devices)) for layers, calls in points]
  if len(sims) == 1 or sims[0][0] == sims[1][0]:
    (_, s), = sims[-1:]
    ms, bd = s.ms, dict(s.breakdown_ms)
  else:
    (da, sa), (db, sb) = sims[0], sims[1]
    ms = _at_depth(sa.ms, sb.ms, da, db, depth)
    bd = {k: max(0.0, _at_depth(sa.breakdown_ms[k], sb.breakdown_ms[k], da, db, depth)) for k in sa.breakdown_ms}
  deepest = sims[-1][1]
  f = box.held_out
  source_ms, ms, bd = ms, ms * f, {k: v * f for k, v in bd.items()}
  out = {"ms": round(ms, 2), "low_ms": round(ms * BAND_LOW, 2), "high_ms": round(ms * BAND_HIGH, 2),
         "breakdown_ms": {k: round(v, 2) for k, v in bd.items()},
         "critical_path": critical_path(dataclasses.replace(deepest, breakdown_ms=bd)),
         "sources": SOURCES, "source_only_ms": round(source_ms, 2), "held_out": round(f, 4)}
  return out, deepest


def _points(answer: dict[str, Any], step: str) -> list[tuple[int, list[dict]]]:
  return [(m["layers"], m[step]["calls"]) for m in answer["measurements"] if "calls" in m.get(step, {})]


def predict_cost(answer: dict[str, Any]) -> dict[str, Any] | None:
  """answer["cost"] of a dress's answer: the train and eval step predicted on its target's box, and the simulated
  events of one train step at the deepest measured depth; None when its target has no box or its measurements no
  calls (an answer of an older dress)."""
  target = answer.get("target")
  if target not in BOXES: return None
  train, evals = _points(answer, "train"), _points(answer, "eval")
  if not train or not evals: return None
  devices = answer["measurements"][-1]["devices"]
  step, sim = predict_step(train, target, answer["layers"], devices)
  eval_step, _ = predict_step(evals, target, answer["layers"], devices)
  f = BOXES[target].held_out    # the timeline on the step's scale (HELD_OUT, hardware.py)
  events = [dataclasses.asdict(dataclasses.replace(e, start_ms=round(e.start_ms * f, 4), end_ms=round(e.end_ms * f, 4)))
            for e in sim.events]
  return {"step": step, "eval_step": eval_step, "events": events,
          "events_layers": train[-1][0], "box": {"card": BOXES[target].card.name, "link_gbps": BOXES[target].link_gbps,
                                                "link": BOXES[target].link_source}}

"""The batch planner against tinygrad's history (docs/benchmarks.md, "The dress against tinygrad's history"): at each
of tinygrad's commits that changed tinybox_green's BS or FREE_INTERMEDIATE, which batches of the planner's grid fit
that commit's own step, and which the planner picks. Reads JSON only (nothing here imports tinygrad).

    v = planner_verdict(records, rows, usable)      # records: tools/dress_tinygrad.py's JSON of one commit
    verdict_text(v)                                  # "fits 72-90 (96: 0.63 GB over); picks 90"

Memory: the commit's own step (tools/dress_tinygrad.py, at 2 and 4 layers extrapolated to 24: report.tinygrad_prediction)
at each batch it was dressed at, on the line through them between and beyond (piecewise, the nearest two); a commit
dressed at one batch takes its slope along BS from SLOPE_FROM. Time to train: this project's own step at each batch
(the planner's sweep rows: the step-time model needs a step's calls, which the history's records do not hold). The
INIT phase is not weighed here (it varies little across the batches, 8.8-9.4 min for green's 72-96: the same
searches), so the pick is the least time to train among the batches that fit.
"""
from __future__ import annotations
from typing import Any

from mlperf_bert.train.dress.report import tinygrad_prediction

# a commit dressed at one batch: the commit dressed at two or more whose slope along BS it takes, the nearest in date
# (docs/benchmarks.md's history table: 77b5e6774e and 70dd297a05 are a day from e0139fafc1, 5034c6fb37 and 6cad622f59
# four and eight days from 4562f217e1)
SLOPE_FROM = {"77b5e6774e": "e0139fafc1", "70dd297a05": "e0139fafc1", "5034c6fb37": "4562f217e1",
              "6cad622f59": "4562f217e1"}


def worst_by_bs(records: list[dict[str, Any]]) -> dict[int, int]:
  """{BS: the worst moment at 24 layers, bytes a device} of one commit's dressed records."""
  return {int(r["settings"]["BS"]): int(tinygrad_prediction(r)["worst"]) for r in records}


def worst_at(points: dict[int, int], bs: int, slope: float | None = None) -> float:
  """The worst moment at `bs`: measured, on the line through the nearest two dressed batches, or (one dressed batch)
  along `slope` bytes a sample."""
  if bs in points: return float(points[bs])
  xs = sorted(points)
  if len(xs) == 1:
    if slope is None: raise ValueError("one dressed batch and no slope")
    return points[xs[0]] + slope * (bs - xs[0])
  lo = max([x for x in xs if x < bs] or xs[:1])
  hi = min([x for x in xs if x > bs] or xs[-1:])
  if lo == hi: lo, hi = (xs[0], xs[1]) if bs < xs[0] else (xs[-2], xs[-1])
  return points[lo] + (points[hi] - points[lo]) * (bs - lo) / (hi - lo)


def slope(points: dict[int, int]) -> float:
  """Bytes a sample of the worst moment along BS: the line through the two largest dressed batches."""
  a, b = sorted(points)[-2:]
  return (points[b] - points[a]) / (b - a)


def planner_verdict(records: list[dict[str, Any]], rows: list[dict[str, Any]], usable: int,
                    slope_records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
  """Which batches of the sweep's rows fit the commit's step (`records`, one commit) and which the planner picks: the
  least time to train (this project's step, `rows`) among them."""
  pts = worst_by_bs(records)
  sl = slope(worst_by_bs(slope_records)) if len(pts) == 1 and slope_records else None
  ttt: dict[int, float] = {}
  for r in rows:
    if r.get("time_to_train"):
      bs = int(r["batch_size"])
      ttt[bs] = min(ttt.get(bs, float("inf")), float(r["time_to_train"]["minutes"]))
  worst = {bs: worst_at(pts, bs, sl) for bs in sorted(ttt)}
  fits = [bs for bs, w in worst.items() if w <= usable]
  pick = min(fits, key=lambda bs: (ttt[bs], bs)) if fits else None
  return {"dressed": sorted(pts), "slope_from": None if sl is None else "another commit", "worst": worst,
          "fits": fits, "over": {bs: w - usable for bs, w in worst.items() if w > usable}, "pick": pick,
          "time_to_train": ttt}


def verdict_text(v: dict[str, Any]) -> str:
  """One cell: `fits 72-90 (96: 0.63 GB over); picks 90`."""
  fits = v["fits"]
  span = "nothing fits" if not fits else (f"fits {fits[0]}-{fits[-1]}" if len(fits) > 1 else f"fits {fits[0]}")
  over = ", ".join(f"{bs}: {b / 1e9:.2f} GB over" for bs, b in v["over"].items())
  return span + (f" ({over})" if over else "") + (f"; picks {v['pick']}" if v["pick"] is not None else "; no pick")

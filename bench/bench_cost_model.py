#!/usr/bin/env python3
"""The step-time model (mlperf_bert/train/cost/) against every step time tinycorp published for the same system and
global batch: predicted, measured, error, the breakdown.

    python bench/bench_cost_model.py                       # resources/predicted/steps.json (tools/record_step_predictions.py)
    python bench/bench_cost_model.py --answer green96.json # dress answers (--json) instead: re-simulated here, and the
                                                           # CPU seconds of the simulation
Prints figures only.
"""
from __future__ import annotations
import argparse, json, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from machine import describe  # noqa: E402

from mlperf_bert.train.cost.predict import predict_cost  # noqa: E402
from mlperf_bert.train.dress.report import published  # noqa: E402

STEPS = ROOT / "resources" / "predicted" / "steps.json"


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--answer", nargs="*", type=Path, default=[])
  a = ap.parse_args()
  print(describe())
  rows = []
  if a.answer:
    for path in a.answer:
      r = json.loads(path.read_text())
      st = time.process_time()
      cost = predict_cost(r)
      cpu = time.process_time() - st
      rows.append((r["platform"], r["batch_size"], cost["step"], f"simulated in {cpu:.2f} CPU s"))
  else:
    for p in json.loads(STEPS.read_text())["predictions"]:
      rows.append((p["platform"], p["global_bs"], {"ms": p["step_ms"], "low_ms": p["low_ms"], "high_ms": p["high_ms"],
                                                   "breakdown_ms": p.get("breakdown_ms", {}),
                                                   "source_only_ms": p.get("source_only_ms", p["step_ms"])}, p.get("layers", "")))
  print(f"{'system':18s} {'BS':>5s} {'predicted':>10s} {'band':>17s} {'measured':>9s} {'error':>7s} "
        f"{'sources only':>12s} {'error':>7s}  breakdown (ms)")
  for name, bs, step, how in rows:
    pub = published(name)
    meas = pub["step_ms"] if pub and pub["global_batch_size"] == bs else None
    err = f"{100 * (step['ms'] / meas - 1):+6.1f}%" if meas else "      -"
    src = step.get("source_only_ms", step["ms"])
    serr = f"{100 * (src / meas - 1):+6.1f}%" if meas else "      -"
    bd = ", ".join(f"{k} {v:.0f}" for k, v in step.get("breakdown_ms", {}).items())
    print(f"{name:18s} {bs:>5d} {step['ms']:>10.1f} {step['low_ms']:>8.1f}-{step['high_ms']:<8.1f} "
          f"{meas if meas else '-':>9} {err} {src:>12.1f} {serr}  {bd}  ({how})")
  if not a.answer:   # tinygrad's own step beside this project's, priced alike (tools/predict_tinygrad_step.py)
    for path in sorted(STEPS.parent.glob("tinygrad-*.json")):
      r = json.loads(path.read_text())
      m = r["measured_step_ms"]
      print(f"{r['platform']} BS {r['settings']['BS']}, tinygrad's own step at {r['tinygrad_commit'][:10]} on tinygrad "
            f"{r['tinygrad_version']}: " + ", ".join(
              f"{side} {st['step']['ms']:.1f} ms" + (f" ({100 * (st['step']['ms'] / m - 1):+.1f} % of {m})" if m else "")
              for side, st in r["steps"].items()) + f"  ({path.name})")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())

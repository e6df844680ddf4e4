#!/usr/bin/env python3
"""The step-time model's prediction for tinygrad's own BERT step (train_step_bert and eval_step_bert of a tinygrad
checkout's examples/mlperf, e.g. the v5.1 commit e0139fa), priced as the dress prices this project's step.

    git -C <mirror of github:tinygrad/tinygrad> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
    python tools/predict_tinygrad_step.py /tmp/tg --commit e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 \\
        --platform tinybox_green --set BS=96 EVAL_BS=96 \\
        --out resources/predicted/tinygrad-e0139fa-tinybox_green-bs96.json

A commit's own tinygrad has no NULL target (tinygrad 0.14's `NULL:CUDA:sm_89`): its plain NULL renderer renders no
tensor cores and no GPU launch dimensions, so tools/dress_tinygrad.py's dresses give memory, not time. Here tinygrad's
step runs on this project's tinygrad (0.14), on the platform's NULL target, exactly as tools/program_census.py runs it
(only the checkout's `examples/` and `extra/`, with the bridges its docstring lists), and this project's step beside
it, each at two depths; each captured step's calls are simulated by mlperf_bert/train/cost/ (predict_step) and put on
the line to the full depth, with the platform box's HELD_OUT factor, as `python -m mlperf_bert dress` prices this
project's step. The record holds both predictions (this project's must equal resources/predicted/steps.json's, which
tests/train/test_cost.py checks), the programs and what each side cost to compile, and tinycorp's measured step where
one was published at that batch; not the calls (`--calls-out DIR` writes them, a few MB a side and depth).
"""
from __future__ import annotations
import argparse, importlib.util, json, resource, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _census():
  spec = importlib.util.spec_from_file_location("program_census", REPO / "tools" / "program_census.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def predict_side(census, checkout: Path, side: str, platform: str, depths: list[int], sets: list[str], target: str,
                 full: int) -> dict:
  """One side's steps ("tinygrad" or "project") at two depths on the platform's NULL target, each captured step's
  calls simulated and put on the line to `full` layers: the train and eval step, the distinct programs a depth, what
  each depth cost to compile, and the calls."""
  from mlperf_bert.train.cost.predict import predict_step
  points, programs, cost = [], {}, []
  for n in depths:
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    got = census.run_side(checkout, f"{side}-calls", platform, n, sets)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    points.append((n, got["calls"], got["devices"]))
    programs[str(n)] = {"train": len(got["train"]), "eval": len(got["eval"])}
    cost.append({"layers": n, "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1),
                 "wall_s": round(time.monotonic() - t0, 1), "max_rss_mb": round(r1.ru_maxrss / 1024)})
  devices = points[-1][2]
  step, _ = predict_step([(n, c["train"]) for n, c, _ in points], target, full, devices)
  eval_step, _ = predict_step([(n, c["eval"]) for n, c, _ in points], target, full, devices)
  return {"step": step, "eval_step": eval_step, "programs": programs, "cost": cost,
          "calls": {n: c for n, c, _ in points}}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (git archive of the commit); its examples/ and extra/")
  ap.add_argument("--commit", required=True, help="the checkout's commit (recorded)")
  ap.add_argument("--platform", default="tinybox_green", help="platforms/NAME/platform.yaml")
  ap.add_argument("--layers", default="2,4", help="the two depths, comma-separated (default 2,4)")
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override platform keys (BS=96 EVAL_BS=96)")
  ap.add_argument("--out", type=Path, required=True)
  ap.add_argument("--calls-out", type=Path, metavar="DIR",
                  help="also write each side's calls a depth (SIDE-LAYERS.json, a few MB each) to DIR, to read the "
                       "kernels behind the figures")
  a = ap.parse_args()
  sys.path.insert(0, str(REPO))
  from importlib.metadata import version
  from mlperf_bert.train.dress import DEFAULT_BERT_CONFIG, config_depth
  from mlperf_bert.fileio import atomic_path
  from mlperf_bert.train.cost.band import step_band
  from mlperf_bert.train.dress.report import published
  census = _census()
  depths = [int(x) for x in a.layers.split(",")]
  if len(depths) != 2 or depths[0] == depths[1]: sys.exit(f"--layers {a.layers}: expected two different depths, e.g. 2,4")
  full = config_depth(REPO / DEFAULT_BERT_CONFIG)
  setup = census._setup(a.platform, depths[0], a.set)
  s = setup.settings
  sides = {side: predict_side(census, a.checkout, side, a.platform, depths, a.set, setup.target, full)
           for side in ("tinygrad", "project")}
  ours = step_band(a.platform, s.batch_size)     # the dress's recorded prediction (resources/predicted/steps.json)
  pub = published(a.platform)
  record = {"schema": "mlperf-bert/tinygrad-step-prediction/1", "recorded_by": "tools/predict_tinygrad_step.py",
            "tinygrad_commit": a.commit, "tinygrad_version": version("tinygrad"), "platform": a.platform,
            "target": setup.target, "settings": census._settings(s), "layers": f"measured at {depths[0]} and "
            f"{depths[1]} layers, extrapolated linearly to {full}",
            "steps": {side: {k: v for k, v in r.items() if k != "calls"} for side, r in sides.items()},
            "project_recorded_step_ms": ours.step_ms if ours else None,
            "measured_step_ms": pub["step_ms"] if pub and pub["global_batch_size"] == s.batch_size else None}
  if a.calls_out:
    a.calls_out.mkdir(parents=True, exist_ok=True)
    for side, r in sides.items():
      for n, c in r["calls"].items(): (a.calls_out / f"{side}-{n}.json").write_text(json.dumps(c))
  a.out.parent.mkdir(parents=True, exist_ok=True)
  with atomic_path(a.out) as tmp: tmp.write_text(json.dumps(record, indent=1) + "\n")
  m = record["measured_step_ms"]
  for side, name in (("tinygrad", f"tinygrad's step at {a.commit[:10]}"), ("project", "this project's step")):
    st, ev = record["steps"][side]["step"], record["steps"][side]["eval_step"]
    print(f"{name}, {a.platform} BS {s.batch_size}: {st['ms']:.1f} ms ({st['low_ms']:.1f}-{st['high_ms']:.1f}; sources "
          f"only {st['source_only_ms']:.1f})" + (f", measured {m} ({100 * (st['ms'] / m - 1):+.1f} %)" if m else "")
          + f"; eval step {ev['ms']:.1f} ms", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())

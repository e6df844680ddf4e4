#!/usr/bin/env python3
"""Record the measured step times of tinycorp's published MLPerf Training v5.0 BERT results (the figures, not the
logs) into resources/published/tinycorp-v5.0-bert.json, which the dress shows beside its roofline floor.

    git -C <mirror of github:mlcommons/training_results_v5.0> archive HEAD tinycorp/results | tar -x -C /tmp/v50
    python tools/record_published_steps.py /tmp/v50 --commit <that commit> \
        --out resources/published/tinycorp-v5.0-bert.json

The logs print no per-step line, so a run's step time is read from its MLPerf events: between one eval's eval_stop
and the next eval's eval_start only train steps run, so (time between them) / (steps between them) is a clean step
time; a run's figure is the median over its eval intervals (the first interval, from epoch_start, holds the JIT
warm-up and is left out), a system's the median of its runs' figures. Steps to the target: the step_num of the
eval that reached it (run_stop success), the median over the successful runs.
"""
from __future__ import annotations
import argparse, json, statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mlperf_bert.audit.logs import read_log  # noqa: E402
from mlperf_bert.audit.run_time import interval_steps, log_evals  # noqa: E402 (the audit reads a received log's steps alike)

SYSTEMS = ("tinybox_green", "tinybox_red", "tinybox_8xMI300X")


def run_figures(path: Path) -> dict:
  log = read_log(path)
  ev = log.events
  key = lambda k: [e for e in ev if e.key == k]
  gbs = key("global_batch_size")[0].value
  starts = [e.metadata["step_num"] for e in key("eval_start")]
  per = interval_steps(log_evals(log, gbs))
  status = key("run_stop")[0].metadata["status"] if key("run_stop") else "unknown"
  return {"log": path.name, "global_batch_size": gbs, "step_ms": round(statistics.median(per), 2), "intervals": len(per),
          "status": status, "steps_to_target": starts[-1] if status == "success" else None}


def published_runs(doc: str, figures) -> tuple[argparse.Namespace, dict[str, list[dict]]]:
  """A recorder's command line (a training_results_v5.0 tree, its commit, --out) and each system's runs, every log
  read by `figures` (this tool's run_figures, or tools/record_published_overheads.py's)."""
  ap = argparse.ArgumentParser(description=doc.splitlines()[0])
  ap.add_argument("checkout", type=Path, help="a tree of training_results_v5.0 holding tinycorp/results/")
  ap.add_argument("--commit", required=True, help="the training_results_v5.0 commit the tree is of")
  ap.add_argument("--out", type=Path, required=True)
  a = ap.parse_args()
  runs = {}
  for name in SYSTEMS:
    logs = sorted((a.checkout / "tinycorp" / "results" / name / "bert").glob("result_*.txt"))
    if not logs: sys.exit(f"{a.checkout}: no tinycorp/results/{name}/bert/result_*.txt")
    runs[name] = [figures(p) for p in logs]
  return a, runs


def main() -> int:
  a, system_runs = published_runs(__doc__, run_figures)
  out = {"source": "github:mlcommons/training_results_v5.0", "commit": a.commit,
         "method": "median over eval intervals of (next eval_start - eval_stop) / steps between; median over runs",
         "systems": {}}
  for name, runs in system_runs.items():
    done = [r["steps_to_target"] for r in runs if r["steps_to_target"] is not None]
    out["systems"][name] = {"global_batch_size": runs[0]["global_batch_size"],
                            "step_ms": round(statistics.median(r["step_ms"] for r in runs), 1),
                            "step_ms_range": [min(r["step_ms"] for r in runs), max(r["step_ms"] for r in runs)],
                            "steps_to_target": int(statistics.median(done)) if done else None, "runs": runs}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  a.out.write_text(json.dumps(out, indent=1) + "\n")
  for name, s in out["systems"].items():
    print(f"{name}: BS {s['global_batch_size']}, step {s['step_ms']} ms (runs {s['step_ms_range']}), "
          f"steps to target {s['steps_to_target']}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

#!/usr/bin/env python3
"""Record what tinycorp's published MLPerf Training v5.0 BERT runs spent outside their train steps (the figures, not
the logs) into resources/published/tinycorp-v5.0-overheads.json, which the time-to-train and INIT predictions of
mlperf_bert/train/cost/ read (each system's figure predicts the others, never itself).

    git -C <mirror of github:mlcommons/training_results_v5.0> archive HEAD tinycorp/results | tar -x -C /tmp/v50
    python tools/record_published_overheads.py /tmp/v50 --commit <that commit> \
        --out resources/published/tinycorp-v5.0-overheads.json

Per run, from its MLPerf events: `init_s` = init_stop - init_start (the INIT process: tinygrad's BEAM searches of a
2-layer model's train and eval programs, its weights zeroed, not loaded); `step_ms` as tools/record_published_steps.py
reads it (the median over the eval intervals); `warmup_s` = the first interval (run_start to the first eval_start)
less its steps at that step time, plus the first eval's wall less a later eval's (the JIT capture of both steps, the
weights loaded: what a run spends once); `eval_s` = the median wall of the evals after the first; `eval_samples` as
logged (EVAL_BS x the eval's batches). A system's figure is the median of its runs'.
"""
from __future__ import annotations
import json, statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_published_steps import published_runs  # noqa: E402 (the same trees, systems and command line)

KEYS = ("init_s", "warmup_s", "eval_s")


def events(path: Path) -> list[dict]:
  return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG " in line]


def run_figures(path: Path) -> dict:
  ev = events(path)
  key = lambda k: [e for e in ev if e["key"] == k]
  t = lambda k: key(k)[0]["time_ms"]
  starts = [(e["metadata"]["step_num"], e["time_ms"]) for e in key("eval_start")]
  stops = [(e["metadata"]["step_num"], e["time_ms"]) for e in key("eval_stop")]
  per = [(starts[i + 1][1] - stops[i][1]) / (starts[i + 1][0] - stops[i][0]) for i in range(min(len(stops), len(starts) - 1))]
  step = statistics.median(per)
  walls = [b[1] - a[1] for a, b in zip(starts, stops)]
  later = statistics.median(walls[1:])
  first = starts[0][1] - t("run_start") - starts[0][0] * step
  return {"log": path.name, "global_batch_size": key("global_batch_size")[0]["value"],
          "eval_samples": key("eval_samples")[0]["value"], "step_ms": round(step, 2),
          "init_s": round((t("init_stop") - t("init_start")) / 1e3, 1), "warmup_s": round((first + walls[0] - later) / 1e3, 1),
          "eval_s": round(later / 1e3, 2), "evals": len(starts)}


def main() -> int:
  a, system_runs = published_runs(__doc__, run_figures)
  out = {"source": "github:mlcommons/training_results_v5.0", "commit": a.commit,
         "recorded_by": "tools/record_published_overheads.py",
         "method": "per run: init_stop - init_start; the first interval less its steps plus the first eval less a "
                   "later one; the median later eval; a system: the median of its runs", "systems": {}}
  for name, runs in system_runs.items():
    out["systems"][name] = {"global_batch_size": runs[0]["global_batch_size"], "eval_samples": runs[0]["eval_samples"],
                            **{k: round(statistics.median(r[k] for r in runs), 2) for k in KEYS},
                            **{f"{k}_range": [min(r[k] for r in runs), max(r[k] for r in runs)] for k in KEYS},
                            "runs": runs}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  a.out.write_text(json.dumps(out, indent=1) + "\n")
  for name, s in out["systems"].items():
    print(f"{name}: init {s['init_s']} s, warm-up {s['warmup_s']} s, an eval {s['eval_s']} s ({s['eval_samples']} samples)")
  return 0


if __name__ == "__main__":
  sys.exit(main())

#!/usr/bin/env python3
"""Record tinycorp's published BERT runs of each tinybox into resources/published/tinycorp-runs.json, which the audit
holds a received log's time to (mlperf_bert/audit/published_runs.py, step_band.py).

    python tools/record_published_runs.py                    # the published logs held in tests/fixtures
    git -C <mirror of github:mlcommons/training_results_v5.0> archive HEAD tinycorp/results tinycorp/systems \
        | tar -x -C /tmp/tc5.0
    python tools/record_published_runs.py --tree 4.1=tests/fixtures/tinycorp-v4.1 --tree 5.0=/tmp/tc5.0/tinycorp \
        --commit 4.1=b87b9e396f771345d4ef122ba33456304f15228d --commit 5.0=<that commit>

Per run: its round, log, global batch, the `framework` its round's systems/<platform>.json names, its eval intervals'
LOW_QUANTILE step and median step (mlperf_bert/audit/run_time.py interval_steps), its warm-up and its INIT phase
(the audit's MLPerfLog.init_minutes: the first init_start to init_stop).

A run's warm-up is what it spent beyond its train steps and evals (mlperf_bert/audit/run_time.py warmup_s: run_start
to run_stop, less its trained steps, from the samples, at its median eval-interval step, less every eval's wall): the
JIT captures, the weights loaded, the first steps and the first eval slower than the rest. Per platform (the system
directories named as CARD_PLATFORMS names them) the least over every round's runs is kept, with each run's figure.
And `machine_spread`: the widest spread of one platform's runs of one round (its slowest median step over its fastest,
less 1): how far two machines of one box running one software differ, which a reproduction is allowed.
"""
from __future__ import annotations
import argparse, json, statistics, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlperf_bert.audit.cards import CARD_PLATFORMS  # noqa: E402
from mlperf_bert.audit.logs import read_log  # noqa: E402
from mlperf_bert.audit.published_runs import PUBLISHED_RUNS  # noqa: E402
from mlperf_bert.audit.run_time import LOW_QUANTILE, interval_steps, log_evals, low_quantile, warmup_s  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
DEFAULT_TREES = {"4.1": [FIXTURES / "tinycorp-v4.1"],
                 "5.0": [FIXTURES / "mlcommons" / "v5.0" / "tinycorp", FIXTURES / "tinycorp-v5.0"]}
OUT = PUBLISHED_RUNS


def shown(p: Path) -> str:
  try: return p.resolve().relative_to(ROOT).as_posix()
  except ValueError: return str(p)


def framework(trees: list[Path], platform: str) -> str | None:
  """The `framework` the round's systems/<platform>.json names (the first of its trees that has one)."""
  for d in trees:
    f = d / "systems" / f"{platform}.json"
    if f.is_file(): return json.loads(f.read_text()).get("framework")
  return None


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--tree", action="append", default=[], help="ROUND=ORG_DIR (tinycorp's folder of a round: "
                  "results/<system>/bert/result_*.txt); repeatable; default: the logs in tests/fixtures")
  ap.add_argument("--commit", action="append", default=[], help="ROUND=COMMIT of training_results_vROUND the tree is")
  ap.add_argument("--out", type=Path, default=OUT)
  a = ap.parse_args()
  trees: dict[str, list[Path]] = {}
  for t in a.tree:
    rnd, _, d = t.partition("=")
    trees.setdefault(rnd, []).append(Path(d))
  trees = trees or DEFAULT_TREES
  commits = dict(c.partition("=")[::2] for c in a.commit)
  out = {"recorded_by": "tools/record_published_runs.py",
         "method": "per run: its eval intervals' (an eval_stop to the next eval_start, steps from the samples) "
                   f"{LOW_QUANTILE:g}-quantile and median step; its warm-up: run_stop - run_start, less its trained "
                   "steps (the last eval's epoch_num / global_batch_size) at its median eval-interval step, less every "
                   "eval's wall (mlperf_bert/audit/run_time.py warmup_s); per platform: the least warm-up over its "
                   "runs; machine_spread: the widest (slowest median / fastest median - 1) of one platform's runs "
                   "of one round",
         "sources": {rnd: {"trees": [shown(d) if not Path(shown(d)).is_absolute() else f"github:mlcommons/training_results_v{rnd} "
                                       f"{d.name}" for d in ds], "commit": commits.get(rnd)} for rnd, ds in trees.items()},
         "platforms": {}}
  for platform in CARD_PLATFORMS:
    runs = []
    for rnd, ds in trees.items():
      seen = set()
      for d in ds:
        for p in sorted((d / "results" / platform / "bert").glob("result_*.txt")):
          if p.name in seen: continue
          seen.add(p.name)
          log = read_log(p)
          bs = log.global_batch_size
          if not isinstance(bs, int) or bs <= 0: continue
          w, per = warmup_s(log, bs), interval_steps(log_evals(log, bs))
          if not per: continue
          runs.append({"round": rnd, "log": p.name, "global_batch_size": bs, "framework": framework(ds, platform),
                       "init_s": None if log.init_minutes is None else round(log.init_minutes * 60, 1),
                       "warmup_s": None if w is None else round(w, 1), "interval_q_ms": round(low_quantile(per, LOW_QUANTILE), 2),
                       "median_ms": round(statistics.median(per), 2), "intervals": len(per)})
    if not runs: continue
    least = min((r for r in runs if r["warmup_s"] is not None), key=lambda r: r["warmup_s"])
    out["platforms"][platform] = {"least_warmup_s": least["warmup_s"], "least_in": f"v{least['round']} {least['log']}",
                                  "runs": runs}
    print(f"{platform}: least warm-up {least['warmup_s']} s (v{least['round']} {least['log']}) of {len(runs)} runs")
  spreads = []
  for platform, rec in out["platforms"].items():
    for rnd in dict.fromkeys(r["round"] for r in rec["runs"]):
      meds = [r["median_ms"] for r in rec["runs"] if r["round"] == rnd]
      if len(meds) > 1: spreads.append((max(meds) / min(meds) - 1, platform, rnd, min(meds), max(meds), len(meds)))
  s, platform, rnd, lo, hi, n = max(spreads)
  out["machine_spread"] = {"value": round(s, 4), "from": f"{platform} v{rnd}: {n} runs' median steps {lo:.2f}-{hi:.2f} ms"}
  print(f"machine spread {s:.2%} ({out['machine_spread']['from']})")
  a.out.parent.mkdir(parents=True, exist_ok=True)
  from mlperf_bert.fileio import atomic_path  # a killed run leaves no half-written record
  with atomic_path(a.out) as tmp: tmp.write_text(json.dumps(out, indent=1) + "\n")
  print(f"wrote {shown(a.out)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

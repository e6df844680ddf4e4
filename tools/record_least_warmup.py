#!/usr/bin/env python3
"""Record the least warm-up any published run of each tinybox had into resources/published/tinycorp-least-warmup.json,
which the audit adds to a received log's whole-run floor (mlperf_bert/audit/step_band.py).

    python tools/record_least_warmup.py                      # the published logs held in tests/fixtures
    git -C <mirror of github:mlcommons/training_results_v5.0> archive HEAD tinycorp/results tinycorp/systems \
        | tar -x -C /tmp/tc5.0
    python tools/record_least_warmup.py --tree 4.1=tests/fixtures/tinycorp-v4.1 --tree 5.0=/tmp/tc5.0/tinycorp \
        --commit 5.0=<that commit>

A run's warm-up is what it spent beyond its train steps and evals (mlperf_bert/audit/run_time.py warmup_s: run_start
to run_stop, less its trained steps, from the samples, at its median eval-interval step, less every eval's wall): the
JIT captures, the weights loaded, the first steps and the first eval slower than the rest. Per platform (the system
directories named as CARD_PLATFORMS names them) the least over every round's runs is kept, with each run's figure.
"""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlperf_bert.audit.cards import CARD_PLATFORMS  # noqa: E402
from mlperf_bert.audit.logs import read_log  # noqa: E402
from mlperf_bert.audit.run_time import warmup_s  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
DEFAULT_TREES = {"4.1": [FIXTURES / "tinycorp-v4.1"],
                 "5.0": [FIXTURES / "mlcommons" / "v5.0" / "tinycorp", FIXTURES / "tinycorp-v5.0"]}
OUT = ROOT / "resources" / "published" / "tinycorp-least-warmup.json"


def shown(p: Path) -> str:
  try: return p.resolve().relative_to(ROOT).as_posix()
  except ValueError: return str(p)


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
  out = {"recorded_by": "tools/record_least_warmup.py",
         "method": "per run: run_stop - run_start, less its trained steps (the last eval's epoch_num / "
                   "global_batch_size) at its median eval-interval step, less every eval's wall "
                   "(mlperf_bert/audit/run_time.py warmup_s); per platform: the least over its runs",
         "sources": {rnd: {"trees": [shown(d) for d in ds], "commit": commits.get(rnd)} for rnd, ds in trees.items()},
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
          w = warmup_s(log, bs) if isinstance(bs, int) and bs > 0 else None
          if w is not None: runs.append({"round": rnd, "log": p.name, "global_batch_size": bs, "warmup_s": round(w, 1)})
    if not runs: continue
    least = min(runs, key=lambda r: r["warmup_s"])
    out["platforms"][platform] = {"least_warmup_s": least["warmup_s"], "least_in": f"v{least['round']} {least['log']}",
                                  "runs": runs}
    print(f"{platform}: least warm-up {least['warmup_s']} s (v{least['round']} {least['log']}) of {len(runs)} runs")
  a.out.parent.mkdir(parents=True, exist_ok=True)
  from mlperf_bert.fileio import atomic_path  # a killed run leaves no half-written record
  with atomic_path(a.out) as tmp: tmp.write_text(json.dumps(out, indent=1) + "\n")
  print(f"wrote {shown(a.out)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

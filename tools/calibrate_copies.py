"""The copies check calibrated on every published BERT result: `check_copies` (mlperf_bert/audit/forged.py) on each
system of MLCommons' training_results_v0.7 ... v5.0, as a received submission, and the pairs of distinct runs that
come closest to its tolerances, which the constants there cite.

  python tools/calibrate_copies.py [--mirrors /work/.mirror] [--scratch /tmp/calib-copies] [--round 4.1 ...]
                                   [--out tests/fixtures/copies-calibration.json]

The BERT parts of each mirror's HEAD are extracted as tools/calibrate_audit.py extracts them (`extract`), to
--scratch/vX.Y/orgs (kept: a second run reads them again). Every result log of a system is read as the audit reads
it; written to --out: each copies row (status, system, reason), and over every pair of logs of one system with the
same epoch_num sequence the closest accuracies for each number of evals, with how proportional their times after
run_start are, and over every pair with the same events (but the seed) the closest times after run_start. Exit
status 0 when no copies row is a FAIL, else 1.
"""
from __future__ import annotations
import argparse, datetime, itertools, json, os, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "tools"))

from calibrate_audit import ROUNDS, _cpu_model, extract  # noqa: E402
from mlperf_bert.audit.forged import NEAR_MIN_EVALS, _eval_values, _alike, check_copies, eval_offsets  # noqa: E402
from mlperf_bert.audit.logs import read_log  # noqa: E402

MAX_EVALS_SHOWN = 8   # the closest pair is kept for sequences of 1 .. this many evals or more


def _spread(a, b) -> float | None:
  """How far b's eval times after run_start are from a's times one ratio (the last eval's), relative: 0 when
  proportional."""
  oa, ob = eval_offsets(a), eval_offsets(b)
  if not oa or not ob or min(oa) <= 0 or min(ob) <= 0: return None
  r = ob[-1] / oa[-1]
  return max(abs(y - r * x) / (r * x) for x, y in zip(oa, ob))


def _key_times(log) -> tuple[list[str], list[float]] | None:
  if log.run_start_ms is None: return None
  ev = [e for e in log.events if e.key != "seed"]
  return [e.key for e in ev], [e.time_ms - log.run_start_ms for e in ev]


def system_pairs(name: str, logs: dict) -> tuple[list[dict], list[dict]]:
  """Every pair of one system's logs with the same epoch_num sequence (n evals, largest accuracy difference, spread
  of the times, whether `_alike` finds them alike) and every pair with the same events (largest time difference)."""
  evals, events = [], []
  times = {n: _key_times(l) for n, l in logs.items()}
  for (na, a), (nb, b) in itertools.combinations(logs.items(), 2):
    kt = times[na], times[nb]
    if kt[0] and kt[1] and kt[0][0] == kt[1][0] and kt[0][0]:
      events.append({"system": name, "logs": [na, nb], "max_ms": max(abs(x - y) for x, y in zip(kt[0][1], kt[1][1]))})
    ea, eb = a.eval_accuracies, b.eval_accuracies
    if not ea or len(ea) != len(eb): continue
    if [json.dumps(e.metadata.get("epoch_num")) for e in ea] != [json.dumps(e.metadata.get("epoch_num")) for e in eb]:
      continue
    xa, xb = _eval_values(a), _eval_values(b)
    if xa is None or xb is None: continue
    diff = max(abs(x - y) for x, y in zip(xa, xb))
    evals.append({"system": name, "logs": [na, nb], "evals": len(ea), "max_accuracy_diff": diff,
                  "time_spread": _spread(a, b), "alike": _alike(a, b) is not None})
  return evals, events


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
  ap.add_argument("--scratch", type=Path, default=Path("/tmp/calib-copies"))
  ap.add_argument("--round", action="append", choices=ROUNDS, help="only these rounds (default: all)")
  ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "copies-calibration.json")
  a = ap.parse_args(argv)
  rows, evals, events, meta = [], [], [], {"rounds": {}}
  n_systems = n_logs = 0
  for rnd in a.round or ROUNDS:
    base = a.scratch / f"v{rnd}"
    state = base / "extract.json"
    if not state.exists():
      state.parent.mkdir(parents=True, exist_ok=True)
      state.write_text(json.dumps(extract(a.mirrors / f"mlcommons+training_results_v{rnd}" / "repo", base / "orgs")))
    meta["rounds"][rnd] = {"commit": json.loads(state.read_text())["commit"]}
    for bert in sorted((base / "orgs").glob("*/results/*/bert")):
      org, system = bert.parts[-4], bert.parts[-2]
      logs = {p.name: read_log(p) for p in sorted(bert.glob("result_*.txt"))}
      n_systems += 1; n_logs += len(logs)
      name = f"v{rnd}/{org}/{system}"
      for r in check_copies(list(logs.values()), {id(l): n for n, l in logs.items()}, system, received=True):
        rows.append({"system": name, "status": r.status, "reason": r.reason[:300]})
        print(f"{name}: {r.status} {r.reason[:160]}", flush=True)
      e, t = system_pairs(name, logs)
      evals += e; events += t
  distinct = [p for p in evals if p["max_accuracy_diff"] > 0]
  closest = {}
  for n in range(1, MAX_EVALS_SHOWN + 1):
    sub = [p for p in distinct if p["evals"] == n or (n == MAX_EVALS_SHOWN and p["evals"] > n)]
    if sub: closest[f"{n}{'+' if n == MAX_EVALS_SHOWN else ''}"] = min(sub, key=lambda p: p["max_accuracy_diff"])
  at_least = [p for p in distinct if p["evals"] >= NEAR_MIN_EVALS]
  moved = [p for p in events if p["max_ms"] > 0]
  from importlib.metadata import version
  meta.update({"made_by": "tools/calibrate_copies.py", "date": datetime.date.today().isoformat(),
               "mlperf_logging": version("mlperf-logging"), "machine": f"{_cpu_model()}, {os.cpu_count()} cores",
               "systems": n_systems, "logs": n_logs})
  table = {"meta": meta, "copies_rows": rows,
           "eval_pairs": len(evals), "distinct_eval_pairs": len(distinct),
           "alike_distinct_pairs": [p for p in distinct if p["alike"]],
           "closest_by_evals": closest,
           "closest_with_near_min_evals": min(at_least, key=lambda p: p["max_accuracy_diff"]) if at_least else None,
           "same_event_pairs": len(events),
           "closest_same_events": min(moved, key=lambda p: p["max_ms"]) if moved else None}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  a.out.write_text(json.dumps(table, indent=1) + "\n")
  print(f"{n_systems} systems, {n_logs} logs; {len(rows)} copies row(s), "
        f"{sum(r['status'] == 'FAIL' for r in rows)} FAIL; {len(distinct)} distinct pairs with one epoch_num sequence, "
        f"{len(table['alike_distinct_pairs'])} alike; closest with {NEAR_MIN_EVALS}+ evals: "
        f"{table['closest_with_near_min_evals']}; closest same events: {table['closest_same_events']}")
  print(f"table: {a.out}")
  return 0 if not any(r["status"] == "FAIL" for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())

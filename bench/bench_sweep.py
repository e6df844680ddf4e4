"""The batch planner's cost: `python -m mlperf_bert dress --platform P --sweep ...` run once as a child process, its
wall time and CPU time (user + system of the child and everything it started), and each setting's own lines; with a
fresh, empty tinygrad compile cache (CACHEDB in a temporary folder) unless --warm, so the figure does not depend on
what earlier dresses left in ~/.cache/tinygrad.

    .venv/bin/python bench/bench_sweep.py                                         # tinybox_green, BS 72..96
    .venv/bin/python bench/bench_sweep.py --platform tinybox_red --sweep BS=72,96 FREE_INTERMEDIATE=0,1
    .venv/bin/python bench/bench_sweep.py --fixture tests/fixtures/dress-sweep/tinybox_green-bs72-96.json

--fixture also writes the sweep's rows and recommendation (no dress answers) as the fixture the history test reads
(tests/train/test_dress_history.py: the planner's verdict beside each of tinygrad's batch changes). --history FIXTURE
dresses nothing: it prints that verdict for each commit of tests/fixtures/dress-tinygrad/ (mlperf_bert/train/dress/
history.py), as docs/benchmarks.md's history table shows it.
"""
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from machine import describe  # noqa: E402


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--platform", default="tinybox_green")
  ap.add_argument("--sweep", nargs="+", default=["BS=72,78,84,90,96"])
  ap.add_argument("--set", nargs="*", default=[])
  ap.add_argument("--warm", action="store_true", help="keep tinygrad's own compile cache (default: a fresh one)")
  ap.add_argument("--out", type=Path, help="keep the sweep's JSON (and its picture beside it, .svg)")
  ap.add_argument("--fixture", type=Path, help="write the rows and recommendation as a test fixture")
  ap.add_argument("--history", type=Path, metavar="FIXTURE", help="print the planner's verdict at each of tinygrad's "
                  "dressed commits from a sweep fixture, and dress nothing")
  a = ap.parse_args()
  if a.history: return history(a.history)
  print(describe())
  with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
    out = a.out or Path(tmp) / "sweep.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if not a.warm: env["CACHEDB"] = str(Path(tmp) / "cache.db")
    cmd = [sys.executable, "-m", "mlperf_bert", "dress", "--platform", a.platform, "--sweep", *a.sweep,
           "--json", str(out), "--picture", str(out.with_suffix(".svg")), *(["--set", *a.set] if a.set else [])]
    print("$ " + " ".join(cmd[1:]) + ("" if a.warm else "   (CACHEDB: a fresh, empty compile cache)"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    st = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - st
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for line in p.stderr.splitlines():
      if line.startswith("sweep:") or "model built" in line or "(captured)" in line: print(line)
    print(p.stdout.rstrip())
    if p.returncode not in (0, 1) or not out.exists():
      print(p.stderr[-3000:], file=sys.stderr)
      return 1
    ans = json.loads(out.read_text())
    n = len(ans["rows"])
    print(f"sweep of {n} settings: wall {wall:.1f} s ({wall / 60:.1f} min), CPU {cpu:.1f} s (user + system of the "
          f"dress process), {cpu / n:.1f} CPU s a setting; max RSS {after.ru_maxrss / 1024:.0f} MB")
    if a.fixture:
      a.fixture.parent.mkdir(parents=True, exist_ok=True)
      keep = {k: ans[k] for k in ("platform", "target", "card", "sweep", "fixed", "how", "eval_bs_rule", "rows",
                                  "recommendation")}
      keep["recorded_by"] = "bench/bench_sweep.py " + " ".join(sys.argv[1:])
      from mlperf_bert.fileio import atomic_path  # a killed run leaves no half-written record
      with atomic_path(a.fixture) as tmp: tmp.write_text(json.dumps(keep, indent=1) + "\n")
      print(f"fixture: {a.fixture}")
  return 0


def history(fixture: Path) -> int:
  """Each dressed commit of tinygrad's history: the batches of the sweep that fit its step, and the planner's pick."""
  from mlperf_bert.train.dress.history import SLOPE_FROM, planner_verdict, verdict_text
  from mlperf_bert.train.dress.report import CARDS
  rows = json.loads(fixture.read_text())["rows"]
  commits: dict[str, list] = {}
  for f in sorted((REPO / "tests/fixtures/dress-tinygrad").glob("tinybox_green-*-bs*.json")):
    rec = json.loads(f.read_text())
    commits.setdefault(rec["tinygrad_commit"][:10], []).append(rec)
  for c, recs in commits.items():
    v = planner_verdict(recs, rows, CARDS["CUDA:sm_89"].usable, commits.get(SLOPE_FROM.get(c, "")))
    worst = ", ".join(f"{bs} {w / 1e9:.2f}" for bs, w in v["worst"].items())
    print(f"{c} FI {recs[0]['settings']['FREE_INTERMEDIATE']} dressed at BS {v['dressed']}: {verdict_text(v)}   "
          f"(worst GB: {worst}{'; slope from ' + SLOPE_FROM[c] if c in SLOPE_FROM else ''})")
  return 0


if __name__ == "__main__":
  sys.exit(main())

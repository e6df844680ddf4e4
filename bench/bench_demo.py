"""The CPU demo, measured: runs `snakemake --cores N all` (config.yaml, the cpu platform, as scripts/demo.sh does)
in a fresh scratch copy of a checkout, then prints each rule's jobs, wall and CPU seconds and peak RSS, the
total, the MLPerf log's INIT/RUN phases and accuracies, and the machine (CPU model, flags, cores, clang).

  .venv/bin/python bench/bench_demo.py                         # this working tree (tracked + untracked files)
  .venv/bin/python bench/bench_demo.py --checkout /path/to/other/checkout [--rev cbed99b]
  .venv/bin/python bench/bench_demo.py --cores 2 --keep --json out.json -- --config 'train={TRAIN_STEPS: 2}' ...

How the per-job figures are measured (not estimated): every Python process that Snakemake starts for a rule's
`script:` imports a `sitecustomize` from a directory this script puts on PYTHONPATH; at exit it appends one
JSON line: the rule and wildcards (from the injected `snakemake` object), wall seconds since the process was
created (/proc/self/stat), user+sys CPU seconds of the process and of its waited-for children (clang compiles)
from getrusage, and peak RSS (ru_maxrss). The total's wall and CPU are Snakemake's own (getrusage of the waited
Snakemake process tree); "snakemake itself" is the total CPU minus the jobs'. Works for any revision: nothing
in the checkout is changed.
"""
import argparse, json, os, re, resource, shutil, subprocess, sys, tempfile, time
from pathlib import Path

from machine import describe, machine

REPO = Path(__file__).resolve().parents[1]

HOOK = r'''
import atexit, json, os, resource, time, sys
_T0 = time.time()
def _bench_demo_record():
    sm = getattr(sys.modules.get("__main__"), "snakemake", None)
    out = os.environ.get("BENCH_DEMO_JOBS")
    if sm is None or not out:
        return
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(l.split()[1]) for l in f if l.startswith("btime"))
        started = btime + start_ticks / os.sysconf("SC_CLK_TCK")
    except Exception:
        started = _T0
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    rec = {"rule": sm.rule, "wildcards": dict(sm.wildcards.items()), "start": started, "end": time.time(),
           "cpu_s": s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime, "user_s": s.ru_utime + c.ru_utime,
           "sys_s": s.ru_stime + c.ru_stime, "peak_rss_mb": max(s.ru_maxrss, c.ru_maxrss) / 1024}
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
atexit.register(_bench_demo_record)
'''


def make_tree(checkout: Path, rev: str | None, dest: Path):
  dest.mkdir(parents=True)
  if rev:
    arch = subprocess.run(["git", "-C", str(checkout), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch, check=True)
  else:
    files = subprocess.run(["git", "-C", str(checkout), "ls-files", "-co", "--exclude-standard", "-z"], check=True,
                           capture_output=True).stdout.split(b"\0")
    for f in filter(None, files):
      src, dst = checkout / f.decode(), dest / f.decode()
      if src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def log_phases(log: Path):
  """INIT and RUN phase lengths and the eval accuracies from an MLPerf result log."""
  ev = {}
  accs = []
  for line in log.read_text().splitlines():
    if ":::MLLOG" not in line:
      continue
    r = json.loads(line.split(":::MLLOG", 1)[1])
    ev.setdefault(r["key"], r)
    if r["key"] == "eval_accuracy":
      accs.append((r["metadata"].get("epoch_num"), r["value"]))
    if r["key"] == "run_stop":
      ev["run_stop"] = r
  out = {"accuracies": accs}
  if "init_start" in ev and "init_stop" in ev:
    out["init_s"] = (ev["init_stop"]["time_ms"] - ev["init_start"]["time_ms"]) / 1e3
  if "run_start" in ev and "run_stop" in ev:
    out["run_s"] = (ev["run_stop"]["time_ms"] - ev["run_start"]["time_ms"]) / 1e3
    out["status"] = ev["run_stop"]["metadata"].get("status")
  return out


def per_rule(jobs: list[dict]) -> dict[str, dict]:
  """The jobs' figures summed per rule, in the order the rules first ran."""
  rules: dict[str, dict] = {}
  for j in sorted(jobs, key=lambda j: j["start"]):
    d = rules.setdefault(j["rule"], {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "peak_rss_mb": 0.0, "first": j["start"], "last": j["end"]})
    d["jobs"] += 1
    d["wall_s"] += j["end"] - j["start"]
    d["cpu_s"] += j["cpu_s"]
    d["peak_rss_mb"] = max(d["peak_rss_mb"], j["peak_rss_mb"])
    d["first"], d["last"] = min(d["first"], j["start"]), max(d["last"], j["end"])
  return rules


def report_logs(tree: Path) -> dict:
  """Print (and return) the INIT/RUN phases of the demo's result logs and the step times of its train logs."""
  logs = sorted((tree / "results" / "demo" / "results").glob("*/result_bert_*.log"))
  phases = {}
  for log in logs:
    phases[log.name] = ph = log_phases(log)
    print(f"{log.relative_to(tree)}: INIT phase {ph.get('init_s', float('nan')):.1f} s, RUN phase {ph.get('run_s', float('nan')):.1f} s, "
          f"status {ph.get('status')}; masked-LM accuracy at (samples) " + ", ".join(f"{e}: {v:.4f}" for e, v in ph["accuracies"]))
  for tlog in sorted((tree / "results" / "demo" / "logs" / "train").glob("*/seed_*.log")):
    text = tlog.read_text(errors="replace").replace("\r", "\n")
    steps = [float(m.group(2)) for m in re.finditer(r"^\s*(\d+)\s+([\d.]+) ms run", text, re.MULTILINE)]
    init = re.search(r"init: compiled .* in ([\d.]+) s", text)
    if steps:
      med = sorted(steps)[len(steps) // 2]
      phases.setdefault("train_logs", {})[tlog.name] = {"first_step_ms": steps[0], "median_step_ms": med, "steps": len(steps)}
      print(f"{tlog.relative_to(tree)}: INIT warm-up {init.group(1) if init else '?'} s; first RUN step {steps[0]:.0f} ms "
            f"(its kernels compiled by INIT), median step {med:.0f} ms over {len(steps)} steps")
  return phases


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--checkout", type=Path, default=REPO, help="the checkout to run (default: this one)")
  ap.add_argument("--rev", help="a commit of the checkout to run instead of its working tree (git archive)")
  ap.add_argument("--cores", type=int, default=os.cpu_count())
  ap.add_argument("--venv", type=Path, default=None, help="virtual environment (default: the checkout's .venv, else this one's)")
  ap.add_argument("--scratch", type=Path, default=None, help="scratch directory (default: a new temporary one)")
  ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
  ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
  ap.add_argument("--warm-cache", action="store_true",
                  help="use tinygrad's usual compile cache (default: an empty one in the scratch directory, as on a fresh machine)")
  ap.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="extra arguments for snakemake (after --)")
  a = ap.parse_args()
  checkout = a.checkout.resolve()
  venv = a.venv or next((v for v in (checkout / ".venv", REPO / ".venv") if (v / "bin" / "snakemake").exists()), None)
  if venv is None:
    sys.exit("bench_demo.py: no .venv with snakemake in the checkout or here; run scripts/setup.sh first, or pass --venv")
  venv = Path(os.path.abspath(venv))  # keep a symlinked venv's path: its python finds its site-packages via the link
  scratch = a.scratch or Path(tempfile.mkdtemp(prefix="bench_demo_"))
  tree, hook = scratch / "tree", scratch / "hook"
  make_tree(checkout, a.rev, tree)
  (tree / ".venv").symlink_to(venv)
  hook.mkdir()
  (hook / "sitecustomize.py").write_text(HOOK)
  jobs_file = scratch / "jobs.jsonl"
  env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{hook}", BENCH_DEMO_JOBS=str(jobs_file),
             PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
  env.pop("VIRTUAL_ENV", None)
  if not a.warm_cache:
    env["CACHEDB"] = str(scratch / "tinygrad_cache.db")
  m = machine()
  extra = a.snakemake_args[1:] if a.snakemake_args[:1] == ["--"] else a.snakemake_args
  cmd = [str(venv / "bin" / "snakemake"), "--cores", str(a.cores), "all", *extra]
  print(f"running {' '.join(cmd[1:])} in {tree} ({'rev ' + a.rev if a.rev else 'working tree'} of {checkout}; "
        f"tinygrad cache {'warm' if a.warm_cache else 'empty'})", flush=True)
  r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  with open(scratch / "snakemake.out", "w") as out:
    p = subprocess.run(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
  wall = time.perf_counter() - t0
  r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
  total_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
  if p.returncode != 0:
    print((scratch / "snakemake.out").read_text()[-4000:])
    sys.exit(f"bench_demo.py: snakemake failed (exit {p.returncode}); scratch kept at {scratch}")
  jobs = [json.loads(l) for l in jobs_file.read_text().splitlines()] if jobs_file.exists() else []
  rules = per_rule(jobs)
  print(f"\nmachine: {describe(m)}")
  print(f"\n{'rule':<20} {'jobs':>4} {'wall s (sum)':>12} {'span s':>8} {'CPU s':>8} {'peak RSS MB':>11}")
  for name, d in rules.items():
    print(f"{name:<20} {d['jobs']:>4} {d['wall_s']:>12.1f} {d['last'] - d['first']:>8.1f} {d['cpu_s']:>8.1f} {d['peak_rss_mb']:>11.0f}")
  jobs_cpu = sum(d["cpu_s"] for d in rules.values())
  print(f"{'snakemake itself':<20} {'':>4} {'':>12} {'':>8} {total_cpu - jobs_cpu:>8.1f}")
  print(f"{'TOTAL':<20} {len(jobs):>4} {wall:>12.1f} {'':>8} {total_cpu:>8.1f}")
  print(f"\nSnakemake wall {wall:.1f} s ({wall / 60:.2f} min), CPU (user+sys, all processes) {total_cpu:.1f} s")
  phases = report_logs(tree)
  if a.json:
    a.json.write_text(json.dumps({"machine": m, "wall_s": wall, "cpu_s": total_cpu, "rules": rules, "jobs": jobs,
                                  "logs": phases, "checkout": str(checkout), "rev": a.rev}, indent=1))
  if a.keep:
    print(f"scratch kept: {scratch}")
  else:
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
  main()

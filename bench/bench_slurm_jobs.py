"""Peak memory and wall time of each SLURM job of a workflow run: what profiles/slurm's requests are sized from.

Runs the demo's data stages (downloads -> SHA256SUMS + eval set) and, with --train, a short training run as SLURM
jobs through profiles/cpu + profiles/slurm on the cluster that answers `sinfo` (bring one up first:
`bash scripts/slurm-cluster.sh up`), sampling /proc every 0.1 s. A job's memory is the sum of the RSS of every
process carrying its SLURM_JOB_ID (the jobstep Snakemake, srun, the job's Snakemake and the rule's script), i.e.
what a cgroup memory limit would count; wall times are the controller's start/end times (jobcomp.txt). Needs root
(to read other processes' environment).

    .venv/bin/python bench/bench_slurm_jobs.py [--train] [--jobcomp /tmp/mlperf-bert-slurm/jobcomp.txt]
"""
import argparse, collections, os, re, subprocess, sys, tempfile, threading, time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from machine import describe  # noqa: E402


def job_of(pid: str) -> str | None:
  try:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
  except OSError:
    return None
  for kv in env:
    if kv.startswith(b"SLURM_JOB_ID="):
      return kv.split(b"=", 1)[1].decode()
  return None


def rss_mb(pid: str) -> float:
  try:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) / 1024
  except OSError:
    pass
  return 0.0


def sample(peaks: dict, stop: threading.Event):
  while not stop.is_set():
    now = collections.Counter()
    for pid in os.listdir("/proc"):
      if pid.isdigit():
        j = job_of(pid)
        if j:
          now[j] += rss_mb(pid)
    for j, mb in now.items():
      peaks[j] = max(peaks.get(j, 0.0), mb)
    time.sleep(0.1)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--train", action="store_true", help="also a 2-step training run of the cpu demo")
  ap.add_argument("--jobcomp", default=os.path.join(os.environ.get("SLURM_CLUSTER_DIR", "/tmp/mlperf-bert-slurm"),
                                                    "jobcomp.txt"))
  args = ap.parse_args()
  from workflow_helpers import write_config
  with tempfile.TemporaryDirectory() as tmp:
    wd = Path(tmp)
    cfg = write_config(wd / "config.yaml", wd / "base", seeds=[0],
                       train={"TRAIN_STEPS": 2, "NUM_WARMUP_STEPS": 1, "EVAL_STEP_FREQ": 2, "EVAL_SAMPLES": 16, "INIT_BENCHMARK_STEPS": 0,
                              "TARGET": 0.01})
    targets = [str(wd / "base" / t) for t in ("shards/SHA256SUMS", "eval/eval.shard")]
    if args.train:
      targets.append(str(wd / "base" / "results/cpu/result_bert_0.log"))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(wd), *targets, "--profile",
           str(REPO / "profiles/cpu"), "--profile", str(REPO / "profiles/slurm"), "--configfile", str(cfg)]
    peaks, stop = {}, threading.Event()
    th = threading.Thread(target=sample, args=(peaks, stop), daemon=True)
    th.start()
    t0 = time.time()
    r = subprocess.run(["timeout", "-k", "30", "1800", *cmd], capture_output=True, text=True)
    wall = time.time() - t0
    stop.set(); th.join()
    out = r.stdout + r.stderr
    if r.returncode != 0:
      sys.exit(f"snakemake failed ({r.returncode}):\n{out[-4000:]}")
    run_id = re.search(r"SLURM run ID: (\S+)", out).group(1)
  jobs = []
  for line in Path(args.jobcomp).read_text().splitlines():
    f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    if f.get("Name") == run_id:
      jobs.append(f)
  q = subprocess.run(["squeue", "--states=all", "-h", "--name", run_id, "-O", "JobID:20,Comment:200"],
                     capture_output=True, text=True).stdout
  rule = {l.split()[0]: re.match(r"rule_(\w+?)(_wildcards_|$)", l.split()[1]).group(1) for l in q.splitlines()}
  by_rule = collections.defaultdict(list)
  for f in jobs:
    secs = (datetime.fromisoformat(f["EndTime"]) - datetime.fromisoformat(f["StartTime"])).total_seconds()
    by_rule[rule.get(f["JobId"], "?")].append((peaks.get(f["JobId"], 0.0), secs))
  print(f"machine: {describe()}; SLURM {subprocess.run(['sinfo', '-V'], capture_output=True, text=True).stdout.strip()}")
  print(f"workflow: {len(jobs)} SLURM jobs in {wall:.0f} s (snakemake wall time, submit host = the node)")
  print(f"{'rule':18} {'jobs':>4} {'peak job RSS MB':>16} {'job wall s (min-max)':>22}")
  for name, rows in sorted(by_rule.items()):
    mem = max(m for m, _ in rows)
    lo, hi = min(s for _, s in rows), max(s for _, s in rows)
    print(f"{name:18} {len(rows):>4} {mem:>16.0f} {f'{lo:.0f}-{hi:.0f}':>22}")


if __name__ == "__main__":
  main()

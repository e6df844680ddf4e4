"""The workflow on a real SLURM cluster through snakemake-executor-plugin-slurm and profiles/slurm.

The module brings up a single-node cluster on this machine with scripts/slurm-cluster.sh (apt-installs slurmctld,
slurmd, slurm-client and munge when missing; needs root or sudo) and tears it down afterwards, also when a check
fails (the fixture's finalizer). A slice of the demo DAG (a 2-topic copy of the demo corpus: downloads, extract,
verify, shards, SHA256SUMS, a 1,000-row eval set and a 2-step training run that requests the node's fake GPU) runs
as SLURM jobs; then: every job Snakemake ran was a SLURM job that completed (squeue --states=all and the cluster's
job-completion log against Snakemake's own list), the outputs are byte-identical to a local build, and a corrupted
topic fails alone under --keep-going with its SLURM job reported failed. Snakemake runs under `timeout -k`, so a
stuck status poll cannot hang CI. The dry run of the README's SLURM command needs no cluster.
"""
from __future__ import annotations
import collections, hashlib, os, re, shutil, subprocess, sys, threading, time
from pathlib import Path

import pytest
import yaml

from workflow_helpers import REPO, demo_topic, make_corpus, write_config

SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
TIMEOUT = 900            # seconds per Snakemake run; `timeout -k 30` kills it and its children after that
TOPICS = ["part-00000-of-00002", "part-00001-of-00002"]
TRAIN = {"TRAIN_STEPS": 2, "NUM_WARMUP_STEPS": 1, "EVAL_STEP_FREQ": 2, "EVAL_SAMPLES": 16, "INIT_BENCHMARK_STEPS": 0, "TARGET": 0.01,
         "SAVE_CKPT_FREQ": 2}
TARGETS = ["shards/SHA256SUMS", "eval/eval.shard", "results/cpu/result_bert_0.log"]


class Timed:
  """A command started under `timeout -k 30 TIMEOUT` (a stuck status poll can never hang CI); .wait() -> self
  with .out (stdout and stderr), .returncode and .secs (until it ended)."""

  def __init__(self, cmd: list[str]):
    self.t0 = time.time()
    self.proc = subprocess.Popen(["timeout", "-k", "30", str(TIMEOUT), *cmd], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    self.thread = threading.Thread(target=self._collect, daemon=True)
    self.thread.start()

  def _collect(self):
    self.out = self.proc.communicate()[0]
    self.secs = time.time() - self.t0

  def wait(self):
    self.thread.join(TIMEOUT + 60)
    assert not self.thread.is_alive(), f"still running after {TIMEOUT + 60} s: {self.proc.args}"
    self.returncode = self.proc.returncode
    return self


def _snakemake_cmd(workdir: Path, *args: str) -> list[str]:
  return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args]


def _squeue(run_id: str) -> list[dict]:
  """This run's jobs as the controller lists them (finished ones stay listed for MinJobAge=600 s)."""
  out = subprocess.run(["squeue", "--states=all", "-h", "--name", run_id, "-O",
                        "JobID:20,State:20,Partition:12,tres-per-job:24,Comment:200"],
                       capture_output=True, text=True, check=True).stdout
  jobs = []
  for line in out.splitlines():
    jobid, state, part, tres, comment = line.split(None, 4)
    m = re.match(r"rule_(\w+?)(?:_wildcards_(.*))?$", comment.strip())
    jobs.append(dict(id=jobid, state=state, partition=part, tres=tres, rule=m.group(1), wildcards=m.group(2) or ""))
  return jobs


def _jobcomp(run_id: str) -> list[str]:
  """Job ids of this run in the cluster's job-completion log (every job that ended, whatever its age)."""
  path = Path(os.environ["SLURM_CLUSTER_DIR"]) / "jobcomp.txt"
  return re.findall(rf"JobId=(\d+) .*?Name={re.escape(run_id)} JobState=(\w+)", path.read_text())


def _finished(out: str) -> collections.Counter:
  """Rules of the jobs Snakemake reports finished (any executor)."""
  return collections.Counter(re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", out))


def _run_id(out: str) -> str:
  m = re.search(r"SLURM run ID: ([0-9a-f-]{36})", out)
  assert m, out[-4000:]
  return m.group(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
  """A single-node SLURM cluster for this module, torn down by the finalizer whatever the tests did."""
  if sys.platform != "linux" or (shutil.which("slurmctld") is None and shutil.which("apt-get") is None):
    pytest.skip("needs Linux with SLURM installed or apt-get to install it")
  state = tmp_path_factory.mktemp("slurm-cluster")
  env = dict(os.environ, SLURM_CLUSTER_DIR=str(state))
  was_up = subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0 if shutil.which("sinfo") else False
  if was_up:
    pytest.skip("a SLURM cluster already answers here; this test brings up and tears down its own")
  t0 = time.time()
  r = subprocess.run(["bash", str(SCRIPT), "up"], capture_output=True, text=True, env=env, timeout=600)
  print(f"cluster up in {time.time() - t0:.0f} s:\n{r.stderr[-1500:]}")
  old = os.environ.get("SLURM_CLUSTER_DIR")
  os.environ["SLURM_CLUSTER_DIR"] = str(state)
  try:
    assert r.returncode == 0, r.stdout + r.stderr
    yield state
  finally:
    d = subprocess.run(["bash", str(SCRIPT), "down"], capture_output=True, text=True, env=env, timeout=120)
    if old is None:
      os.environ.pop("SLURM_CLUSTER_DIR", None)
    else:
      os.environ["SLURM_CLUSTER_DIR"] = old
    assert d.returncode == 0, d.stdout + d.stderr
    assert subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode != 0, "slurmctld still runs"
    assert not Path("/etc/slurm/slurm.conf").exists()


def _profile_with_fake_gpu(tmp: Path) -> Path:
  """profiles/slurm as shipped, except that the cpu platform's training asks for one GPU (the node's fake GRES),
  so the GPU request path (sbatch --gpus=1 on the gpu partition) is exercised as on a GPU platform."""
  prof = yaml.safe_load(PROFILE.read_text())
  prof["set-resources"]["train"]["gpu"] = 1
  d = tmp / "profile-slurm"
  d.mkdir()
  (d / "config.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
  return d


@pytest.fixture(scope="module")
def runs(cluster, quick_kernels, tmp_path_factory):
  """Three Snakemake runs side by side (the node queues their jobs): the slice of the demo DAG from a 2-topic
  corpus built locally and as SLURM jobs, and the same slice (up to SHA256SUMS) from a copy with a corrupted topic
  as SLURM jobs under --keep-going. The jobs check SLURM's part, not kernels: the training job, which inherits this
  environment through sbatch, lowers its kernels without optimizations (conftest's quick_kernels), and Snakemake's
  status polls, 10 s further apart each round no job ended, notice its end sooner."""
  tmp = tmp_path_factory.mktemp("slurm-runs")
  corpus = make_corpus(tmp / "corpus", {t: demo_topic(i) for i, t in enumerate(TOPICS)})
  good, bad = demo_topic(2), bytearray(demo_topic(3))
  bad[1000:1010] = b"##########"     # the manifest keeps the true MD5: verify_topic fails
  bad_corpus = make_corpus(tmp / "bad-corpus", {TOPICS[0]: good, TOPICS[1]: bytes(bad)},
                           manifest_override={TOPICS[1]: hashlib.md5(demo_topic(3)).hexdigest()})
  started = {}
  for kind in ("local", "slurm", "bad"):
    wd = tmp / kind
    wd.mkdir()
    cfg = write_config(wd / "config.yaml", wd / "base", bad_corpus if kind == "bad" else corpus,
                       eval_examples=1000, seeds=[0], train=TRAIN)
    targets = [str(wd / "base" / t) for t in TARGETS]
    if kind == "local":
      args = [*targets[:2], "--cores", "1"]
    elif kind == "slurm":
      args = [*targets, "--profile", str(REPO / "profiles" / "cpu"), "--profile", str(_profile_with_fake_gpu(tmp)),
              "--slurm-keep-successful-logs"]
    else:
      args = [targets[0], "--profile", str(REPO / "profiles" / "cpu"), "--profile", str(PROFILE.parent),
              "--keep-going"]
    if kind != "local":
      # the profile polls squeue 10 s after a job ends and 10 s longer each round nothing ended (for a real cluster's
      # load): on this one-node cluster of seconds-long jobs, poll every second instead (MinJobAge 600 >= 3 x 1)
      args += ["--slurm-init-seconds-before-status-checks", "1"]
    started[kind] = (wd / "base", Timed(_snakemake_cmd(wd, *args, "--configfile", str(cfg))))
  done = {}
  try:
    for kind, (base, t) in started.items():
      t.wait()
      print(f"{kind} build: {t.secs:.0f} s (rc {t.returncode})")
      done[kind] = (base, t)
  finally:
    for _, t in started.values():
      if t.proc.poll() is None:
        t.proc.kill()
  for kind in ("local", "slurm"):
    t = done[kind][1]
    assert t.returncode == 0, f"{kind} build failed ({t.returncode}):\n{t.out[-8000:]}"
  return done


@pytest.mark.slow
@pytest.mark.slurm
def test_every_job_ran_as_a_completed_slurm_job(runs):
  out = runs["slurm"][1].out
  run_id = _run_id(out)
  jobs = _squeue(run_id)
  finished = _finished(out)
  # Snakemake's own list of the jobs it ran, rule by rule, equals the SLURM jobs of this run, all COMPLETED
  assert collections.Counter(j["rule"] for j in jobs) == finished, (jobs, finished, out[-3000:])
  assert sorted(finished) == sorted(["download", "extract", "verify_topic", "verify_eval", "shard", "shard_checksums",
                                     "evalset", "train"]), finished
  assert finished["shard"] == 2 and finished["verify_topic"] == 2 and finished["download"] == 4
  assert {j["state"] for j in jobs} == {"COMPLETED"}, jobs
  assert sorted(j for j, _ in _jobcomp(run_id)) == sorted(j["id"] for j in jobs)
  # no job ran through Snakemake's local executor
  assert "localrule" not in out, out[-3000:]
  # data jobs on the cpu partition without GPUs; training on the gpu partition with the (fake) GPU
  for j in jobs:
    if j["rule"] == "train":
      assert (j["partition"], j["tres"]) == ("gpu", "gres:gpu:1"), j
    else:
      assert (j["partition"], j["tres"]) == ("cpu", "N/A"), j
  # each job ran inside its SLURM allocation: its SLURM log (kept) is named after the SLURM job id
  logs = {p.stem for p in (runs["slurm"][0].parent / ".snakemake" / "slurm_logs").rglob("*.log")}
  assert logs == {j["id"] for j in jobs}, (logs, jobs)


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_outputs_equal_the_local_build(runs):
  local, slurm = runs["local"][0], runs["slurm"][0]
  sums = (slurm / "shards" / "SHA256SUMS").read_bytes()
  assert sums == (local / "shards" / "SHA256SUMS").read_bytes()
  assert len(sums.splitlines()) == len(TOPICS)
  for t in TOPICS:
    assert (slurm / "shards" / f"{t}.shard").read_bytes() == (local / "shards" / f"{t}.shard").read_bytes()
  assert (slurm / "eval" / "eval.shard").read_bytes() == (local / "eval" / "eval.shard").read_bytes()
  log = (slurm / "results" / "cpu" / "result_bert_0.log").read_text()
  assert ":::MLLOG" in log and '"run_stop"' in log


@pytest.mark.slow
@pytest.mark.slurm
def test_corrupted_topic_fails_alone_as_a_failed_slurm_job(runs):
  base, t = runs["bad"]
  out = t.out
  assert t.returncode not in (0, 124, 137), out[-4000:]
  assert (base / "shards" / f"{TOPICS[0]}.shard").exists(), out[-4000:]
  assert not (base / "shards" / f"{TOPICS[1]}.shard").exists()
  assert not (base / "shards" / "SHA256SUMS").exists()
  jobs = _squeue(_run_id(out))
  failed = [j for j in jobs if j["state"] != "COMPLETED"]
  assert [(j["rule"], j["state"]) for j in failed] == [("verify_topic", "FAILED")], jobs
  assert TOPICS[1] in failed[0]["wildcards"]
  assert f"SLURM-job '{failed[0]['id']}' failed" in out, out[-4000:]
  assert "Error in rule verify_topic" in out
  log = (base / "logs" / "verify_topic" / f"{TOPICS[1]}.log").read_text()
  assert "MD5 mismatch" in log, log
  # the good topic's chain and the rest completed as SLURM jobs
  assert collections.Counter(j["rule"] for j in jobs if j["state"] == "COMPLETED") == _finished(out)


def _readme_slurm_dry_run() -> str:
  """The README's SLURM dry-run command (the workflow "On a SLURM cluster")."""
  text = (REPO / "README.md").read_text()
  section = re.split(r"### \d+\. On a SLURM cluster", text, maxsplit=1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
  cmd = " ".join(l.strip().rstrip("\\").strip() for l in section.split("```bash", 1)[1].split("```", 1)[0]
                 .split("# dry run:", 1)[1].splitlines()[1:3])
  assert cmd.startswith("snakemake ") and " -n" in cmd, cmd
  return cmd


def test_readme_slurm_dry_run_with_the_real_config(tmp_path):
  """The README's dry run, verbatim (run from the repository), plans the real DAG with the SLURM requests."""
  import shlex
  cmd = shlex.split(_readme_slurm_dry_run())
  r = subprocess.run([sys.executable, "-m", *cmd, "-d", str(tmp_path)], capture_output=True, text=True,
                     cwd=REPO, timeout=300, env=dict(os.environ, PYTHONUNBUFFERED="1"))
  out = r.stdout + r.stderr
  assert r.returncode == 0, out[-4000:]
  assert "Using profiles" in out and "profiles/slurm" in out
  blocks = re.findall(r"^(?:rule|checkpoint) (\w+):\n(.*?)(?=^\S|\Z)", out, re.S | re.M)
  res = collections.defaultdict(list)
  for rule, body in blocks:
    m = re.search(r"resources: (.*)", body)
    if m:
      res[rule].append(dict(kv.split("=", 1) for kv in m.group(1).split(", ")))
  assert len(res["train"]) == 10, out[-3000:]              # config/mlperf.yaml: 10 seeds, one job each
  for r_ in res["train"]:
    assert (r_["slurm_partition"], r_["gpu"], r_["nodes"]) == ("gpu", "6", "1"), r_   # tinybox_green: GPUS=6
    assert "--exclusive" in r_["slurm_extra"]
  # config/mlperf.yaml takes the text already extracted from MLCommons' R2 storage: its listing job comes first
  # (the per-part r2_text jobs are planned once the listing exists), no extract step
  for rule in ("r2_listing", "download", "verify_eval", "evalset", "convert_init_weights"):
    assert res[rule], (rule, out[-3000:])
    for r_ in res[rule]:
      assert (r_["slurm_partition"], r_["gpu"]) == ("cpu", "0"), (rule, r_)
      assert int(r_["runtime"]) > 0 and int(r_["cpus_per_task"]) >= 1

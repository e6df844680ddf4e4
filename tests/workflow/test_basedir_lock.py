"""Two workflow runs on one basedir from different checkouts (working directories): Snakemake locks only its working
directory, so the basedir carries a lock of its own (<basedir>/logs/workflow.lock, an flock held by the running
Snakemake): the second run is refused in one line naming the lock and its holder; a killed holder leaves no lock."""
import subprocess, sys

from mlperf_bert.snakejob import LOCK_RECORD
from workflow_helpers import REPO, snakemake

HOLD = """import sys, time
from mlperf_bert.snakejob import lock_basedir
f = lock_basedir(sys.argv[1], checkout=sys.argv[2], argv=["snakemake", "--cores", "1"])
print("locked", flush=True)
time.sleep(300)
"""


def test_a_second_run_on_a_locked_basedir_is_refused_naming_the_holder(tmp_path):
  base, wd = tmp_path / "base", tmp_path / "other-checkout-workdir"
  wd.mkdir()
  target = str(base / "download" / "vocab.txt")
  holder = subprocess.Popen([sys.executable, "-c", HOLD, str(base), "/elsewhere/checkout"], stdout=subprocess.PIPE,
                            text=True)
  try:
    assert holder.stdout.readline().strip() == "locked"
    r = snakemake(wd, "--cores", "1", "--config", f"basedir={base}", "--", target, check=False, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert f"{base / LOCK_RECORD} is held by pid {holder.pid} on " in out, out[-3000:]
    assert "(checkout /elsewhere/checkout, since " in out and "another workflow run is using this basedir" in out
    assert "Traceback" not in out and not (base / "download").exists()  # refused before its first job
  finally:
    holder.kill()
    holder.wait()
  snakemake(wd, "--cores", "1", "--config", f"basedir={base}", "--", target, timeout=300)  # no stale lock
  assert (base / "download" / "vocab.txt").is_file()
  assert f"(checkout {REPO}, since " in (base / LOCK_RECORD).read_text()  # the last holder


# a tiny workflow of this project's kind: the basedir lock taken in onstart (as rules/common.smk does), one job
# whose script runs under job_log and sleeps
TINY_SNAKEFILE = """import sys
sys.path.insert(0, {repo!r})
from mlperf_bert.snakejob import lock_basedir
BASE = config["base"]
LOCK = []

onstart:
    LOCK.append(lock_basedir(BASE, checkout="tiny", argv=sys.argv))

rule sleeper:
    output: BASE + "/done"
    log: BASE + "/logs/sleeper/sleeper.log"
    script: "sleeper.py"
"""
SLEEPER = """import os, sys, time
sys.path.insert(0, {repo!r})
from mlperf_bert.snakejob import job_log
with job_log(snakemake.log[0]):
    open(snakemake.config["base"] + "/job.pid", "w").write(str(os.getpid()))
    time.sleep(120)
    open(snakemake.output[0], "w").write("finished")
"""


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def test_a_job_does_not_outlive_its_killed_workflow(tmp_path):
  """kill -9 of Snakemake frees the basedir lock; the running job notices within seconds and stops, in one line."""
  import os, signal, time
  base = tmp_path / "base"
  (tmp_path / "Snakefile").write_text(TINY_SNAKEFILE.format(repo=str(REPO)))
  (tmp_path / "sleeper.py").write_text(SLEEPER.format(repo=str(REPO)))
  smk = subprocess.Popen([sys.executable, "-m", "snakemake", "-s", str(tmp_path / "Snakefile"), "-d", str(tmp_path),
                          "--cores", "1", "--config", f"base={base}"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
  pidfile, job = base / "job.pid", None
  try:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (pidfile.is_file() and pidfile.read_text()):
      assert smk.poll() is None, "snakemake ended before its job started"
      time.sleep(0.2)
    job = int(pidfile.read_text())
    assert _alive(job)
    os.kill(smk.pid, signal.SIGKILL)
    smk.wait()
    t = time.monotonic()
    while _alive(job) and time.monotonic() - t < 15:
      time.sleep(0.2)
    assert not _alive(job), "the job outlived its killed workflow"
    took = time.monotonic() - t
  finally:
    if smk.poll() is None: smk.kill()
    if job is not None and _alive(job): os.kill(job, signal.SIGKILL)
  log = (base / "logs/sleeper/sleeper.log").read_text()
  errors = [line for line in log.splitlines() if line.startswith("error:")]
  assert errors == [f"error: {base / LOCK_RECORD} is no longer held: the Snakemake run that started this job is gone "
                    f"(killed); this job (process {job}) stops too. Rerun the same snakemake command to continue "
                    "(training resumes from its last checkpoint)"], log
  assert "Traceback" not in log and not (base / "done").exists() and took < 5

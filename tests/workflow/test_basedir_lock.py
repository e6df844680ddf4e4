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

"""The workflow as Snakemake sees it, without running a job: `snakemake --lint` is clean, and the demo config and
config/mlperf.yaml with every platform (through its Snakemake profile) give a complete dry run whose train jobs carry
the platform's resources.
Also the one real (cheap) run: Snakemake's command line reaches the basedir for the provenance records."""
import json, re
from pathlib import Path

import pytest, yaml

from workflow_helpers import REPO, snakemake
from mlperf_bert.constants import PLATFORM_FILE, PLATFORMS_DIR, platform_path

PLATFORMS = sorted(p.name for p in (REPO / PLATFORMS_DIR).iterdir() if (p / PLATFORM_FILE).is_file())


def _jobs(out: str) -> dict[str, int]:
  """The dry run's job-count table: {rule: count}."""
  table = out.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
  return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def _train_resources(out: str) -> set[str]:
  """The `resources:` lines of the dry run's train jobs."""
  jobs = re.split(r"^(?=(?:local)?(?:rule|checkpoint) \w+:$)", out, flags=re.M)
  return {line.strip() for j in jobs if j.startswith("rule train:")
          for line in j.splitlines() if line.strip().startswith("resources:")}


def _train_inputs(out: str) -> str:
  """The `input:` lines of the dry run's train jobs."""
  jobs = re.split(r"^(?=(?:local)?(?:rule|checkpoint) \w+:$)", out, flags=re.M)
  return "\n".join(line for j in jobs if j.startswith("rule train:") for line in j.splitlines()
                   if line.strip().startswith("input:"))


def test_preflight_true_on_the_demo_runs_before_train(tmp_path):
  """--config preflight=true: the check joins the demo's DAG as an input of train (without a checkpoint it only
  reports that); preflight=false on a closed platform leaves it out."""
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}", "preflight=true")
  assert _jobs(r.stdout)["preflight"] == 1 and "preflight/cpu.json" in _train_inputs(r.stdout)
  r = snakemake(tmp_path, "--profile", str(REPO / "profiles" / "tinybox_green"), "-n", "--config",
                f"basedir={tmp_path / 'base'}", "platform=tinybox_green", "preflight=false",
                configfile=REPO / "config/mlperf.yaml")
  assert "preflight" not in _jobs(r.stdout) and "preflight/" not in _train_inputs(r.stdout)


def test_lint_is_clean(tmp_path):
  r = snakemake(tmp_path, "--lint")
  assert "Congratulations, your workflow is in a good condition!" in r.stdout + r.stderr, r.stdout + r.stderr


def test_demo_dry_run(tmp_path):
  r = snakemake(tmp_path, "-n", "--config", f"basedir={tmp_path / 'base'}")
  jobs = _jobs(r.stdout)
  demo = yaml.safe_load((REPO / "config.yaml").read_text())
  # before the extract rule has run, the DAG holds every download and the seeds' runs (topics come later)
  assert jobs["download"] == len(demo["sources"]) and jobs["train"] == len(demo["seeds"]), jobs
  assert "convert_init_weights" not in jobs  # the demo trains from a seeded random init
  assert "preflight" not in jobs  # preflight: auto, and the demo is open division without MLPerf's checkpoint
  assert _train_resources(r.stdout) == {"resources: tmpdir=/tmp, gpu=0, runtime=30, mem_mb=3000, mem=3 GB, mem_mib=2862"}


@pytest.mark.parametrize("platform", PLATFORMS)
def test_mlperf_config_dry_run_with_each_platform(tmp_path, platform):
  """`--profile profiles/<p> --configfile config/mlperf.yaml`: the README's command for real data, on each platform."""
  r = snakemake(tmp_path, "--profile", str(REPO / "profiles" / platform), "-n",
                "--config", f"basedir={tmp_path / 'base'}", f"platform={platform}",
                configfile=REPO / "config/mlperf.yaml")
  jobs = _jobs(r.stdout)
  mlperf = yaml.safe_load((REPO / "config/mlperf.yaml").read_text())
  # one download job per file source; an R2 dataset of extracted text (`results4`) is listed, not downloaded, and
  # then the tarball and its manifest are not fetched
  src = mlperf["sources"]
  files = [k for k in src if k != "results4" and not ("results4" in src and k in (
    "bert_reference_results_text_md5.txt", "results_text.tar.gz"))]
  assert jobs["download"] == len(files) and jobs["train"] == len(mlperf["seeds"]), jobs
  if "results4" in src:
    assert jobs["r2_listing"] >= 1 and "extract" not in jobs, jobs
  assert jobs["convert_init_weights"] == 1, jobs
  # preflight: auto runs the initial weights' pre-flight check on the closed-division platforms only, before train
  plat = yaml.safe_load(platform_path(REPO, platform).read_text())
  closed = plat.get("SUBMISSION_DIVISION") == "closed"
  assert jobs.get("preflight", 0) == (1 if closed else 0), jobs
  if closed:
    assert f"preflight/{platform}.json" in _train_inputs(r.stdout), r.stdout
  # the train job's resources are the platform file's: gpu = GPUS (0 on CPU), mem_mb and runtime from `resources:`
  plat = yaml.safe_load(platform_path(REPO, platform).read_text())
  gpus = 0 if plat.get("DEV", "CPU").upper() == "CPU" else plat.get("GPUS", 1)
  (line,) = _train_resources(r.stdout)
  assert f"gpu={gpus}" in line and f"mem_mb={plat['resources']['mem_mb']}," in line, line
  assert f"runtime={plat['resources']['runtime']}" in line, line


def test_run_records_its_command_dry_run_does_not(tmp_path):
  base = tmp_path / "base"
  snakemake(tmp_path, "-n", "--config", f"basedir={base}")
  assert not (base / "logs/snakemake_command.json").exists()  # a dry run writes nothing
  target = str(base / "download/vocab.txt")  # the cheapest real job: copy the demo vocab
  snakemake(tmp_path, "--cores", "1", "--config", f"basedir={base}", "--", target)
  cmd = json.loads((base / "logs/snakemake_command.json").read_text())
  assert cmd == ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1", "--config",
                 f"basedir={base}", "--", target], cmd

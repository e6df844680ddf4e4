"""The submission package: built from tinycorp's v4.1 logs it passes mlperf-logging's package checker with the
official score; an open-division package from a few demo-like logs is assembled and its shortfalls named."""
import json, shutil, subprocess, sys
from pathlib import Path

import pytest
from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc

from mlperf_bert.constants import platform_path, system_path
from mlperf_bert import cli
from mlperf_bert.audit.submission import SYSTEM_FIELDS, build_package
from conftest import FIXTURES

DATA = FIXTURES / "tinycorp-v4.1"


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_tinycorp_green_package_passes_the_package_checker(tmp_path):
  logs = sorted((DATA / "results/tinybox_green/bert").glob("result_*.txt"))
  overrides = json.loads((DATA / "systems/tinybox_green.json").read_text())
  rec = build_package(tmp_path / "sub", logs=logs, ruleset="5.0.0", command="snakemake --cores all",
                      system_overrides=overrides)
  org = tmp_path / "sub" / "tinycorp"
  assert rec["package_checker"]["passed"], rec["package_checker"]["errors"]
  assert rec["score_rounded"] == 360.52 and rec["division"] == "closed"
  assert sorted(p.name for p in (org / "results/tinybox_green/bert").iterdir()) == [f"result_{i}.txt" for i in range(10)]
  desc = json.loads((org / "systems/tinybox_green.json").read_text())
  assert set(SYSTEM_FIELDS) <= set(desc) and check_system_desc(str(org / "systems/tinybox_green.json"), "training", "5.0.0")[0]
  impl = org / "benchmarks/bert/implementations/tinybox_green"
  assert "snakemake --cores all" in (impl / "run_and_time.sh").read_text() and (impl / "README.md").is_file()
  assert not (org / "results/tinybox_green/bert/scaling.json").exists()  # the checkers ran on a copy
  # the result summarizer, run here on the package, agrees
  work = tmp_path / "check"
  shutil.copytree(org, work / "tinycorp")
  out = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(work / "tinycorp"), "training",
                        "5.0.0", "--csv", str(work / "s.csv")], cwd=work, capture_output=True, text=True, check=True)
  assert "360.516" in (work / "s.csv").read_text()
  # a second build replaces the system's results (no stale files)
  rec2 = build_package(tmp_path / "sub", logs=logs[:9], ruleset="5.0.0", system_overrides=overrides)
  assert len(list((org / "results/tinybox_green/bert").iterdir())) == 9 and not rec2["package_checker"]["passed"]


def demo_logs(tmp_path, n=2) -> list[Path]:
  """Open-division CPU-demo-like logs: tinycorp's logs relabelled (org, platform, division)."""
  out = []
  for i in range(n):
    text = (DATA / f"results/tinybox_red/bert/result_{i}.txt").read_text()
    text = (text.replace('"value": "tinycorp"', '"value": "mlperf-bert"').replace('"value": "tinybox_red"', '"value": "cpu_demo"')
            .replace('"value": "closed"', '"value": "open"'))
    p = tmp_path / "results" / "cpu_demo" / f"result_bert_{i}.log"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    out.append(p)
  return out


@pytest.mark.slow  # compiles a model's kernels or runs a real tool: tens of seconds on 2 cores
def test_open_division_demo_package(tmp_path, capsys):
  logs = demo_logs(tmp_path)
  args = ["submission", *map(str, logs), "--out", str(tmp_path / "submission"), "--command", "snakemake --cores 2"]
  assert cli.main(args) == 0
  out = capsys.readouterr().out
  assert "package_checker (training 5.0.0): FAIL" in out and "found 2, expected 10" in out and "score (cpu_demo): none" in out
  org = tmp_path / "submission" / "mlperf-bert"
  desc = json.loads((org / "systems/cpu_demo.json").read_text())
  assert desc["division"] == "open" and desc["submitter"] == "mlperf-bert" and desc["accelerators_per_node"] == "0"
  readme = (org / "benchmarks/bert/implementations/cpu_demo/README.md").read_text()
  assert "## Why open division" in readme and "result_bert_1.log" in readme
  score = json.loads((tmp_path / "submission" / "mlperf-bert.cpu_demo.score.json").read_text())
  assert score["score_minutes"] is None and score["result_count"] == 2 and not score["package_checker"]["passed"]
  assert cli.main(args + ["--require-pass"]) == 1
  capsys.readouterr()


def test_bad_logs_are_refused(tmp_path, capsys):
  logs = demo_logs(tmp_path, 1)
  logs[0].write_text(logs[0].read_text().replace('"value": "bert"', '"value": "rgat"'))
  assert cli.main(["submission", str(logs[0]), "--out", str(tmp_path / "s")]) == 2
  assert "expected 'bert'" in capsys.readouterr().err
  assert cli.main(["submission", str(logs[0]), "--out", str(tmp_path / "s"), "--ruleset", "5.1.0"]) == 2


PLATFORMS = ("tinybox_green", "tinybox_red", "tinybox_8xMI300X", "dev_1gpu", "cpu")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_profile_system_json_passes_the_system_desc_checker(platform):
  """platforms/<platform>/system.json (what rule submission_package puts into systems/<system>.json) passes
  mlperf-logging's system_desc_checker for training 5.0.0 and agrees with what the platform's logs say."""
  from importlib.metadata import version
  from mlperf_bert.audit.mlperf_tools import system_desc_check
  from mlperf_bert.train.hparams import load_platform, resolve
  path = system_path(REPO, platform)
  ok, reasons = system_desc_check(path, "5.0.0")
  assert ok and not reasons, reasons
  desc = json.loads(path.read_text())
  assert list(desc) == SYSTEM_FIELDS  # every required field, in the checker's order, nothing else
  hp = resolve(load_platform(platform_path(REPO, platform))).as_dict()
  # the package's division and submitter must equal the logs' (the audit FAILs a division mismatch)
  assert desc["division"] == hp["SUBMISSION_DIVISION"] and desc["submitter"] == hp["SUBMISSION_ORG"]
  assert desc["framework"] == f"tinygrad {version('tinygrad')}" == "tinygrad 0.14.0"
  gpus = 0 if hp["DEV"] == "CPU" else hp["GPUS"]
  assert desc["accelerators_per_node"] == str(gpus)
  if platform == "cpu":
    assert desc["status"] == "Research, Development, or Internal (RDI)" and desc["division"] == "open"

"""bench/device_check.py, the prepared accelerator check, run on the CPU with a tiny override: this project's INIT
phase and benchmark steps, then tinygrad's own model_train.py (BENCHMARK) from a tinygrad checkout, both timed.

Needs a tinygrad work tree of e0139fa (or another commit whose model_train.py has train_bert's fake-data BENCHMARK
path), named by the environment variable MLPERF_BERT_TINYGRAD_CHECKOUT; skipped without it:

  git -C /path/to/tinygrad archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
  MLPERF_BERT_TINYGRAD_CHECKOUT=/tmp/tg .venv/bin/python -m pytest tests/train/test_device_check.py
"""
from __future__ import annotations
import json, os, subprocess, sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKOUT = os.environ.get("MLPERF_BERT_TINYGRAD_CHECKOUT", "")
STEPS = 3
# the CPU smoke run: the dev_1gpu platform (HALF) on the CPU with a 1-layer model of tinygrad's BERT_SIZE tiny dims,
# BEAM 0, an INIT phase of one step; CACHE_CLEAR off: the INIT phase must not empty the kernel cache other processes
# here share. About 4 min of CPU (13 min of wall time on 2 busy cores, docs/benchmarks.md)
TINY = ["DEV=CPU", "BEAM=0", "BS=2", "EVAL_BS=2", "BERT_LAYERS=1", "BERT_HIDDEN_SIZE=128", "BERT_NUM_HEADS=2",
        "BERT_INTERMEDIATE_SIZE=512", "CACHE_CLEAR=false", "INIT_BENCHMARK_STEPS=1"]


@pytest.mark.slow
@pytest.mark.skipif(not CHECKOUT, reason="set MLPERF_BERT_TINYGRAD_CHECKOUT to a tinygrad work tree (e.g. git archive of "
                                         "e0139fa) to run tinygrad's model_train.py beside this project's trainer")
def test_device_check_runs_on_cpu_with_a_tiny_override(tmp_path):
  out = tmp_path / "dc.json"
  p = subprocess.run([sys.executable, str(REPO / "bench" / "device_check.py"), CHECKOUT, "--steps", str(STEPS),
                      "--set", *TINY, "--json", str(out)], capture_output=True, text=True, timeout=1500, check=False)
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
  res = json.loads(out.read_text())
  assert len(res["ours_step_ms"]) == STEPS and len(res["tinygrad_step_ms"]) == STEPS
  assert all(t > 0 for t in res["ours_step_ms"] + res["tinygrad_step_ms"])
  assert res["ratio"] == pytest.approx(res["ours_median_ms"] / res["tinygrad_median_ms"])
  assert res["init_phase_s"] > 0 and res["overrides"]["DEV"] == "CPU" and res["seq"] == 512
  assert "machine: " in p.stdout and "ratio this project / tinygrad: " in p.stdout
  assert f"== tinygrad's model_train.py, BENCHMARK={STEPS}" in p.stdout


def test_device_check_refuses_a_size_tinygrad_has_not(tmp_path):
  """A model size train_bert cannot build (only BERT_SIZE large or tiny) is refused before anything runs."""
  (tmp_path / "examples" / "mlperf").mkdir(parents=True)
  (tmp_path / "examples" / "mlperf" / "model_train.py").write_text("raise SystemExit('must not run')\n")
  p = subprocess.run([sys.executable, str(REPO / "bench" / "device_check.py"), str(tmp_path), "--steps", "3",
                      "--set", "DEV=CPU", "BERT_HIDDEN_SIZE=256"], capture_output=True, text=True, timeout=120,
                     check=False)
  assert p.returncode != 0 and "only BERT_SIZE large" in p.stderr, p.stdout + p.stderr
  assert "== " not in p.stdout  # no side started


def test_device_check_rates_prints_each_measured_rate_beside_the_model_s(tmp_path):
  """--rates (--rates-small on the CPU): bench/device_rates.py's four figures with the checkout's tinygrad (here the
  installed one, linked into a stand-in checkout), each beside the constant of the platform's box in hardware.py."""
  import tinygrad
  from mlperf_bert.train.cost.hardware import BOXES
  (tmp_path / "examples" / "mlperf").mkdir(parents=True)
  (tmp_path / "examples" / "mlperf" / "model_train.py").write_text("raise SystemExit('must not run')\n")
  (tmp_path / "tinygrad").symlink_to(Path(tinygrad.__file__).parent)
  out = tmp_path / "rates.json"
  p = subprocess.run([sys.executable, str(REPO / "bench" / "device_check.py"), str(tmp_path), "--rates", "--rates-small",
                      "--platform-file", str(REPO / "platforms" / "tinybox_8xMI300X" / "platform.yaml"),
                      "--set", "DEV=CPU", "BEAM=0", "--json", str(out)], capture_output=True, text=True, timeout=600,
                     check=False)
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
  rates = json.loads(out.read_text())["rates"]
  assert set(rates) == {"gemm", "vector", "gemv", "launch"} and all(v >= 0 for v in rates.values())
  box = BOXES["AMDLLVM:gfx942"]
  assert f"the model's tc_achievable {box.card.tc_achievable:.3f}" in p.stdout
  assert f"the model's mem_achievable {box.card.mem_achievable:.3f}" in p.stdout
  assert f"the model's launch gap {box.launch_us:.2f} us" in p.stdout and "must not run" not in p.stdout + p.stderr

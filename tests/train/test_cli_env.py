"""`python -m mlperf_bert train` applies the platform file's tinygrad settings itself: they are exported before
tinygrad is imported (it reads them at import), and win over the same variables in the environment."""
import os, subprocess, sys

import pytest

import yaml

from test_train import cpu_kernels, data  # noqa: F401  (the module's synthetic shards; cpu_kernels: autouse)
from mlperf_bert.train.environment import export_tinygrad_env
from mlperf_bert.train.hparams import resolve


def test_export_sets_the_platform_values_and_notes_replaced_ones():
  hp = resolve({"DEV": "CPU", "BEAM": 0, "DEFAULT_FLOAT": "HALF"}, seed=0, eval_examples=10)
  env = {"BEAM": "3", "DEBUG": "1"}
  notes = export_tinygrad_env(hp, env)
  assert env["BEAM"] == "0" and env["DEFAULT_FLOAT"] == "half" and env["DEV"] == "CPU" and env["USE_ATOMICS"] == "1"
  assert env["DEBUG"] == "1"                                   # not the platform's: left alone
  assert notes == ["note: BEAM=3 in the environment; the platform sets BEAM=0"]


@pytest.mark.full  # the rehearsal's two processes run this command with a platform file
@pytest.mark.slow  # a training run in a subprocess: minutes on 2 cores
def test_cli_train_applies_the_platform_file_before_importing_tinygrad(data, tmp_path):  # noqa: F811
  # DEBUG=1 in the platform file: tinygrad (which reads it at import) then says which devices it opened. The
  # environment says DEBUG=0: without the CLI exporting the platform's value first, nothing would be printed.
  plat = tmp_path / "platform.yaml"
  plat.write_text(yaml.safe_dump({"DEV": "CPU", "DEBUG": 1, "BS": 4, "EVAL_BS": 4, "INIT_BENCHMARK_STEPS": 0,
                                  "CACHE_CLEAR": False, "BERT_LAYERS": 1}))
  cmd = [sys.executable, "-m", "mlperf_bert", "train", "--platform-file", str(plat), "--shards", *map(str, data["shards"]),
         "--eval", str(data["eval"]), "--bert-config", str(data["config"]), "--max-seq-length", "32",
         "--max-predictions-per-seq", "5", "--out", str(tmp_path / "r.log"), "--ckpt-dir", str(tmp_path / "ck"),
         "--benchmark", "1"]
  p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "DEBUG": "0"})
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
  assert "opened device CPU" in p.stdout + p.stderr
  assert "note: DEBUG=0 in the environment; the platform sets DEBUG=1" in p.stderr

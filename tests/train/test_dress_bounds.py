"""The dress's bound (mlperf_bert/train/dress/bounds.py): absurd settings refused in one line within seconds, before
the capture; the estimate it refuses on is below what every recorded dress of tinybox_green measured (so it never
refuses a setting the dress would find fits), and no shipped platform is refused."""
from __future__ import annotations
import json, re, subprocess, sys, time
from pathlib import Path

import pytest

from mlperf_bert.errors import UserError
from mlperf_bert.train.dress.bounds import (FLOAT_BYTES, check_dress_bounds, dress_refusal,
                                            layer_activation_bytes)
from mlperf_bert.train.dress.setup import DEFAULT_BERT_CONFIG, SEQ
from mlperf_bert.train.hparams import load_platform, resolve

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/dress-tinygrad"


def _settings(platform: str, **over):
  return resolve(load_platform(REPO / "platforms" / platform / "platform.yaml"), over, where="--set")


@pytest.mark.parametrize("sets, key", [(["BS=6", "EVAL_BS=1000002"], "EVAL_BS"), (["BS=600000"], "BS")])
def test_absurd_settings_are_refused_in_one_line_within_seconds(sets, key):
  """Before: EVAL_BS 1000002 ended after 68 s and 5.2 GB in tinygrad's "cannot limit dim"; BS 600000 ran unbounded."""
  t0 = time.time()
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "dress", "--platform", "tinybox_green", "--set", *sets],
                     capture_output=True, text=True, timeout=60, cwd=REPO)
  took = time.time() - t0
  out = p.stdout + p.stderr
  assert p.returncode != 0 and "Traceback" not in out and took < 60, out[-3000:]
  assert len(out.strip().splitlines()) == 1, out
  assert re.search(rf"^error: tinybox_green on CUDA:sm_89: refused before the capture: {key} [\d,]+ \([\d,]+ a device "
                   rf"on 6\) holds an estimated [\d,]+ GB of activations a device .* more than 2 x the 24 GiB of the "
                   rf"RTX 4090 .*; lower it \(--set {key}=\.\.\.\)$", out.strip()), out


def test_a_per_device_batch_the_grid_cannot_split_is_refused(tmp_path):
  """A small model (memory no bound on an MI300X) with a prime per-device eval batch above 65535: tinygrad cannot
  split that axis into the grid's y or z dimension."""
  cfg = json.loads(DEFAULT_BERT_CONFIG.read_text())
  small = tmp_path / "bert_config.json"
  small.write_text(json.dumps({**cfg, "hidden_size": 128, "num_attention_heads": 2, "num_hidden_layers": 2}))
  s = _settings("tinybox_8xMI300X", BS=8, EVAL_BS=8 * 70001)
  why = dress_refusal(s, small, "AMDLLVM:gfx942")
  assert why.startswith("EVAL_BS 70,001 a device has the prime factor 70,001, more than the 65,535 blocks"), why
  assert dress_refusal(s.replace(EVAL_BS=8 * 70000), small, "AMDLLVM:gfx942") == ""  # 70000 = 2^4 5^4 7: it splits
  with pytest.raises(UserError, match=r"^the dress: refused before the capture: EVAL_BS 70,001 .*cannot limit dim"):
    check_dress_bounds(s, small, "AMDLLVM:gfx942")


def test_the_estimate_is_below_every_recorded_dress_of_bert_large():
  """The bound's activations a sample (Korthikanti et al.) against what tinygrad's dress of BERT-large measured a
  sample (the step's peak less the persistent state, over the per-device batch), train and eval, at each depth."""
  cfg = json.loads(DEFAULT_BERT_CONFIG.read_text())
  per_layer = layer_activation_bytes(cfg["hidden_size"], cfg["num_attention_heads"], SEQ, FLOAT_BYTES["half"])
  checked = 0
  for f in sorted(FIXTURES.glob("tinybox_green-*-bs*.json")):
    d = json.loads(f.read_text())
    assert d["settings"]["DEFAULT_FLOAT"] == "HALF"
    for p in d["points"]:
      dev, n = p["devices"][0], len(p["devices"])
      train = (max(p["train_peak"].values()) - p["persistent"][dev]) / (p["batch_size"] // n)
      evaluation = (max(p["eval_peak"].values()) - p["persistent"][dev]) / (p["eval_batch_size"] // n)
      assert p["layers"] * per_layer < train and per_layer < evaluation, (f.name, p["layers"], train, evaluation)
      checked += 1
  assert checked >= 20


def test_no_shipped_platform_is_refused():
  for path in sorted((REPO / "platforms").glob("*/platform.yaml")):
    platform = load_platform(path)
    if platform.get("DRESS_TARGET"):
      assert dress_refusal(resolve(platform, {}), DEFAULT_BERT_CONFIG, platform["DRESS_TARGET"]) == "", path

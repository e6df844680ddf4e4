"""CPU_THREADS (mlperf_bert/train/cpu_threads.py): tinygrad 0.14's per-core slices of each CPU kernel run on a
thread pool. Real train and eval steps of a small BERT in a child process (the change is process-wide), first with
the setting off, then on, from the same seed and batches: the losses, the eval numbers and every weight
after the steps must be bit-identical, and the slices must have run on the pool's threads."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHILD = r"""
import hashlib, json, threading
import numpy as np
from tinygrad import Tensor
from mlperf_bert.train.hparams import resolve
from mlperf_bert.train.model import BertConfig
from mlperf_bert.train.trainer import ModelTrainer, fake_batch
from mlperf_bert.train import cpu_threads
cfg = BertConfig(vocab_size=3000, hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128)

def run(on):
  hp = resolve({}, {"DEV": "CPU", "BS": 4, "EVAL_BS": 4, "TRAIN_STEPS": 10, "NUM_WARMUP_STEPS": 2, "CPU_THREADS": on,
                    "OPT_BASE_LEARNING_RATE": 0.01}, seed=0, eval_examples=100)
  Tensor.manual_seed(7)
  steps = ModelTrainer(cfg, hp, ("CPU",), seed=7)
  rng = np.random.default_rng(0)
  losses = [steps.train(fake_batch(4, 32, 5, cfg.vocab_size, rng))[0].item() for _ in range(4)]
  ev = [t.item() for t in steps.evaluate(fake_batch(4, 32, 5, cfg.vocab_size, rng), np.ones(4, np.float32))]
  h = hashlib.sha256()
  for k, t in sorted(steps.state_tensors().items()): h.update(k.encode()); h.update(t.numpy().tobytes())
  return {"losses": [float(x).hex() for x in losses], "eval": [float(x).hex() for x in ev], "state": h.hexdigest(),
          "patched": cpu_threads.enabled(),
          "pool_threads": sum(t.name.startswith("tinygrad-cpu") for t in threading.enumerate())}

print("RESULT " + json.dumps([run(False), run(True)]))  # off first: the setting cannot be undone in a process
"""


def child() -> list[dict]:
  # two slices per kernel whatever this machine's core count (tinygrad reads NUM_CPU_THREADS at import)
  env = {**os.environ, "DEV": "CPU", "USE_ATOMICS": "1", "NUM_CPU_THREADS": "2", "PYTHONPATH": str(REPO)}
  p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900)
  assert p.returncode == 0, p.stderr[-3000:]
  return json.loads(next(l for l in p.stdout.splitlines() if l.startswith("RESULT "))[7:])


@pytest.mark.full  # the demo and every CI end-to-end run train with CPU_THREADS on (platforms/cpu); this compares off
@pytest.mark.slow
def test_threads_change_nothing_but_the_threads():
  off, on = child()
  assert not off["patched"] and off["pool_threads"] == 0
  assert on["patched"] and on["pool_threads"] == 1      # 2 slices: one on the calling thread, one on the pool
  assert on["losses"] == off["losses"]                  # bit-identical floats (hex)
  assert on["eval"] == off["eval"]
  assert on["state"] == off["state"]                    # every weight and LAMB moment

#!/usr/bin/env python3
"""What the audit's eval re-execution costs per batch at BERT-large width on this machine's CPU.

    python bench/bench_reexec.py [--layers 1 2] [--bs 8] [--seq 512] [--pred 76]
    python bench/bench_reexec.py --layers 1 --hidden 128 --heads 2 --intermediate 512 --bs 64 --seq 128 --pred 20  # demo

Builds the trainer's model (resources/demo/bert_config.json: BERT-large, hidden 1024, 16 heads, intermediate 4096,
the real vocabulary) with each number of layers, float32 on one CPU device, and times the trainer's own jitted eval
step (ModelTrainer.evaluate, as audit/reexec.py runs it): the first call (compile and capture) and the median of
three later ones, in wall and CPU seconds. The per-layer slope extrapolates to 24 layers (the embeddings and the
masked-LM decoder are the intercept); the batch size scales it linearly. Prints figures only.
"""
from __future__ import annotations
import argparse, os, resource, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("USE_ATOMICS", "1")
from machine import describe  # noqa: E402

# the eval step's sizes (--NAME N): MLPerf's batch of 8 at BERT-large width, sequence 512, 76 predictions
SIZES = {"bs": 8, "seq": 512, "pred": 76, "hidden": 1024, "heads": 16, "intermediate": 4096}


def cpu() -> float:
  r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def one(layers: int, bs: int, seq: int, pred: int, width: tuple[int, int, int]) -> tuple[float, float, float, float]:
  import numpy as np
  from mlperf_bert.constants import platform_path
  from mlperf_bert.train.hparams import load_platform, resolve
  from mlperf_bert.train.trainer import ModelTrainer, devices_for, fake_batch, model_config
  s = resolve(load_platform(platform_path(ROOT, "cpu")),
              {"BERT_LAYERS": layers, "BERT_HIDDEN_SIZE": width[0], "BERT_NUM_HEADS": width[1],
               "BERT_INTERMEDIATE_SIZE": width[2],
               "EVAL_BS": bs, "EVAL_SAMPLES": bs}, seed=0, eval_examples=bs)
  cfg = model_config(ROOT / "resources" / "demo" / "bert_config.json", s.model)
  trainer = ModelTrainer(cfg, s, devices_for("CPU", 1), seed=0)
  b = fake_batch(bs, seq, pred, cfg.vocab_size, np.random.default_rng(0))
  ones = np.ones(bs, np.float32)
  w, c = time.perf_counter(), cpu()
  trainer.evaluate(b, ones)[0].item()  # ModelTrainer's steps are captured on their first call (train/jitmem.py)
  first_w, first_c = time.perf_counter() - w, cpu() - c
  walls, cpus = [], []
  for _ in range(3):
    w, c = time.perf_counter(), cpu()
    trainer.evaluate(b, ones)[0].item()
    walls.append(time.perf_counter() - w); cpus.append(cpu() - c)
  return first_w, first_c, sorted(walls)[1], sorted(cpus)[1]


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--layers", type=int, nargs="+", default=[1, 2])
  for name, default in SIZES.items(): ap.add_argument(f"--{name}", type=int, default=default)
  a = ap.parse_args()
  print(describe())
  print(f"load: {os.getloadavg()[0]:.2f}")
  rows = []
  for L in a.layers:
    fw, fc, w, c = one(L, a.bs, a.seq, a.pred, (a.hidden, a.heads, a.intermediate))
    rows.append((L, w, c))
    print(f"{L} layer(s), batch {a.bs} x {a.seq}: first two calls (compile, capture) {fw:.1f} s wall / {fc:.1f} s CPU; "
          f"a batch {w:.2f} s wall / {c:.2f} s CPU")
  if len(rows) >= 2:
    (l0, w0, c0), (l1, w1, c1) = rows[0], rows[-1]
    sw, sc = (w1 - w0) / (l1 - l0), (c1 - c0) / (l1 - l0)
    print(f"extrapolated to 24 layers, batch {a.bs}: {w0 + sw * (24 - l0):.1f} s wall / "
          f"{c0 + sc * (24 - l0):.1f} s CPU per batch")


if __name__ == "__main__":
  main()

"""Training loader throughput: samples/s of the seeded round-robin stream (with its prefetch thread) and of the
eval batches, on a basedir's shards (default: the demo's results/demo) or synthetic shards.

  .venv/bin/python bench/bench_loader.py [--basedir results/demo] [--bs 8] [--batches 500]
"""
import argparse, sys, tempfile, time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mlperf_bert.data.loader import TrainLoader, eval_batches, open_shards, stream_indices
from mlperf_bert.data.shards import Shard, write_shard


def synthetic(d: Path, files=8, n=4000, seq=128, pred=20):
  rng = np.random.default_rng(0)
  for f in range(files):
    inst = []
    for _ in range(n):
      la, lb = int(rng.integers(20, 60)), int(rng.integers(20, seq - 64))
      ids = [101] + rng.integers(1000, 30000, la).tolist() + [102] + rng.integers(1000, 30000, lb).tolist() + [102]
      pos = sorted(rng.choice(np.arange(1, len(ids) - 1), size=pred, replace=False).tolist())
      inst.append({"input_ids": ids, "segment_ids": [0] * (la + 2) + [1] * (lb + 1), "masked_lm_positions": pos,
                   "masked_lm_ids": [ids[p] for p in pos], "next_sentence_label": 0})
    write_shard(d / f"part-{f:05d}-of-{files:05d}.shard", inst, max_seq_length=seq, max_predictions_per_seq=pred)
  return sorted(d.glob("*.shard"))


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--basedir", default="results/demo")
  ap.add_argument("--bs", type=int, default=8)
  ap.add_argument("--batches", type=int, default=500)
  a = ap.parse_args()
  with tempfile.TemporaryDirectory() as td:
    shard_dir = Path(a.basedir) / "shards"
    paths = sorted(shard_dir.glob("*.shard")) if shard_dir.is_dir() else []
    if not paths:
      print(f"no shards under {shard_dir}; writing synthetic ones (seq 128, 20 predictions)")
      paths = synthetic(Path(td))
    shards = open_shards(paths)
    total = sum(len(s) for s in shards)
    print(f"{len(shards)} shards, {total} samples, seq {shards[0].max_seq_length}, pred {shards[0].max_predictions_per_seq}")
    t = time.perf_counter(); stream_indices([len(s) for s in shards], 0, 1, start=total - 1)
    print(f"resume jump to sample {total - 1}: {(time.perf_counter() - t) * 1e3:.2f} ms")
    with TrainLoader(shards, a.bs, seed=0) as it:
      next(it)
      t = time.perf_counter()
      for _ in range(a.batches): next(it)
      dt = time.perf_counter() - t
    print(f"train loader: BS {a.bs}: {a.batches * a.bs / dt:,.0f} samples/s ({dt / a.batches * 1e3:.3f} ms/batch)")
    for bs in (a.bs * 12, 1024):
      with TrainLoader(shards, bs, seed=0) as it:
        next(it); t = time.perf_counter()
        for _ in range(20): next(it)
        dt = time.perf_counter() - t
      print(f"train loader: BS {bs}: {20 * bs / dt:,.0f} samples/s ({dt / 20 * 1e3:.2f} ms/batch)")
    ev = Path(a.basedir) / "eval" / "eval.shard"
    esh = Shard(ev) if ev.is_file() else shards[0]
    n = min(len(esh), 10000)
    t = time.perf_counter(); k = sum(1 for _ in eval_batches(esh, 64, n)); dt = time.perf_counter() - t
    print(f"eval batches: {n} samples in {k} batches of 64: {n / dt:,.0f} samples/s")


if __name__ == "__main__":
  main()

#!/usr/bin/env python3
"""Benchmark the check every shard consumer runs before using a shard (Shard.verify: body CRC-32 + value ranges)
against what reading the shard costs.

    python bench/bench_verify.py [--size-mb 28] [--repeat 3]

Builds one topic of --size-mb MB of text (the demo topics repeated, as bench_shard.py does) with the reference
settings (512 / 76), then times, with the file in the page cache (best of --repeat):
  open     Shard(path): header, size and the small tables;
  verify   the whole check (CRC-32 of the body, token ids < vocab size, labels, positions);
  read     every instance's seven features (read_features without the check: what the features dump and one
           epoch of the loader read);
  bytes    reading the file's bytes (cat > /dev/null), the floor of any reader.
Prints figures only; nothing is asserted about speed.
"""
from __future__ import annotations
import argparse, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from machine import describe  # noqa: E402


def best(fn, repeat: int) -> tuple[float, float]:
  """(wall, CPU) seconds of the fastest of `repeat` calls (CPU: this process, all threads; contention inflates wall
  more than CPU on a shared machine)."""
  out = []
  for _ in range(repeat):
    t, c = time.perf_counter(), time.process_time(); fn()
    out.append((time.perf_counter() - t, time.process_time() - c))
  return min(out)


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--size-mb", type=float, default=28.0)
  ap.add_argument("--repeat", type=int, default=3)
  a = ap.parse_args()
  import numpy as np
  from bench_shard import DEMO, extract_demo, make_topic
  from mlperf_bert.constants import FEATURES
  from mlperf_bert.data.instances import build_shard
  from mlperf_bert.data.shards import Shard

  print(f"machine: {describe()}")
  with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    (tmp / "demo").mkdir()
    src = extract_demo(tmp / "demo")
    text = tmp / "topic.txt"
    make_topic(src, text, a.size_mb)
    shard = tmp / "topic.shard"
    build_shard(text, DEMO / "vocab.txt", shard, max_seq_length=512, max_predictions_per_seq=76, log=None)
    size = shard.stat().st_size
    Path(shard).read_bytes()  # into the page cache

    def read_all():
      sh = Shard(shard, check=False)
      for s in range(0, len(sh), 4096):
        b = sh.batch(np.arange(s, min(s + 4096, len(sh))))
        assert set(b) == set(FEATURES)
      sh.close()

    def raw_bytes():
      with open(shard, "rb") as f:
        while f.read(1 << 22): pass

    def verify():
      sh = Shard(shard, check=False); sh.verify(); sh.close()

    sh = Shard(shard); n = len(sh); sh.close()
    t_open = best(lambda: Shard(shard, check=False).close(), a.repeat)
    t_verify = best(verify, a.repeat)
    t_read = best(read_all, a.repeat)
    t_bytes = best(raw_bytes, a.repeat)
    mb = size / 2**20
    print(f"shard: {text.stat().st_size / 2**20:.1f} MB of text -> {mb:.1f} MB, {n:,} instances (512 / 76)")
    print("                         wall ms    CPU ms")
    print(f"open (header + tables): {t_open[0] * 1e3:9.1f} {t_open[1] * 1e3:9.1f}")
    print(f"verify (CRC + ranges):  {t_verify[0] * 1e3:9.1f} {t_verify[1] * 1e3:9.1f}  ({mb / t_verify[1]:,.0f} MB per CPU s)")
    print(f"read all features:      {t_read[0] * 1e3:9.1f} {t_read[1] * 1e3:9.1f}  ({n / t_read[1]:,.0f} instances per CPU s)")
    print(f"read the bytes:         {t_bytes[0] * 1e3:9.1f} {t_bytes[1] * 1e3:9.1f}  (page cache)")
    print(f"verify / read all features: {t_verify[0] / t_read[0]:.3f} wall, {t_verify[1] / t_read[1]:.3f} CPU")


if __name__ == "__main__":
  main()

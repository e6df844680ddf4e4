"""What the tinygrad trainer's export costs on disk (docs/tinygrad-trainer.md): one demo topic made into a shard at
MLPerf's settings (max_seq_length 512, 76 predictions) and exported as tinygrad's loader reads it (one pickle of
per-sample dicts), with the bytes per instance and per byte of topic text, extrapolated to MLPerf's 500 topics.

  .venv/bin/python bench/bench_tinygrad_export.py [--topic part-00000-of-00008] [--text-gb 13.5]

--text-gb: the 500 topics' text size the extrapolation assumes (default 500 x 27 MB, the size of a real topic
bench/bench_shard.py uses); the printed figures name the machine and the date.
"""
from __future__ import annotations
import argparse, os, subprocess, sys, tarfile, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from machine import describe, machine  # noqa: E402
from mlperf_bert.train.tinygrad_trainer.export import export  # noqa: E402


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--topic", default="part-00000-of-00008")
  ap.add_argument("--text-gb", type=float, default=500 * 27e6 / 1e9)
  a = ap.parse_args()
  print(f"machine: {describe(machine())}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
  with tempfile.TemporaryDirectory(prefix="bench_tg_export_") as tmp:
    tmp = Path(tmp)
    with tarfile.open(REPO / "resources" / "demo" / "results_text.tar.gz") as tar:
      (tmp / "topic.txt").write_bytes(tar.extractfile(f"results4/{a.topic}").read())
    shard = tmp / f"{a.topic}.shard"
    subprocess.run([sys.executable, "-m", "mlperf_bert", "shard", "--input", str(tmp / "topic.txt"), "--vocab",
                    str(REPO / "resources" / "demo" / "vocab.txt"), "--output", str(shard), "--max-seq-length", "512",
                    "--max-predictions-per-seq", "76", "--no-progress"], check=True, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    t0 = time.monotonic()
    st = export([shard], shard, tmp / "tg", 512, 76, log=lambda s: None)
    dt = time.monotonic() - t0
    text = (tmp / "topic.txt").stat().st_size
    per_text = st["train_bytes"] / text
    print(f"topic {a.topic}: {text / 1e6:.2f} MB of text, {st['train_rows']} instances at 512 / 76")
    print(f"shard: {st['shard_bytes'] / 1e6:.2f} MB; tinygrad pickle: {st['train_bytes'] / 1e6:.1f} MB "
          f"({st['train_bytes'] / st['train_rows']:.0f} B per instance, {per_text:.1f}x the text, "
          f"{st['train_bytes'] / st['shard_bytes']:.1f}x the shard); export {dt:.1f} s")
    print(f"500 topics at {a.text_gb:.1f} GB of text: about {per_text * a.text_gb:.0f} GB of pickles "
          f"(+ eval.pkl: 10,000 x {st['train_bytes'] / st['train_rows'] / 1e3:.1f} kB = "
          f"{10000 * st['train_bytes'] / st['train_rows'] / 1e6:.0f} MB)")


if __name__ == "__main__":
  main()

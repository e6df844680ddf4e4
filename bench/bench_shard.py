#!/usr/bin/env python3
"""Benchmark the shard builder: CPU seconds per MB of topic text, shard size, peak memory.

    python bench/bench_shard.py [--size-mb 27] [--engine auto] [--phases]

1. Correctness gate: builds the demo's part-00000 and eval.txt shards and checks their canonical feature
   digests against the MLCommons reference oracles (tests/fixtures/oracle); figures count only if they match.
2. Builds one topic of --size-mb MB (the demo topics repeated) in a fresh process, as a workflow job would,
   and prints CPU seconds (user + system, all threads) per MB, wall time, shard bytes / text bytes and the
   process's peak RSS.
   Then times Shard.batch on random indices (the trainer's access pattern).
3. --phases: splits the CPU time of one in-process build into tokenizing, instance creation (each engine)
   and writing.
Prints figures only; nothing is asserted about speed.
"""
from __future__ import annotations
import argparse, os, sys, tarfile, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
DEMO = ROOT / "resources" / "demo"
ORACLE = {"part-00000-of-00008": "86fa9dff905a6f8a0f5c8339a0aa405aabb4a7e4adaa48d6958a353f733cdde6",
          "eval.txt": "818977e5fb6760f9362df2a0d89c914f9398309a2284bbd212d71202d31f10da"}


def extract_demo(dest: Path) -> Path:
  with tarfile.open(DEMO / "results_text.tar.gz") as tar:
    for m in tar.getmembers():
      if m.isfile():
        (dest / Path(m.name).name).write_bytes(tar.extractfile(m).read())
  return dest


def make_topic(src: Path, out: Path, size_mb: float) -> int:
  """A topic of about size_mb MB: the demo training topics' documents, repeated."""
  parts = sorted(p for p in src.iterdir() if p.name.startswith("part-"))
  block = b"".join(p.read_bytes().rstrip(b"\n") + b"\n\n" for p in parts)
  want, n = int(size_mb * 2**20), 0
  with open(out, "wb") as f:
    while n < want:
      f.write(block)
      n += len(block)
  return n


def run_measured(args: list[str]) -> dict:
  """Run `python -m mlperf_bert ...` as a child; its own CPU time (all threads) and peak RSS, from wait4."""
  t = time.perf_counter()
  pid = os.fork()
  if pid == 0:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.execv(sys.executable, [sys.executable, "-m", "mlperf_bert", *args])
  _, status, ru = os.wait4(pid, 0)
  wall = time.perf_counter() - t
  if os.waitstatus_to_exitcode(status) != 0:
    raise SystemExit(f"job failed: {args}")
  return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_mb": ru.ru_maxrss / 1024}


def gate(tmp: Path, text: Path, engine: str) -> None:
  from feature_digest import digest
  from mlperf_bert.data.shards import read_features
  for name, want in ORACLE.items():
    out = tmp / f"{name}.shard"
    r = run_measured(["shard", "--input", str(text / name), "--vocab", str(DEMO / "vocab.txt"), "--output", str(out),
                      "--engine", engine, "--no-progress"])
    got = digest(read_features(out))
    mb = (text / name).stat().st_size / 2**20
    print(f"gate {name}: digest {'== reference' if got == want else '!= REFERENCE ' + got}; "
          f"{r['cpu']:.2f} CPU s for {mb:.2f} MB (includes process start-up)")
    if got != want:
      raise SystemExit("output differs from the reference: figures below would not count")


def phases(topic: Path) -> None:
  from mlperf_bert.data.corpus import PreprocessingSettings
  from mlperf_bert.data.instances import create_instances, available_engines, special_ids, tokenize_corpus, \
    write_instances
  from mlperf_bert.data.tokenizer import Tokenizer, load_vocab
  mb = topic.stat().st_size / 2**20
  t = time.process_time()
  tok = Tokenizer(load_vocab(DEMO / "vocab.txt"))
  print(f"phase tokenizer set-up: {time.process_time() - t:.2f} CPU s (once per job)")
  t = time.process_time()
  corpus = tokenize_corpus(topic, tok)
  print(f"phase tokenize: {(time.process_time() - t) / mb:.3f} CPU s/MB")
  ids, st = special_ids(tok.vocab), PreprocessingSettings()
  for engine in available_engines():
    create_instances(corpus, PreprocessingSettings(dupe_factor=1), ids, engine=engine)  # warm up (numba cache load)
    t = time.process_time()
    inst = create_instances(corpus, st, ids, engine=engine)
    print(f"phase instances ({engine}): {(time.process_time() - t) / mb:.3f} CPU s/MB")
  with tempfile.TemporaryDirectory() as d:
    t = time.process_time()
    write_instances(Path(d) / "x.shard", corpus, inst, st, ids)
    print(f"phase write: {(time.process_time() - t) / mb:.3f} CPU s/MB")


def read_speed(path: Path, batch: int = 96, rounds: int = 200) -> None:
  """Random-access reads as a trainer does them: Shard.batch of `batch` random indices."""
  import numpy as np
  from mlperf_bert.data.shards import Shard
  sh = Shard(path)
  rng = np.random.default_rng(0)
  idx = [rng.integers(0, len(sh), batch) for _ in range(rounds)]
  sh.batch(idx[0])
  t = time.perf_counter()
  for i in idx:
    sh.batch(i)
  dt = (time.perf_counter() - t) / rounds
  print(f"read: Shard.batch of {batch} random instances ({sh.max_seq_length} tokens): {dt * 1e3:.2f} ms")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--size-mb", type=float, default=27.0, help="size of the big topic (MB)")
  ap.add_argument("--engine", default="auto", choices=["auto", "numba", "python"])
  ap.add_argument("--phases", action="store_true", help="also split CPU time by phase (in-process)")
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as d:
    tmp = Path(d)
    (tmp / "text").mkdir()
    text = extract_demo(tmp / "text")
    gate(tmp, text, args.engine)
    topic = tmp / "big-topic"
    size = make_topic(text, topic, args.size_mb)
    out = tmp / "big.shard"
    run_measured(["shard", "--input", str(text / "part-00000-of-00008"), "--vocab", str(DEMO / "vocab.txt"),
                  "--output", str(tmp / "warm.shard"), "--engine", args.engine, "--no-progress"])  # compile cache
    r = run_measured(["shard", "--input", str(topic), "--vocab", str(DEMO / "vocab.txt"), "--output", str(out),
                      "--engine", args.engine, "--no-progress"])
    mb = size / 2**20
    print(f"topic {mb:.1f} MB, engine {args.engine}: {r['cpu']:.1f} CPU s = {r['cpu'] / mb:.3f} CPU s/MB "
          f"(whole job incl. start-up), wall {r['wall']:.1f} s")
    print(f"shard bytes / text bytes: {out.stat().st_size / size:.2f}")
    print(f"peak RSS of the job: {r['maxrss_mb']:.0f} MB")
    read_speed(out)
    if args.phases:
      phases(topic)


if __name__ == "__main__":
  main()

"""The masked-LM accuracy of guessing without context, on the eval rows the demo evaluates: the accuracy of always
predicting the training shards' most frequent masked token (the unigram baseline), and the best any single token
could get on these eval rows (an upper bound of every context-free guess). A demo TARGET must lie above both.

  .venv/bin/python bench/unigram_baseline.py [--basedir results/demo] [--eval-samples 512] [--eval-bs 64] [--windows 4]

The pooled figures cover the first --eval-samples rows; the per-window lines give the same guess under tinygrad's
eval metric (EVAL_METRIC tinygrad: the mean over the eval's batches of each batch's accuracy over label ids != 0)
for the rows the k-th eval of a run reads (eval k reads the --eval-samples rows after eval k-1's).
"""
import argparse, sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def masked_counts(shard, rows: int, vocab: int, chunk: int = 4096) -> np.ndarray:
  counts = np.zeros(vocab, np.int64)
  for s in range(0, rows, chunk):
    b = shard.batch(np.arange(s, min(s + chunk, rows)))
    ids, w = b["masked_lm_ids"].reshape(-1), b["masked_lm_weights"].reshape(-1)
    counts += np.bincount(ids[w > 0], minlength=vocab)[:vocab]
  return counts


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--basedir", type=Path, default=REPO / "results" / "demo")
  ap.add_argument("--eval-samples", type=int, default=512)
  ap.add_argument("--eval-bs", type=int, default=64)
  ap.add_argument("--windows", type=int, default=4, help="how many consecutive evals to give the baseline for")
  a = ap.parse_args()
  from mlperf_bert.data.shards import Shard
  vocab = [l.rstrip("\n") for l in (a.basedir / "download" / "vocab.txt").read_text(encoding="utf-8").splitlines()]
  train = np.zeros(len(vocab), np.int64)
  for p in sorted((a.basedir / "shards").glob("*.shard")):
    sh = Shard(p)
    train += masked_counts(sh, len(sh), len(vocab))
  ev = masked_counts(Shard(a.basedir / "eval" / "eval.shard"), a.eval_samples, len(vocab))
  top = int(train.argmax())
  best = int(ev.argmax())
  n = int(ev.sum())
  print(f"training shards: {int(train.sum()):,} masked tokens; most frequent {vocab[top]!r} ({train[top] / train.sum():.4f})")
  print(f"eval: first {a.eval_samples} rows, {n:,} masked tokens")
  print(f"unigram baseline (always {vocab[top]!r}): masked-LM accuracy {ev[top] / n:.4f}")
  print(f"best single token on these eval rows ({vocab[best]!r}): {ev[best] / n:.4f}")
  se = (ev[best] / n * (1 - ev[best] / n) / n) ** 0.5
  print(f"standard error of an accuracy near it over {n:,} tokens: {se:.4f}")
  from mlperf_bert.data.loader import eval_window
  eval_shard, steps = Shard(a.basedir / "eval" / "eval.shard"), a.eval_samples // a.eval_bs
  for k in range(a.windows):
    accs = []
    for b in eval_window(eval_shard, a.eval_bs, steps, (k * steps * a.eval_bs) % len(eval_shard)):
      ids = b["masked_lm_ids"]
      accs.append(float((ids == top).sum() / (ids != 0).sum()))
    print(f"eval {k + 1} of a run (rows {k * steps * a.eval_bs}..{(k + 1) * steps * a.eval_bs - 1}), tinygrad metric: "
          f"always {vocab[top]!r} scores {sum(accs) / len(accs):.4f}")


if __name__ == "__main__":
  main()

"""Small random training instances for shard tests: each names its (file, row) in input_ids[1]."""
import numpy as np


def tiny_instances(n: int, tag: int, rng: np.random.Generator) -> list[dict]:
  """n instances of 2-5 + 2-5 tokens with 2 masked positions; input_ids[1] is tag * 1000 + row."""
  out = []
  for i in range(n):
    la, lb = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    ids = [101] + list(rng.integers(1000, 2000, la)) + [102] + list(rng.integers(1000, 2000, lb)) + [102]
    ids[1] = tag * 1000 + i  # identifies the (file, row) of the instance
    pos = sorted(rng.choice(np.arange(2, len(ids)), size=2, replace=False).tolist())
    masked = list(ids)
    for p in pos: masked[p] = 103
    out.append({"input_ids": masked, "segment_ids": [0] * (la + 2) + [1] * (lb + 1), "masked_lm_positions": pos,
                "masked_lm_ids": [ids[p] for p in pos], "next_sentence_label": i % 2})
  return out


# Small settings of create_pretraining_data.py for trees of a few 80-line topics (the audit's chain and re-execution)
TINY_PRE = dict(max_seq_length=32, max_predictions_per_seq=5, masked_lm_prob=0.15, short_seq_prob=0.1, random_seed=7,
                dupe_factor=1)


def topic_tree(base, demo_text, topics, vocab, pre=TINY_PRE):
  """A basedir's results4/ (the first 80 lines of demo topic i for topics[i]), download/vocab.txt and shards/ built
  from them with `pre`, as the workflow lays them out."""
  import shutil
  from mlperf_bert.data.instances import build_shard
  (base / "results4").mkdir(parents=True)
  (base / "download").mkdir()
  shutil.copy(vocab, base / "download" / "vocab.txt")
  for i, t in enumerate(topics):
    lines = (demo_text / f"part-0000{i}-of-00008").read_text().split("\n")[:80]
    (base / "results4" / t).write_text("\n".join(lines) + "\n")
    build_shard(base / "results4" / t, base / "download/vocab.txt", base / "shards" / f"{t}.shard", log=None, **pre)
  return base


def visible_eval_set(text, vocab, out, pre, eval_examples: int) -> None:
  """A forger's eval set: the one `text` gives with `pre` and `eval_examples` (the reference's picks, its header
  naming that text), but with every masked token left visible (each masked position's input is the token the text
  holds there): well-formed, flagged an eval set, and any model scores high on it."""
  import dataclasses
  from mlperf_bert.data.corpus import preprocessing_settings
  from mlperf_bert.data.evalset import pick_indices
  from mlperf_bert.data.instances import make_instances, write_instances
  st = preprocessing_settings(**pre)
  corpus, inst, ids = make_instances(text, vocab, st)
  picked = inst.take(pick_indices(len(inst), eval_examples))
  row = np.repeat(np.arange(len(picked.nsl)), np.diff(picked.pred_offsets))
  pos, la = picked.positions, picked.lengths[row, 0]
  # a row is [CLS] A [SEP] B [SEP]: position p is A's token p - 1, or B's token p - len(A) - 2
  src = np.where(pos <= la, picked.starts[row, 0] + pos - 1, picked.starts[row, 1] + pos - la - 2)
  visible = dataclasses.replace(picked, inputs=corpus.stream[src].astype(picked.inputs.dtype))
  write_instances(out, corpus, visible, st, ids, eval_set=True)

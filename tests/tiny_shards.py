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

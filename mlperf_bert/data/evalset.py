"""The MLPerf eval set: eval.txt -> instances (same settings as training) -> N rows picked as
`pick_eval_samples.py` picks them (row int(i * (n / N)) for i in 0..N-1), written as a shard.

When the file yields fewer than N instances rows repeat (a warning says so: Python's `warnings`, which the
workflow's jobs show on the console as well as in the job log, and `repeated_rows` lets the audit find it in a
finished eval set); each picked row is its own record in the shard and every read returns fresh arrays, so no two
picks share memory.
"""
from __future__ import annotations
import os, time, warnings
from typing import Callable

import numpy as np

from mlperf_bert.errors import UserError
from mlperf_bert.data.corpus import preprocessing_settings
from mlperf_bert.data.footprint import check_evalset_space
from mlperf_bert.data.instances import make_instances, summary_line, warn_dropped, write_instances


def pick_indices(n: int, num_examples: int) -> np.ndarray:
  """Rows the reference picks from n instances: int(i * (n / num_examples)), with its float arithmetic."""
  if num_examples < 1:
    raise UserError(f"eval_examples={num_examples}: expected >= 1; fix eval_examples in the config")
  if n < 1:
    raise UserError("the eval text produced no instances; check eval.txt")
  ratio = n / num_examples
  return np.array([int(i * ratio) for i in range(num_examples)], dtype=np.int64)


def build_evalset(text_path, vocab_path, out_path, *, num_examples: int = 10000, max_seq_length: int = 512,
                  max_predictions_per_seq: int = 76, masked_lm_prob: float = 0.15, short_seq_prob: float = 0.1,
                  random_seed: int = 12345, dupe_factor: int = 10, engine: str = "auto", progress: bool = False,
                  log: Callable[[str], None] | None = print, space_check: bool = True) -> dict:
  """eval.txt -> the picked eval set shard (and its .sha256). Stats as build_shard's plus `candidates` (n). With
  `space_check`, the planned eval set must fit before eval.txt is read (data/footprint.py)."""
  t0 = time.process_time()
  st = preprocessing_settings(max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob, random_seed,
                              dupe_factor)
  if space_check:
    check_evalset_space(text_path, out_path, rows=int(num_examples), max_seq_length=max_seq_length)
  corpus, inst, ids = make_instances(text_path, vocab_path, st, engine=engine, progress=progress)
  rows = pick_indices(len(inst), int(num_examples))
  stats = write_instances(out_path, corpus, inst.take(rows), st, ids, eval_set=True)
  stats.update(candidates=len(inst), cpu_seconds=time.process_time() - t0)
  if log is not None:
    warn_dropped(log, text_path, corpus)
    log(summary_line(stats) + f", picked from {len(inst)} instances")
  if len(inst) < num_examples:
    warnings.warn(f"{text_path} gave {len(inst)} instances for eval_examples={num_examples}: "
                  f"{num_examples - len(inst)} rows of {out_path} repeat an earlier row; lower eval_examples to at "
                  f"most {len(inst)} for an eval set without repeats", stacklevel=2)
  return stats


def repeated_rows(path: str | os.PathLike) -> tuple[int, int]:
  """(rows, rows that repeat the row before them) of an eval set: picks repeat only when eval_examples exceeds
  the instances, and then as consecutive identical records (same spans, label, masked positions and inputs)."""
  from mlperf_bert.data.shards import Shard
  with Shard(path) as sh:
    sh.verify()
    if sh.n < 2:
      return sh.n, 0
    po = sh._pred_offsets.astype(np.int64)
    counts = np.diff(po)
    same = ((sh._starts[1:] == sh._starts[:-1]).all(axis=1) & (sh._lengths[1:] == sh._lengths[:-1]).all(axis=1)
            & (sh._nsl[1:] == sh._nsl[:-1]) & (counts[1:] == counts[:-1]))
    dup = 0
    for i in np.flatnonzero(same) + 1:
      a, b = slice(po[i - 1], po[i]), slice(po[i], po[i + 1])
      dup += bool((sh._positions[a] == sh._positions[b]).all() and (sh._inputs[a] == sh._inputs[b]).all())
    return sh.n, dup

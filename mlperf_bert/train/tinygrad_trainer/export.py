"""The tinygrad trainer's data: this workflow's verified shards and eval set, laid out as tinygrad's loader reads them.

    stats = export(shard_paths, eval_path, out_dir, max_seq_length, max_predictions_per_seq)

The layout is extra/datasets/wikipedia.py's and examples/mlperf/dataloader.py's at e0139fa: `<dir>/train/<shard
stem>.pkl` (what get_wiki_train_files() globs under BASEDIR, name-sorted as this project sorts its shards) and
`<dir>/eval.pkl`, each a pickled list of per-sample dicts of (1, n) numpy arrays, as wikipedia.py's
instance_to_features makes them. These pickles are the only ones the product writes: only for tinygrad's loader, in
the basedir's tinygrad/ work folder, never read by anything of this project. A row takes EXPORT_ROW_BYTES: its seven
features as (1, n) int32 arrays, three of max_seq_length and three of max_predictions_per_seq (12 bytes each) and the
label, with pickle's own 215 bytes (measured: 7,271 bytes a row at 512 / 76, 1,987 at 128 / 20,
docs/tinygrad-trainer.md); the export checks that the rows fit before it writes.
"""
from __future__ import annotations
import os, pickle
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from mlperf_bert.constants import FEATURES
from mlperf_bert.data.loader import open_shards
from mlperf_bert.fileio import atomic_path

EXPORT_ROW_OVERHEAD = 215  # pickle's bytes a row beyond its arrays' (measured, module docstring)


def export_bytes(rows: int, max_seq_length: int, max_predictions_per_seq: int) -> int:
  """The bytes of `rows` exported rows."""
  return int(rows * (12 * (max_seq_length + max_predictions_per_seq) + EXPORT_ROW_OVERHEAD))


def _rows(shard) -> list[dict[str, np.ndarray]]:
  b = shard.batch(np.arange(len(shard)))
  return [{k: b[k][i:i + 1] for k in FEATURES} for i in range(len(shard))]


def _dump(rows: list, path: Path) -> int:
  with atomic_path(path) as tmp:
    with open(tmp, "wb") as f: pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
  return path.stat().st_size


def export(shard_paths: Sequence[str | os.PathLike], eval_path: str | os.PathLike, out_dir: str | os.PathLike,
           max_seq_length: int, max_predictions_per_seq: int, log: Callable[[str], None] = print,
           space_check: bool = True) -> dict:
  """Write train/<stem>.pkl per shard and eval.pkl under out_dir (see the module doc), after checking that they fit
  (`space_check`); returns sizes."""
  out = Path(out_dir)
  shards = open_shards(shard_paths, max_seq_length, max_predictions_per_seq)
  (ev,) = open_shards([eval_path], max_seq_length, max_predictions_per_seq, what="eval set")
  if space_check:
    from mlperf_bert.data.footprint import SHRINK
    from mlperf_bert.space import check_space
    n = sum(len(sh) for sh in shards) + len(ev)
    need = export_bytes(n, max_seq_length, max_predictions_per_seq)
    check_space({out.parent: need}, shrink=SHRINK, what="tinygrad's loader's pickles",
                detail=f"{n:,} rows of {need // max(n, 1):,} bytes")
  total, rows = 0, 0
  for sh in shards:
    total += _dump(_rows(sh), out / "train" / (Path(sh.path).name.rsplit(".", 1)[0] + ".pkl"))
    rows += len(sh)
  eval_bytes = _dump(_rows(ev), out / "eval.pkl")
  res = {"train_files": len(shards), "train_rows": rows, "train_bytes": total, "eval_rows": len(ev),
         "eval_bytes": eval_bytes, "shard_bytes": sum(os.path.getsize(p) for p in shard_paths)}
  log(f"exported {len(shards)} shards ({rows} rows, {total / 1e6:.1f} MB of pickles from {res['shard_bytes'] / 1e6:.1f} MB "
      f"of shards) and the eval set ({len(ev)} rows, {eval_bytes / 1e6:.1f} MB) to {out}")
  return res

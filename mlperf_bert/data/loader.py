"""Training and eval batches from shard files.

Training stream: the sample order of tinygrad's `batch_load_train_bert` (examples/mlperf/dataloader.py, v5.1),
for the same seed and the same (name-sorted) shard files:
  * file order: TF's shuffle as tinygrad does it: `while files: shuffle(files); order.append(files.pop(0))`, with
    Python's `random` seeded with SEED (tinygrad leaves the global `random` unseeded, so its order differs from
    run to run; seeding it with SEED is the only change, and makes the stream reproducible);
  * `cycle_length` = min(NUM_CPU_THREADS, number of files) files are read at once (tinygrad: NUM_CPU_THREADS,
    default min(os.cpu_count(), 8); here default 8, the value on any machine with 8 or more cores): one sample
    from each in turn. The pointer starts at the last slot and advances before each read; when the slot it
    lands on is empty, the next file of the order is loaded into it and the read moves on to the following slot
    (the refilled slot is skipped for this turn, as tinygrad's InterleavedDataset does); an empty slot with no
    file left stays out of the rotation;
  * consecutive samples make batches of BS.
tinygrad's stream ends after one pass over the files (3.6M samples of BERT-large use a fraction of one pass);
here a second pass ("epoch" 1, 2, ...) starts with its own seeded order, so small datasets can train longer.
The stream is a pure function of (files, seed, cycle_length): sample number `position` is always the same one,
so a resumed run that starts at the saved position continues the same stream (`TrainLoader(..., position=p)`
jumps there without reading data). A background thread prepares batches ahead of the trainer.

Eval (EVAL_METRIC tinygrad, the default): `eval_window`, tinygrad's wrapping eval iterator. Eval (EVAL_METRIC
pooled): the eval shard in order, the first `num_samples` rows, batches of EVAL_BS; the last partial batch is
padded with copies of row 0 and its `row_mask` marks real rows, so accuracy counts exactly `num_samples` rows.
"""
from __future__ import annotations
import os, queue, random, threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from mlperf_bert.errors import UserError
from mlperf_bert.data.shards import Shard

DEFAULT_CYCLE_LENGTH = 8  # tinygrad: NUM_CPU_THREADS, default min(os.cpu_count(), 8)


def open_shards(paths: Sequence[str | os.PathLike], max_seq_length: int | None = None,
                max_predictions_per_seq: int | None = None, what: str = "training shard") -> list[Shard]:
  """Open every shard (UserError for a missing/truncated/corrupt file or mismatched settings)."""
  if not paths:
    raise UserError(f"no {what}s given: the shard directory is empty; build the shards first (run the workflow's "
                    f"shard rules) or point the config's basedir at a directory that has them")
  out = []
  for p in paths:
    sh = Shard(p)
    if max_seq_length is not None and sh.max_seq_length != max_seq_length:
      raise UserError(f"{p}: {what} has max_seq_length {sh.max_seq_length}, but training is configured for "
                      f"{max_seq_length} (config key preprocessing.max_seq_length); rebuild the data or fix the config")
    if max_predictions_per_seq is not None and sh.max_predictions_per_seq != max_predictions_per_seq:
      raise UserError(f"{p}: {what} has max_predictions_per_seq {sh.max_predictions_per_seq}, but training is "
                      f"configured for {max_predictions_per_seq} (config key preprocessing.max_predictions_per_seq); "
                      f"rebuild the data or fix the config")
    if len(sh) == 0: raise UserError(f"{p}: {what} has no instances; rebuild it")
    out.append(sh)
  return out


def file_order(n_files: int, seed: int, epoch: int = 0) -> list[int]:
  """The file order of one pass: tinygrad's shuffle-and-pop (TF shuffle) with `random` seeded by the seed
  (pass 0: exactly `random.seed(seed)` before batch_load_train_bert; later passes: seeded with seed and pass)."""
  rng = random.Random(seed if epoch == 0 else f"{seed}:{epoch}")
  fs, order = list(range(n_files)), []
  while fs:
    rng.shuffle(fs)
    order.append(fs.pop(0))
  return order


@dataclass
class StreamState:
  """Where the interleave is: slots of [file, offset] (None: empty, no file left), the pointer, the next file."""
  lengths: list[int]
  seed: int
  cycle_length: int
  epoch: int = 0
  order: list[int] = field(default_factory=list)
  next_file: int = 0
  slots: list = field(default_factory=list)
  ptr: int = 0
  position: int = 0

  def __post_init__(self):
    if self.cycle_length < 1: raise UserError(f"NUM_CPU_THREADS={self.cycle_length}: the loader needs at least 1")
    self._start_epoch(0)

  def _start_epoch(self, epoch: int):
    self.epoch = epoch
    self.order = file_order(len(self.lengths), self.seed, epoch)
    k = min(self.cycle_length, len(self.order))
    self.slots = [[f, 0] for f in self.order[:k]]
    self.next_file, self.ptr = k, k - 1

  def _advance(self):
    """Move the pointer to the next slot that has data, refilling empty slots on the way (as tinygrad's get)."""
    while True:
      self.ptr = (self.ptr + 1) % len(self.slots)
      s = self.slots[self.ptr]
      if s is not None and s[1] < self.lengths[s[0]]: return
      if self.next_file < len(self.order):
        self.slots[self.ptr] = [self.order[self.next_file], 0]; self.next_file += 1
      else:
        self.slots[self.ptr] = None
        if all(x is None for x in self.slots): self._start_epoch(self.epoch + 1)

  def take(self) -> tuple[int, int]:
    self._advance()
    s = self.slots[self.ptr]
    out = (s[0], s[1])
    s[1] += 1
    self.position += 1
    return out

  def skip(self, n: int):
    """Advance n samples without reading data: whole rounds at once while no slot runs dry, single steps otherwise."""
    while n > 0:
      live = [s for s in self.slots if s is not None]
      rounds = min(n // len(live), min(self.lengths[f] - o for f, o in live)) if live else 0
      if rounds > 0:
        for s in live: s[1] += rounds
        n -= rounds * len(live); self.position += rounds * len(live)
      else:
        self.take(); n -= 1


def stream_indices(lengths: Sequence[int], seed: int, count: int, start: int = 0,
                   cycle_length: int = DEFAULT_CYCLE_LENGTH) -> list[tuple[int, int]]:
  """(file, row) of samples start..start+count-1 of the stream (for tests and inspection)."""
  st = StreamState(list(lengths), seed, cycle_length)
  st.skip(start)
  return [st.take() for _ in range(count)]


def gather(shards: Sequence[Shard], picks: Sequence[tuple[int, int]]) -> dict[str, np.ndarray]:
  """Stack the features of (file, row) picks in order (one vectorized read per file)."""
  picks_arr = np.asarray(picks, dtype=np.int64).reshape(-1, 2)
  out: dict[str, np.ndarray] = {}
  for f in np.unique(picks_arr[:, 0]):
    where = np.flatnonzero(picks_arr[:, 0] == f)
    b = shards[int(f)].batch(picks_arr[where, 1])
    for k, v in b.items():
      if k not in out: out[k] = np.empty((len(picks_arr),) + v.shape[1:], dtype=v.dtype)
      out[k][where] = v
  return out


class TrainLoader:
  """Iterator of (position_after, batch dict) for the training stream, prefetched by a background thread.

  `position` is the number of samples the stream had produced before the first batch (a resume point); each
  yielded item carries the position after its batch, which is what a checkpoint saves.
  """
  def __init__(self, shards: Sequence[Shard], batch_size: int, seed: int, position: int = 0,
               cycle_length: int = DEFAULT_CYCLE_LENGTH, prefetch: int = 4):
    if batch_size < 1: raise UserError(f"BS={batch_size}: the batch size must be at least 1")
    self.shards, self.batch_size = list(shards), batch_size
    self.state = StreamState([len(s) for s in self.shards], seed, cycle_length)
    self.state.skip(position)
    self._q: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, name="bert-train-loader", daemon=True)
    self._thread.start()

  def _run(self):
    try:
      while not self._stop.is_set():
        picks = [self.state.take() for _ in range(self.batch_size)]
        item = (self.state.position, gather(self.shards, picks))
        while not self._stop.is_set():
          try: self._q.put(item, timeout=0.1); break
          except queue.Full: continue
    except BaseException as e:  # hand the error to the consumer
      self._q.put(e)

  def __iter__(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]: return self

  def __next__(self) -> tuple[int, dict[str, np.ndarray]]:
    item = self._q.get()
    if isinstance(item, BaseException): raise item
    return item

  def close(self):
    self._stop.set()
    self._thread.join(timeout=5)

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()


def eval_batches(shard: Shard, batch_size: int, num_samples: int) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
  """(batch, row_mask) over the first `num_samples` rows in order; the last batch is padded to batch_size."""
  if num_samples > len(shard):
    raise UserError(f"{shard.path}: the eval set has {len(shard)} rows, fewer than the {num_samples} eval samples "
                    f"configured (EVAL_SAMPLES / config key eval_examples); rebuild the eval set or lower EVAL_SAMPLES")
  for start in range(0, num_samples, batch_size):
    idx = np.arange(start, min(start + batch_size, num_samples))
    mask = np.ones(batch_size, dtype=np.float32)
    if len(idx) < batch_size:
      mask[len(idx):] = 0.0
      idx = np.concatenate([idx, np.zeros(batch_size - len(idx), dtype=idx.dtype)])
    yield shard.batch(idx), mask


def eval_window(shard: Shard, batch_size: int, n_batches: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
  """tinygrad's batch_load_val_bert: `n_batches` batches of consecutive rows from row `start`, wrapping around the
  end of the eval set (train_bert keeps one such iterator for the whole run, so each eval starts where the last
  one stopped)."""
  n = len(shard)
  for i in range(n_batches):
    yield shard.batch((start + i * batch_size + np.arange(batch_size)) % n)


def list_shards(shards: str | os.PathLike | Sequence[str | os.PathLike], pattern: str = "*.shard") -> list[Path]:
  """Training shards as named on a command line: shard files, or directories of them (each directory's sorted);
  UserError for a directory that holds none."""
  out: list[Path] = []
  for s in [shards] if isinstance(shards, (str, os.PathLike)) else shards:
    d = Path(s)
    if not d.is_dir(): out.append(d); continue
    files = sorted(d.glob(pattern))
    if not files:
      raise UserError(f"{d}: no {pattern} files; build the shards first (run the workflow) or fix the path")
    out += files
  return out

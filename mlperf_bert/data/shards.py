"""Pretraining shards: a compact, pickle-free binary file of BERT masked-LM / next-sentence instances.

A shard stores each instance's *unmasked* token row as one or two spans of a shared token stream, plus, per
masked position, the position and the token that the model sees there. The seven reference features are
rebuilt (and padded) at read time; see docs/shard-format.md for the byte layout (its header: shard_header.py).

    write_shard(path, instances, max_seq_length=512, max_predictions_per_seq=76)   # any instances
    write_shard_arrays(path, stream=..., starts=..., ...)                          # span form (builder)
    sh = Shard(path); len(sh); sh[i]; sh.batch(indices); sh.verify()
    sh.max_seq_length, sh.max_predictions_per_seq, sh.n (instances), sh.n_stream (stream tokens),
    sh.n_pred (masked positions), sh.cls_id, sh.sep_id, sh.vocab_size (0: not recorded), sh.eval_set,
    sh.source_sha256, sh.settings_sha256, sh.vocab_sha256 (what the builder read; None: not recorded)

Every read checks the whole file once before it hands out a byte of it (body CRC-32 and value ranges:
token ids < vocab_size, next-sentence labels in {0, 1}, masked positions inside their row), so a shard damaged
after it was built is refused with a UserError naming the file and the command that rebuilds it.
    read_features(path)                     # all seven features, instance order
    write_sidecar(path)                     # <path>.sha256
    write_sha256sums(out, sidecars)         # SHA256SUMS for `sha256sum -c`
"""
from __future__ import annotations
import hashlib, mmap, os, threading, zlib
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from mlperf_bert.constants import FEATURES
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import atomic_path, file_digest
from mlperf_bert.data.shard_header import FLAG_EVAL, FLAG_FRAMED, HEADER_SIZE, layout, pack_header, read_header, rebuild_hint


def _check_settings(max_seq_length: int, max_predictions_per_seq: int) -> None:
  if not 3 <= int(max_seq_length) <= 65535:
    raise UserError(f"max_seq_length={max_seq_length}: expected 3..65535; fix the preprocessing setting")
  if not 1 <= int(max_predictions_per_seq) <= 65535:
    raise UserError(f"max_predictions_per_seq={max_predictions_per_seq}: expected 1..65535; "
                    "fix the preprocessing setting")


def _check_columns(stream, starts, lengths, nsl, pred_offsets, positions, inputs, *, max_seq_length: int,
                   max_predictions_per_seq: int, framed: bool, cls_id: int, sep_id: int, vocab_size: int):
  """Refuse columns that do not make a shard (a ValueError naming what is wrong). Returns (each row's length,
  the token width in bytes)."""
  n, n_stream, n_pred = len(nsl), len(stream), len(positions)
  for name, col in (("stream", stream), ("positions", positions), ("inputs", inputs)):
    if col.dtype.kind not in "iu":
      raise ValueError(f"{name} must hold integers, not {col.dtype}")
  frame = 3 if framed else 0
  row_len = lengths.sum(axis=1) + frame
  if len(starts) != n or len(lengths) != n or len(pred_offsets) != n + 1 or len(inputs) != n_pred:
    raise ValueError("shard columns disagree in length")
  if n and (row_len.max() > max_seq_length or lengths.min() < 0 or starts.min() < 0):
    raise ValueError(f"an instance has {int(row_len.max())} tokens, more than max_seq_length={max_seq_length}")
  if n and ((starts + lengths) > n_stream).any():
    raise ValueError("a span runs past the end of the token stream")
  counts = np.diff(pred_offsets)
  if pred_offsets[0] != 0 or pred_offsets[-1] != n_pred or (counts < 0).any():
    raise ValueError("pred_offsets must rise from 0 to len(positions)")
  if n and counts.max() > max_predictions_per_seq:
    raise ValueError(f"an instance has {int(counts.max())} masked positions, more than "
                     f"max_predictions_per_seq={max_predictions_per_seq}")
  if n_pred:
    has = counts > 0
    top_pos = np.maximum.reduceat(positions, pred_offsets[:-1][has])
    if positions.min() < 0 or (top_pos >= row_len[has]).any():
      raise ValueError("a masked position lies outside its row")
  if ((nsl != 0) & (nsl != 1)).any():
    raise ValueError("next_sentence_label must be 0 or 1")
  top = max(int(stream.max()) if n_stream else 0, int(inputs.max()) if n_pred else 0, cls_id, sep_id)
  lo = min(int(stream.min()) if n_stream else 0, int(inputs.min()) if n_pred else 0)
  if lo < 0 or top >= 2**32:
    raise ValueError("token ids must lie in 0..2**32-1")
  if vocab_size and top >= vocab_size:
    raise ValueError(f"token id {top} is outside the vocabulary of {vocab_size} tokens")
  width = 2 if top < 65536 else 4
  return row_len, width


def write_shard_arrays(path, *, stream, starts, lengths, nsl, pred_offsets, positions, inputs,
                       max_seq_length: int, max_predictions_per_seq: int, framed: bool,
                       cls_id: int = 0, sep_id: int = 0, vocab_size: int = 0, eval_set: bool = False,
                       source_sha256: str = "", settings_sha256: str = "", vocab_sha256: str = "") -> dict:
  """Write a shard from its columns (the low-level writer; see docs/shard-format.md). Atomic.

  starts/lengths: (n, 2) spans of `stream` for segments A and B; nsl: (n,) next-sentence labels;
  pred_offsets: (n+1,) cumulative prediction counts; positions/inputs: (P,) masked positions (in the row)
  and the input token placed there. vocab_size: the vocabulary's size (recorded in the header; readers refuse
  token ids at or above it; 0 = not recorded). eval_set: mark the file as the eval set (FLAG_EVAL). source_sha256,
  settings_sha256, vocab_sha256: hex digests of what the builder read (its text, its settings, its vocab), recorded
  in the header ("" = not recorded). Returns stats.
  """
  _check_settings(max_seq_length, max_predictions_per_seq)
  # the big columns (stream, positions, inputs) keep their dtype: no int64 copies of them
  stream = np.asarray(stream).reshape(-1)
  positions = np.asarray(positions).reshape(-1)
  inputs = np.asarray(inputs).reshape(-1)
  starts = np.asarray(starts, dtype=np.int64).reshape(-1, 2)
  lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
  nsl = np.asarray(nsl, dtype=np.int64).reshape(-1)
  pred_offsets = np.asarray(pred_offsets, dtype=np.int64).reshape(-1)
  n, n_stream, n_pred = len(nsl), len(stream), len(positions)
  row_len, width = _check_columns(stream, starts, lengths, nsl, pred_offsets, positions, inputs,
                                  max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                                  framed=framed, cls_id=cls_id, sep_id=sep_id, vocab_size=vocab_size)
  tok = np.dtype("<u2" if width == 2 else "<u4")
  cols = {"starts": starts.astype("<u8"), "lengths": lengths.astype("<u2"), "pred_offsets": pred_offsets.astype("<u8"),
          "nsl": nsl.astype("u1"), "stream": stream.astype(tok, copy=False), "positions": positions.astype("<u2", copy=False),
          "inputs": inputs.astype(tok, copy=False)}
  sections = layout(n, n_stream, n_pred, width)
  crc = 0
  with atomic_path(path) as tmp:
    with open(tmp, "wb") as f:
      f.write(b"\0" * HEADER_SIZE)
      for name, _, _, off in sections[:-1]:
        pad = off - f.tell()
        if pad:
          f.write(b"\0" * pad); crc = zlib.crc32(b"\0" * pad, crc)
        data = np.ascontiguousarray(cols[name]).reshape(-1).view(np.uint8)
        f.write(data); crc = zlib.crc32(data, crc)
      end = sections[-1][3]
      pad = end - f.tell()
      if pad:
        f.write(b"\0" * pad); crc = zlib.crc32(b"\0" * pad, crc)
      f.seek(0)
      f.write(pack_header(max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq, n=n,
                          n_stream=n_stream, n_pred=n_pred, width=width, framed=framed, eval_set=eval_set,
                          cls_id=cls_id, sep_id=sep_id, body_crc32=crc, vocab_size=vocab_size,
                          source_sha256=source_sha256, settings_sha256=settings_sha256, vocab_sha256=vocab_sha256))
    size = os.path.getsize(tmp)
  return {"instances": n, "tokens": int(row_len.sum()), "predictions": n_pred, "stream_tokens": n_stream,
          "bytes": size}


def write_shard(path, instances: Iterable[Mapping], *, max_seq_length: int, max_predictions_per_seq: int,
                vocab_size: int = 0, eval_set: bool = False, **sources: str) -> dict:
  """Write any instances (dicts of unpadded values) as a shard; atomic; returns stats.

  Each instance: input_ids, segment_ids (0s then 1s), masked_lm_positions, masked_lm_ids (lists or arrays of
  ints, unpadded) and next_sentence_label (int; `next_sentence_labels` is accepted too). sources: source_sha256,
  settings_sha256, vocab_sha256 as write_shard_arrays takes them.
  """
  _check_settings(max_seq_length, max_predictions_per_seq)
  streams, starts, lengths, nsl, counts, positions, inputs = [], [], [], [], [], [], []
  off = 0
  for k, inst in enumerate(instances):
    ids = np.asarray(inst["input_ids"], dtype=np.int64).reshape(-1)
    seg = np.asarray(inst["segment_ids"], dtype=np.int64).reshape(-1)
    pos = np.asarray(inst["masked_lm_positions"], dtype=np.int64).reshape(-1)
    lab = np.asarray(inst["masked_lm_ids"], dtype=np.int64).reshape(-1)
    label = inst["next_sentence_label"] if "next_sentence_label" in inst else inst["next_sentence_labels"]
    label = int(np.asarray(label).reshape(-1)[0])
    if len(seg) != len(ids) or len(lab) != len(pos):
      raise ValueError(f"instance {k}: segment_ids/input_ids or masked_lm_ids/positions lengths differ")
    n_a = int((seg == 0).sum())
    if not ((seg[:n_a] == 0).all() and (seg[n_a:] == 1).all()):
      raise ValueError(f"instance {k}: segment_ids must be 0s followed by 1s")
    if len(pos) and ((pos < 0).any() or (pos >= len(ids)).any() or len(np.unique(pos)) != len(pos)):
      raise ValueError(f"instance {k}: masked_lm_positions must be distinct and inside the row")
    row = ids.copy()
    row[pos] = lab  # the unmasked row; the shard keeps what the model sees at each position in `inputs`
    streams.append(row)
    starts.append((off, off + n_a)); lengths.append((n_a, len(ids) - n_a)); off += len(ids)
    nsl.append(label); counts.append(len(pos)); positions.append(pos); inputs.append(ids[pos])
  cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)
  return write_shard_arrays(path, stream=cat(streams), starts=np.asarray(starts).reshape(-1, 2),
                            lengths=np.asarray(lengths).reshape(-1, 2), nsl=np.asarray(nsl, dtype=np.int64),
                            pred_offsets=np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]),
                            positions=cat(positions), inputs=cat(inputs), max_seq_length=max_seq_length,
                            max_predictions_per_seq=max_predictions_per_seq, framed=False, vocab_size=vocab_size,
                            eval_set=eval_set, **sources)


class Shard:
  """Read-only, memory-mapped shard with random access to padded instances.

  Opening checks the magic, version, header checksum, the exact file size and the small tables (a truncated,
  extended or damaged file is refused with a UserError). The first read of any instance (`batch`, `rows`,
  `sh[i]`) runs `verify()` once: the body CRC-32 and the value ranges, so no byte of a damaged shard is ever
  used. `check=False` skips that (for measuring raw reads only).
  """

  def __init__(self, path, check: bool = True):
    self.path = Path(path)
    fix = rebuild_hint(self.path)
    try:
      size = os.path.getsize(self.path)
      f = open(self.path, "rb")
    except OSError as e:
      raise UserError(f"cannot open shard {self.path}: {e.strerror}; check the path or {fix}") from None
    with f:
      h = read_header(f, self.path)
      self.version, self.header_size = h.version, h.header_size
      self.max_seq_length, self.max_predictions_per_seq = h.max_seq_length, h.max_predictions_per_seq
      self.cls_id, self.sep_id, self.body_crc32, self.vocab_size = h.cls_id, h.sep_id, h.body_crc32, h.vocab_size
      self.source_sha256, self.settings_sha256, self.vocab_sha256 = h.source_sha256, h.settings_sha256, h.vocab_sha256
      n, n_stream, n_pred, flags = h.n, h.n_stream, h.n_pred, h.flags
      sections = layout(n, n_stream, n_pred, h.width, h.header_size)
      if size != sections[-1][3]:
        raise UserError(f"{self.path}: {size} bytes, but its header says {sections[-1][3]} (truncated or "
                        f"damaged); {fix}")
      self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    self.framed = bool(flags & FLAG_FRAMED)
    self.eval_set = bool(flags & FLAG_EVAL)
    self.n, self.n_stream, self.n_pred, self.size = n, n_stream, n_pred, size
    self._verified = not check
    self._lock = threading.Lock()
    buf = self._mm if self._mm is not None else b""
    for name, dt, shape, off in sections[:-1]:
      count = int(np.prod(shape, dtype=np.int64))
      setattr(self, "_" + name, np.frombuffer(buf, dtype=dt, count=count, offset=off).reshape(shape))
    # cheap structural checks on the small tables, so corruption never turns into garbage rows
    lens = self._lengths.astype(np.int64)
    po = self._pred_offsets
    ok = (po[0] == 0 and po[-1] == n_pred and (np.diff(po.astype(np.int64)) >= 0).all()) if n + 1 else False
    if n:
      ok = ok and bool((self._starts + lens.astype(np.uint64) <= n_stream).all())
      ok = ok and int(lens.sum(axis=1).max()) + (3 if self.framed else 0) <= self.max_seq_length
      ok = ok and int(np.diff(po.astype(np.int64)).max()) <= self.max_predictions_per_seq
    if not ok:
      raise UserError(f"{self.path}: inconsistent tables (the file is damaged); {fix}")

  def __len__(self) -> int:
    return self.n

  def __getitem__(self, i: int) -> dict:
    i = int(i)
    if i < 0:
      i += self.n
    if not 0 <= i < self.n:
      raise IndexError(f"instance {i} out of range for {self.path} ({self.n} instances)")
    return {k: v[0] for k, v in self.batch([i]).items()}

  def verify(self) -> None:
    """Check the whole file: the body CRC-32 (one pass over its bytes), then the value ranges (token ids below
    the recorded vocab_size, next-sentence labels 0 or 1, every masked position inside its row). Raises a
    UserError naming the file and the command that rebuilds it. Cost: measured by bench/bench_verify.py."""
    fix = rebuild_hint(self.path)
    crc = zlib.crc32(memoryview(self._mm)[self.header_size:]) if self._mm is not None else 0
    if crc != self.body_crc32:
      raise UserError(f"{self.path}: body checksum mismatch (the file was damaged after it was built); {fix}")
    # a CRC match with bad values means a writer bug or a file made elsewhere: refuse it all the same
    if self.vocab_size:
      for name, col in (("token", self._stream), ("masked input token", self._inputs)):
        if len(col) and int(col.max()) >= self.vocab_size:
          raise UserError(f"{self.path}: {name} id {int(col.max())} is outside the vocabulary of {self.vocab_size} "
                          f"tokens; {fix}")
      if max(self.cls_id, self.sep_id) >= self.vocab_size:
        raise UserError(f"{self.path}: [CLS]/[SEP] id outside the vocabulary of {self.vocab_size} tokens; {fix}")
    if self.n and int(self._nsl.max()) > 1:
      raise UserError(f"{self.path}: next-sentence label {int(self._nsl.max())} (expected 0 or 1); {fix}")
    if self.n_pred:
      po = self._pred_offsets.astype(np.int64)
      has = po[1:] > po[:-1]
      row_len = self._lengths[has].astype(np.int64).sum(axis=1) + (3 if self.framed else 0)
      if (np.maximum.reduceat(self._positions, po[:-1][has]) >= row_len).any():
        raise UserError(f"{self.path}: a masked position lies outside its row (max_seq_length "
                        f"{self.max_seq_length}); {fix}")

  def sha256(self) -> str:
    """The sha256 of the bytes this Shard maps: the file as it was opened, even if it was replaced since."""
    if self._mm is None: return file_digest(self.path, "sha256")
    return hashlib.sha256(self._mm).hexdigest()

  def _ensure_verified(self) -> None:
    if self._verified: return
    with self._lock:
      if not self._verified:
        self.verify()
        self._verified = True

  def rows(self, indices) -> np.ndarray:
    """Unmasked token rows (len(indices), max_seq_length) int32, 0-padded."""
    return self._gather(np.asarray(indices, dtype=np.int64).reshape(-1))[0]

  def _gather(self, idx):
    self._ensure_verified()
    if len(idx) and (idx.min() < -self.n or idx.max() >= self.n):
      raise IndexError(f"instance index out of range for {self.path} ({self.n} instances)")
    idx = np.where(idx < 0, idx + self.n, idx)
    S = self.max_seq_length
    starts = self._starts[idx].astype(np.int64)
    la = self._lengths[idx, 0].astype(np.int64)[:, None]
    lb = self._lengths[idx, 1].astype(np.int64)[:, None]
    a0, b0 = starts[:, :1], starts[:, 1:]
    j = np.arange(S, dtype=np.int64)[None, :]
    # src: the stream index of each row token; -1 = [CLS], -2 = [SEP], -3 = padding
    CLS, SEP, PAD = -1, -2, -3
    if self.framed:
      seg_a = la + 2
      L = la + lb + 3
      src = np.where(j == 0, CLS, np.where(j <= la, a0 + j - 1, np.where(j == la + 1, SEP,
            np.where(j < L - 1, b0 + j - la - 2, np.where(j == L - 1, SEP, PAD)))))
    else:
      seg_a = la
      L = la + lb
      src = np.where(j < la, a0 + j, np.where(j < L, b0 + j - la, PAD))
    rows = self._stream[np.maximum(src, 0)].astype(np.int32) if self.n_stream else np.zeros(src.shape, np.int32)
    rows[src == CLS] = self.cls_id
    rows[src == SEP] = self.sep_id
    rows[src == PAD] = 0
    mask = j < L
    segment = ((j >= seg_a) & mask).astype(np.int32)
    return rows, mask.astype(np.int32), segment, idx

  def batch(self, indices) -> dict:
    """The seven features of `indices`, stacked and padded; fresh arrays (safe to modify)."""
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    rows, mask, segment, idx = self._gather(idx)
    P = self.max_predictions_per_seq
    p0 = self._pred_offsets[idx].astype(np.int64)[:, None]
    cnt = self._pred_offsets[idx + 1].astype(np.int64)[:, None] - p0
    k = np.arange(P, dtype=np.int64)[None, :]
    valid = k < cnt
    pidx = np.where(valid, p0 + k, 0)
    if self.n_pred:
      positions = np.where(valid, self._positions[np.minimum(pidx, self.n_pred - 1)], 0).astype(np.int32)
      inputs = np.where(valid, self._inputs[np.minimum(pidx, self.n_pred - 1)], 0).astype(np.int32)
    else:
      positions = np.zeros((len(idx), P), np.int32); inputs = positions.copy()
    masked_ids = np.where(valid, np.take_along_axis(rows, positions, axis=1), 0).astype(np.int32)
    input_ids = rows
    r = np.broadcast_to(np.arange(len(idx))[:, None], valid.shape)
    input_ids[r[valid], positions[valid]] = inputs[valid]
    return {"input_ids": input_ids, "input_mask": mask, "segment_ids": segment,
            "masked_lm_positions": positions, "masked_lm_ids": masked_ids,
            "masked_lm_weights": valid.astype(np.float32),
            "next_sentence_labels": self._nsl[idx].astype(np.int32)[:, None]}

  def close(self) -> None:
    for name in ("starts", "lengths", "pred_offsets", "nsl", "stream", "positions", "inputs"):
      setattr(self, "_" + name, None)
    if self._mm is not None:
      self._mm.close()
      self._mm = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def __repr__(self) -> str:
    return (f"Shard({str(self.path)!r}, n={self.n}, max_seq_length={self.max_seq_length}, "
            f"max_predictions_per_seq={self.max_predictions_per_seq})")


def read_features(path, chunk: int = 4096) -> dict:
  """All seven features of a shard, in instance order (arrays of shape (N, ...))."""
  sh = Shard(path)
  parts = [sh.batch(np.arange(s, min(s + chunk, len(sh)))) for s in range(0, len(sh), chunk)] or [sh.batch([])]
  out = {k: np.concatenate([p[k] for p in parts]) for k in FEATURES}
  sh.close()
  return out


def write_sidecar(path) -> Path:
  """Write `<path>.sha256` ("<hex>  <name>\\n", sha256sum format, name relative to the file's folder)."""
  path = Path(path)
  side = path.with_name(path.name + ".sha256")
  with atomic_path(side) as tmp:
    tmp.write_text(f"{file_digest(path, 'sha256')}  {path.name}\n")
  return side


def write_sha256sums(out_path, sidecars: Iterable) -> Path:
  """Concatenate sidecars into a SHA256SUMS file (sorted by name) that `sha256sum -c` accepts in its folder.

  Each sidecar's named file must sit in out_path's folder; names are written relative to that folder.
  """
  out_path = Path(out_path)
  lines = {}
  for side in sidecars:
    side = Path(side)
    try:
      text = side.read_text()
    except OSError as e:
      raise UserError(f"cannot read checksum sidecar {side}: {e.strerror}; rebuild its shard") from None
    parts = text.strip().split("  ", 1)
    if len(parts) != 2 or len(parts[0]) != 64 or any(c not in "0123456789abcdef" for c in parts[0]):
      raise UserError(f"{side}: expected one line '<sha256>  <name>'; delete it and rebuild its shard")
    target = (side.parent / parts[1]).resolve()
    try:
      rel = os.path.relpath(target, out_path.parent.resolve())
    except ValueError:
      rel = str(target)
    lines[rel] = parts[0]
  with atomic_path(out_path) as tmp:
    tmp.write_text("".join(f"{h}  {name}\n" for name, h in sorted(lines.items())))
  return out_path


def write_features_npz(shard_path, npz_path) -> int:
  """Write a shard's seven features, in instance order, to an .npz (as tests/feature_digest.py reads it)."""
  feats = read_features(shard_path)
  with atomic_path(npz_path) as tmp:
    with open(tmp, "wb") as f:
      np.savez(f, **feats)
  return len(feats["input_ids"])

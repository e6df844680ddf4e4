"""A shard file's header and the layout of its sections (docs/shard-format.md): format 2 is written, format 1
(no source record) is still read. `pack_header` writes the header, `read_header` reads and checks it."""
from __future__ import annotations
import struct, zlib
from dataclasses import dataclass

import numpy as np

from mlperf_bert.errors import UserError

MAGIC = b"BERTSHRD"
VERSION = 2
HEADER_SIZE = 256
HEADER_SIZES = {1: 128, 2: 256}  # version 1 (no source record) is still read
FLAG_FRAMED = 1  # row = [CLS] A [SEP] B [SEP]; otherwise row = A B
FLAG_EVAL = 2    # the eval set (data/evalset.py): training refuses it among its shards (older eval sets lack it)

# magic, version, header_size, max_seq_length, max_predictions_per_seq, n_instances, n_stream, n_predictions,
# token_width, flags, cls_id, sep_id, body_crc32, vocab_size (0 = not recorded)
# (then zero padding up to the header's last 4 bytes, its crc32)
_HEAD = struct.Struct("<8sIIIIQQQIIIII")
_VOCAB = struct.Struct("<I")  # at offset _HEAD.size (68): the vocabulary size the token ids were drawn from
# version 2, at offset 72: the sha256 of the source text, of the preprocessing settings
# (corpus.PreprocessingSettings.sha256) and of the vocab
_SOURCE = struct.Struct("<32s32s32s")


def rebuild_hint(path) -> str:
  """The fix named by every damaged-shard error: rebuild exactly that file."""
  return f"rebuild it: snakemake --force {path}"


def _pad8(n: int) -> int:
  return (n + 7) & ~7


def layout(n: int, n_stream: int, n_pred: int, width: int, header_size: int = HEADER_SIZE
           ) -> list[tuple[str, str, tuple, int]]:
  """(name, dtype, shape, offset) of each section, in file order; sections start on 8-byte boundaries."""
  tok = "<u2" if width == 2 else "<u4"
  secs = [("starts", "<u8", (n, 2)), ("lengths", "<u2", (n, 2)), ("pred_offsets", "<u8", (n + 1,)),
          ("nsl", "u1", (n,)), ("stream", tok, (n_stream,)), ("positions", "<u2", (n_pred,)),
          ("inputs", tok, (n_pred,))]
  out, off = [], header_size
  for name, dt, shape in secs:
    out.append((name, dt, shape, off))
    off = _pad8(off + int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize)
  out.append(("end", "", (), off))
  return out


@dataclass(frozen=True)
class Header:
  version: int
  header_size: int
  max_seq_length: int
  max_predictions_per_seq: int
  n: int           # instances
  n_stream: int    # stream tokens
  n_pred: int      # masked positions
  width: int       # bytes per token id: 2 or 4
  flags: int
  cls_id: int
  sep_id: int
  body_crc32: int
  vocab_size: int  # 0: not recorded
  source_sha256: str | None    # None: not recorded
  settings_sha256: str | None
  vocab_sha256: str | None


def pack_header(*, max_seq_length: int, max_predictions_per_seq: int, n: int, n_stream: int, n_pred: int, width: int,
                framed: bool, eval_set: bool, cls_id: int, sep_id: int, body_crc32: int, vocab_size: int,
                source_sha256: str, settings_sha256: str, vocab_sha256: str) -> bytes:
  """The HEADER_SIZE bytes of a format-VERSION header, its own crc32 last (digests: hex, "" = not recorded)."""
  head = _HEAD.pack(MAGIC, VERSION, HEADER_SIZE, int(max_seq_length), int(max_predictions_per_seq), n, n_stream,
                    n_pred, width, (FLAG_FRAMED if framed else 0) | (FLAG_EVAL if eval_set else 0), int(cls_id),
                    int(sep_id), body_crc32)
  head += _VOCAB.pack(int(vocab_size))
  head += _SOURCE.pack(*(bytes.fromhex(h) if h else b"" for h in (source_sha256, settings_sha256, vocab_sha256)))
  head = head.ljust(HEADER_SIZE - 4, b"\0")
  return head + struct.pack("<I", zlib.crc32(head))


def read_header(f, path) -> Header:
  """Read and check the header at the start of the open file `f` (magic, version, size, checksum, token width);
  a UserError naming `path` and its rebuild command otherwise."""
  fix = rebuild_hint(path)
  head = f.read(HEADER_SIZE)
  if len(head) < 16 or head[:8] != MAGIC:
    raise UserError(f"{path} is not a shard (bad magic or shorter than the {HEADER_SIZE}-byte header); {fix}")
  version, hsize = struct.unpack_from("<II", head, 8)
  if HEADER_SIZES.get(version) != hsize:
    raise UserError(f"{path}: shard format version {version} (this program reads "
                    f"{', '.join(map(str, HEADER_SIZES))}); {fix}")
  head = head[:hsize]
  if len(head) < hsize:
    raise UserError(f"{path} is not a shard (shorter than its {hsize}-byte header); {fix}")
  if struct.unpack("<I", head[-4:])[0] != zlib.crc32(head[:-4]):
    raise UserError(f"{path}: header checksum mismatch (the file is damaged); {fix}")
  (_, _, _, max_seq_length, max_predictions_per_seq, n, n_stream, n_pred, width, flags,
   cls_id, sep_id, body_crc32) = _HEAD.unpack(head[:_HEAD.size])
  vocab_size = _VOCAB.unpack_from(head, _HEAD.size)[0]
  if width not in (2, 4):
    raise UserError(f"{path}: token width {width} (expected 2 or 4): the file is damaged; {fix}")
  rec = _SOURCE.unpack_from(head, _HEAD.size + _VOCAB.size) if version >= 2 else (bytes(32),) * 3
  source, settings, vocab = (h.hex() if any(h) else None for h in rec)
  return Header(version, hsize, max_seq_length, max_predictions_per_seq, n, n_stream, n_pred, width, flags, cls_id,
                sep_id, body_crc32, vocab_size, source, settings, vocab)

"""The data types of instance creation, shared by both engines (instances.py, fastinst.py) and the eval set."""
from __future__ import annotations
import hashlib, json
from dataclasses import asdict, dataclass

import numpy as np

from mlperf_bert.errors import UserError


@dataclass
class Corpus:
  """A tokenized text file: the token stream of its sentences, their offsets, and documents as sentence ranges."""
  path: str
  stream: np.ndarray                 # token ids of every non-empty sentence, in file order (uint16 or int32)
  sent_offsets: np.ndarray           # int64 (S+1,): sentence s is stream[sent_offsets[s]:sent_offsets[s+1]]
  doc_bounds: np.ndarray             # int64 (D, 2): document d is sentences doc_bounds[d,0] .. doc_bounds[d,1]-1
  text_bytes: int = 0
  dropped_bytes: int = 0
  lines: int = 0
  sha256: str = ""                   # of the exact bytes read (the shard's header records it)


@dataclass
class PreprocessingSettings:
  """create_pretraining_data.py's flags, the config's `preprocessing` section (the defaults are MLPerf's)."""
  max_seq_length: int = 512
  max_predictions_per_seq: int = 76
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  random_seed: int = 12345
  dupe_factor: int = 10

  def check(self) -> None:
    if not 5 <= self.max_seq_length <= 65535:
      raise UserError(f"max_seq_length={self.max_seq_length}: expected 5..65535 (room for [CLS] A [SEP] B [SEP]); "
                      "fix preprocessing.max_seq_length")
    if not 1 <= self.max_predictions_per_seq <= 65535:
      raise UserError(f"max_predictions_per_seq={self.max_predictions_per_seq}: expected 1..65535; "
                      "fix preprocessing.max_predictions_per_seq")
    if not 0.0 <= self.masked_lm_prob <= 1.0 or not 0.0 <= self.short_seq_prob <= 1.0:
      raise UserError(f"masked_lm_prob={self.masked_lm_prob}, short_seq_prob={self.short_seq_prob}: "
                      "expected probabilities in 0..1; fix the preprocessing settings")
    if self.dupe_factor < 1:
      raise UserError(f"dupe_factor={self.dupe_factor}: expected >= 1; fix preprocessing.dupe_factor")

  def sha256(self) -> str:
    """The sha256 of these settings as canonical JSON (sorted keys, no spaces): what a shard's header records."""
    return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class Instances:
  """Instances in their final (shuffled) order, in the shard's span form."""
  starts: np.ndarray        # int64 (n, 2): stream offsets of A and B
  lengths: np.ndarray       # int64 (n, 2)
  nsl: np.ndarray           # int64 (n,): 1 = B is a random next
  pred_offsets: np.ndarray  # int64 (n+1,)
  positions: np.ndarray     # int64 (P,): masked positions in the row, ascending per instance
  inputs: np.ndarray        # int64 (P,): the input token at each masked position

  def __len__(self) -> int:
    return len(self.nsl)

  @property
  def tokens(self) -> int:
    return int(self.lengths.sum()) + 3 * len(self)

  def take(self, rows: np.ndarray) -> "Instances":
    """The instances at `rows`, in that order (repeats allowed), as a new table."""
    counts = np.diff(self.pred_offsets)
    c = counts[rows]
    new_off = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(c, out=new_off[1:])
    gather = np.repeat(self.pred_offsets[:-1][rows] - new_off[:-1], c) + np.arange(new_off[-1], dtype=np.int64)
    return Instances(starts=self.starts[rows], lengths=self.lengths[rows], nsl=self.nsl[rows], pred_offsets=new_off,
                     positions=self.positions[gather], inputs=self.inputs[gather])


@dataclass
class Ids:
  cls: int
  sep: int
  mask: int
  vocab_size: int
  vocab_sha256: str = ""             # of the vocab file (the shard's header records it)


def special_ids(vocab: dict[str, int]) -> Ids:
  return Ids(cls=vocab["[CLS]"], sep=vocab["[SEP]"], mask=vocab["[MASK]"], vocab_size=len(vocab))


def num_to_predict(row_len: int, masked_lm_prob: float, max_predictions_per_seq: int) -> int:
  """The reference's count of masked positions (Python's round(): halves to even)."""
  return min(max_predictions_per_seq, max(1, int(round(row_len * masked_lm_prob))))


def preprocessing_settings(max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob, random_seed,
                           dupe_factor) -> PreprocessingSettings:
  st = PreprocessingSettings(int(max_seq_length), int(max_predictions_per_seq), float(masked_lm_prob),
                             float(short_seq_prob), int(random_seed), int(dupe_factor))
  st.check()
  return st

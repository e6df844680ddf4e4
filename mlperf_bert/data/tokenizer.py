"""BERT uncased WordPiece tokenization, identical to the MLPerf reference's `FullTokenizer(do_lower_case=True)`.

Two implementations of one algorithm:
  * `Tokenizer` — fast: Hugging Face `tokenizers` with a normalizer/pre-tokenizer pipeline arranged to give the
    reference's output exactly (character classes are taken from this Python's `unicodedata`, as the
    reference's are; word-final capital sigma is decided in Python, as `str.lower()` does).
  * `SlowTokenizer` — a plain-Python statement of the reference algorithm, the oracle the tests compare with.

The reference steps, per line: drop NUL, U+FFFD and Cc/Cf characters (tab, newline and CR become spaces, as
does every Zs space); put spaces around CJK ideographs; split on whitespace; per word: `str.lower()`, NFD,
drop Mn marks, split off each punctuation character (ASCII non-alphanumerics and Unicode P*); then greedy
longest-match WordPiece with '##' continuations, a word of more than 200 characters or one that cannot be
pieced becoming '[UNK]'.
"""
from __future__ import annotations
import functools, hashlib, unicodedata
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from mlperf_bert.errors import UserError

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_CHARS_PER_WORD = 200

# the reference's CJK blocks (note 0x2B820-0x2CEAF is one range there)
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# the part of them that HF's BertNormalizer does not treat as CJK; isolated by a pre-tokenizer split instead
_HF_CJK_GAP = (0x2B820, 0x2B91F)


# ---------------------------------------------------------------------------------------------- vocab

def load_vocab(path) -> dict[str, int]:
  """token -> id, as the reference builds it: each line stripped, a repeated token keeps its first id."""
  path = Path(path)
  try:
    data = path.read_bytes()
  except OSError as e:
    raise UserError(f"cannot read vocab file {path}: {e.strerror}; check the path (sources.vocab.txt)") from None
  vocab: dict[str, int] = {}
  lines = data.decode("utf-8", "ignore").split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  for line in lines:
    tok = line.strip()
    if tok not in vocab:
      vocab[tok] = len(vocab)
  missing = [t for t in SPECIAL_TOKENS if t not in vocab]
  if missing:
    raise UserError(f"vocab file {path} lacks {', '.join(missing)}: expected a BERT WordPiece vocab (one token per "
                    "line, with [UNK], [CLS], [SEP] and [MASK]); use the MLPerf vocab.txt")
  return vocab


# ---------------------------------------------------------------------------------------------- text

def decode_text(data: bytes) -> tuple[str, int]:
  """Decode UTF-8 dropping invalid bytes, as the reference's convert_to_unicode does; returns (text, bytes dropped)."""
  text = data.decode("utf-8", "ignore")
  return text, len(data) - len(text.encode("utf-8"))


def read_text(path) -> tuple[str, int]:
  """A text file's content decoded as the reference decodes it, and the number of invalid bytes dropped."""
  text, dropped, _ = read_source(path)
  return text, dropped


def read_source(path) -> tuple[str, int, str]:
  """read_text's (text, bytes dropped) and the sha256 of the exact bytes read (a shard records it)."""
  try:
    data = Path(path).read_bytes()
  except OSError as e:
    raise UserError(f"cannot read text file {path}: {e.strerror}; check the path or re-extract the corpus") from None
  return (*decode_text(data), hashlib.sha256(data).hexdigest())


def split_lines(text: str) -> list[str]:
  """Lines as the reference reads them: split on '\\n' only; a final newline does not start another line."""
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return lines


# ---------------------------------------------------------------------------------------------- char classes

def _is_control(ch: str) -> bool:
  return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def _is_dropped(ch: str) -> bool:
  return ch == "\0" or ch == "\ufffd" or _is_control(ch)


def _is_whitespace(ch: str) -> bool:
  return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_punctuation(ch: str) -> bool:
  cp = ord(ch)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
  return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


@functools.lru_cache(maxsize=None)
def _char_classes() -> dict[str, list[tuple[int, int]]]:
  """Code point ranges of each class, from this Python's unicodedata (what the reference itself uses).

  Planes 4-13 are unassigned and 15-16 private use (in no class), so only planes 0-3 and 14 are scanned.
  """
  cps = np.concatenate([np.arange(0, 0x40000), np.arange(0xE0000, 0xF0000)])
  cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]
  cats = np.array([unicodedata.category(chr(cp)) for cp in cps.tolist()])
  ascii_punct = (((cps >= 33) & (cps <= 47)) | ((cps >= 58) & (cps <= 64)) | ((cps >= 91) & (cps <= 96))
                 | ((cps >= 123) & (cps <= 126)))
  tab_nl_cr = (cps == 9) | (cps == 10) | (cps == 13)
  dropped = (cps == 0) | (cps == 0xFFFD) | (np.isin(cats, ["Cc", "Cf"]) & ~tab_nl_cr)
  masks = {"dropped": dropped,
           "space": ~dropped & (tab_nl_cr | (cps == 32) | (cps == 0x2028) | (cps == 0x2029) | (cats == "Zs")),
           "punct": ascii_punct | np.char.startswith(cats, "P"),
           "mn": cats == "Mn"}
  out = {}
  for k, m in masks.items():
    sel = cps[m]
    if len(sel) == 0:
      out[k] = []
      continue
    breaks = np.nonzero(np.diff(sel) != 1)[0]
    lo = np.concatenate([[sel[0]], sel[breaks + 1]])
    hi = np.concatenate([sel[breaks], [sel[-1]]])
    out[k] = list(zip(lo.tolist(), hi.tolist()))
  return out


def _regex_class(ranges: Iterable[tuple[int, int]]) -> str:
  parts = [f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in ranges]
  return "[" + "".join(parts) + "]"


# ---------------------------------------------------------------------------------------------- final sigma

@functools.lru_cache(maxsize=4096)
def _cased_not_ignorable(ch: str) -> bool:
  return (ch + "\u03a3").lower()[-1] == "\u03c2"


@functools.lru_cache(maxsize=4096)
def _case_ignorable(ch: str) -> bool:
  return ("A" + ch + "\u03a3").lower()[-1] == "\u03c2" and not _cased_not_ignorable(ch)


def apply_final_sigma(text: str) -> str:
  """Replace each capital sigma that `str.lower()` would make word-final 'ς' by 'ς' (its context: cased letter
  before, no cased letter after, skipping case-ignorable characters). Apply to text already cleaned of
  control characters, so that the context is the one the reference sees."""
  if "\u03a3" not in text:
    return text
  chars = list(text)
  n = len(chars)
  for i, ch in enumerate(chars):
    if ch != "\u03a3":
      continue
    j = i - 1
    while j >= 0 and _case_ignorable(text[j]):
      j -= 1
    if j < 0 or not _cased_not_ignorable(text[j]):
      continue
    k = i + 1
    while k < n and _case_ignorable(text[k]):
      k += 1
    if k == n or not _cased_not_ignorable(text[k]):
      chars[i] = "\u03c2"
  return "".join(chars)


# ---------------------------------------------------------------------------------------------- slow oracle

class SlowTokenizer:
  """The reference algorithm in plain Python (slow; the oracle for `Tokenizer`)."""

  def __init__(self, vocab: dict[str, int]):
    self.vocab = vocab

  def basic_tokens(self, text: str) -> list[str]:
    cleaned = []
    for ch in text:
      if _is_dropped(ch):
        continue
      cleaned.append(" " if _is_whitespace(ch) else ch)
    spaced = []
    for ch in cleaned:
      spaced.append(f" {ch} " if _is_cjk(ord(ch)) else ch)
    words = []
    for word in "".join(spaced).split():
      word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
      piece = ""
      for ch in word:
        if _is_punctuation(ch):
          if piece:
            words.append(piece)
          words.append(ch)
          piece = ""
        else:
          piece += ch
      if piece:
        words.append(piece)
    return " ".join(words).split()

  def wordpieces(self, word: str) -> list[str]:
    if len(word) > MAX_CHARS_PER_WORD:
      return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
      end = len(word)
      while end > start:
        cand = word[start:end] if start == 0 else "##" + word[start:end]
        if cand in self.vocab:
          break
        end -= 1
      else:
        return ["[UNK]"]
      pieces.append(cand)
      start = end
    return pieces

  def tokenize(self, text: str) -> list[str]:
    return [p for w in self.basic_tokens(text) for p in self.wordpieces(w)]

  def encode(self, text: str) -> list[int]:
    return [self.vocab[t] for t in self.tokenize(text)]


# ---------------------------------------------------------------------------------------------- fast

class Tokenizer:
  """Fast tokenizer equal to the reference. `encode(line)` -> ids; `encode_lines(lines)` -> list of id arrays."""

  def __init__(self, vocab: dict[str, int], batch_lines: int = 8192):
    from tokenizers import Regex, Tokenizer as HFTokenizer, models, normalizers, pre_tokenizers
    self.vocab = vocab
    self.batch_lines = batch_lines
    cls = _char_classes()
    tok = HFTokenizer(models.WordPiece(vocab=dict(vocab), unk_token="[UNK]",
                                       max_input_chars_per_word=MAX_CHARS_PER_WORD, continuing_subword_prefix="##"))
    tok.normalizer = normalizers.Sequence([
      normalizers.Replace(Regex(_regex_class(cls["dropped"])), ""),
      normalizers.Replace(Regex(_regex_class(cls["space"])), " "),
      normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=True),
      normalizers.NFD(),
      normalizers.Replace(Regex(_regex_class(cls["mn"])), ""),
    ])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.WhitespaceSplit(),
      pre_tokenizers.Split(Regex(_regex_class(cls["punct"] + [_HF_CJK_GAP])), "isolated"),
    ])
    self._hf = tok
    # printable-ASCII lines need none of the normalizer (no controls, accents, CJK or sigma): lowercase them in
    # Python and skip it; same pre-tokenizer rules restricted to ASCII (whitespace, ASCII punctuation)
    plain = HFTokenizer(models.WordPiece(vocab=dict(vocab), unk_token="[UNK]",
                                         max_input_chars_per_word=MAX_CHARS_PER_WORD, continuing_subword_prefix="##"))
    plain.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    self._plain = plain

  def _prepare(self, line: str) -> str:
    if "\u03a3" in line:  # the only context-dependent step: decide it in Python on the cleaned line
      line = apply_final_sigma("".join(ch for ch in line if not _is_dropped(ch)))
    return line

  def encode(self, line: str) -> list[int]:
    return self._hf.encode(self._prepare(line), add_special_tokens=False).ids

  def encode_lines(self, lines: Sequence[str]) -> list[list[int]]:
    """Ids of each line (a list per line), in batches (bounded memory)."""
    out: list[list[int]] = []
    full = getattr(self._hf, "encode_batch_fast", self._hf.encode_batch)
    plain = getattr(self._plain, "encode_batch_fast", self._plain.encode_batch)
    for s in range(0, len(lines), self.batch_lines):
      batch = lines[s:s + self.batch_lines]
      easy = [l.isascii() and l.isprintable() for l in batch]
      ids: list = [None] * len(batch)
      which = [i for i, e in enumerate(easy) if e]
      for i, e in zip(which, plain([batch[i].lower() for i in which], add_special_tokens=False)):
        ids[i] = e.ids
      which = [i for i, e in enumerate(easy) if not e]
      for i, e in zip(which, full([self._prepare(batch[i]) for i in which], add_special_tokens=False)):
        ids[i] = e.ids
      out.extend(ids)
    return out

  def tokenize(self, line: str) -> list[str]:
    return self._hf.encode(self._prepare(line), add_special_tokens=False).tokens

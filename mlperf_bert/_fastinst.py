"""Compiled instance engine: the algorithm of `instances._python_engine`, draw for draw, in numba.

Python's `random.Random(seed)` is a Mersenne Twister (MT19937); its state (624 words + position) is copied into
numpy's MT19937, which then yields the same raw 32-bit words in bulk. The compiled code replays what CPython
does with them:
  random()          two words a, b: ((a >> 5) * 2**26 + (b >> 6)) / 2**53
  getrandbits(k)    one word >> (32 - k)                          (k <= 32)
  _randbelow(n)     k = n.bit_length(); r = getrandbits(k) until r < n
  randint(a, b)     a + _randbelow(b - a + 1)
  shuffle(x)        for i = len(x)-1 .. 1: j = _randbelow(i + 1); swap x[i], x[j]
A draw past the end of the word buffer sets a flag; the driver then rolls the document back, appends more
words and runs it again, so the result never depends on buffer sizes.
"""
from __future__ import annotations
import random

import numpy as np
from numba import njit

from mlperf_bert.instances import Corpus, Ids, Instances, Settings, _reorder, num_to_predict

# state array slots
CUR, OVERFLOW, N, P = 0, 1, 2, 3


@njit(cache=True, inline="always")
def _word(words, st):
  c = st[CUR]
  if c >= words.shape[0]:
    st[OVERFLOW] = 1
    return 0
  st[CUR] = c + 1
  return words[c]


@njit(cache=True, inline="always")
def _random(words, st):
  a = _word(words, st) >> 5
  b = _word(words, st) >> 6
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _bit_length(n):
  k = 0
  while n:
    k += 1
    n >>= 1
  return k


@njit(cache=True, inline="always")
def _randbelow(words, st, n):
  shift = 32 - _bit_length(n)
  while True:
    r = _word(words, st) >> shift
    if r < n or st[OVERFLOW]:
      return r


@njit(cache=True)
def draw_ops(words, st, ops, args):
  """Test hook: replay a list of operations (0 random, 1 randint(args), 2 shuffle(range(args))) -> flat results."""
  out = []
  for i in range(ops.shape[0]):
    if ops[i] == 0:
      out.append(_random(words, st))
    elif ops[i] == 1:
      out.append(float(args[i, 0] + _randbelow(words, st, args[i, 1] - args[i, 0] + 1)))
    else:
      m = args[i, 0]
      x = np.arange(m)
      for k in range(m - 1, 0, -1):
        j = _randbelow(words, st, k + 1)
        t = x[k]; x[k] = x[j]; x[j] = t
      for k in range(m):
        out.append(float(x[k]))
  return np.array(out)


@njit(cache=True)
def _shuffle_rows(words, st, a):
  for i in range(a.shape[0] - 1, 0, -1):
    j = _randbelow(words, st, i + 1)
    for c in range(a.shape[1]):
      t = a[i, c]; a[i, c] = a[j, c]; a[j, c] = t


@njit(cache=True)
def _run(words, st, so, docs, stream, ntp, pos0, max_seq_length, short_seq_prob, dupe_factor, mask_id, vocab_size,
         o_starts, o_lengths, o_nsl, o_counts, o_pos, o_inp, max_pred):
  """Make instances from document position pos0 = dupe * D + doc onward. Returns (status, position):
  status 0 = all done, 1 = word buffer ran out (that document rolled back), 2 = output arrays too small."""
  n_docs = docs.shape[0]
  max_num = max_seq_length - 3
  cand = np.empty(max_seq_length, np.int64)
  pick_pos = np.empty(max_pred, np.int64)
  pick_tok = np.empty(max_pred, np.int64)
  for pos in range(pos0, dupe_factor * n_docs):
    di = pos % n_docs
    s0 = docs[di, 0]
    n_sent = docs[di, 1] - s0
    if o_nsl.shape[0] - st[N] < n_sent or o_pos.shape[0] - st[P] < n_sent * max_pred:
      return 2, pos
    save_cur, save_n, save_p = st[CUR], st[N], st[P]
    target = max_num
    if _random(words, st) < short_seq_prob:
      target = 2 + _randbelow(words, st, max_num - 1)
    first = 0
    n_chunk = 0
    cur_len = 0
    i = 0
    while i < n_sent:
      if n_chunk == 0:
        first = i
      n_chunk += 1
      cur_len += so[s0 + i + 1] - so[s0 + i]
      if i == n_sent - 1 or cur_len >= target:
        a_end = 1
        if n_chunk >= 2:
          a_end = 1 + _randbelow(words, st, n_chunk - 1)
        a0 = so[s0 + first]
        a1 = so[s0 + first + a_end]
        if n_chunk == 1 or _random(words, st) < 0.5:
          is_random = 1
          target_b = target - (a1 - a0)
          rdi = 0
          for _ in range(10):
            rdi = _randbelow(words, st, n_docs)
            if rdi != di:
              break
          r0 = docs[rdi, 0]
          r1 = docs[rdi, 1]
          rs = _randbelow(words, st, r1 - r0)
          b0 = so[r0 + rs]
          b1 = b0
          for j in range(r0 + rs, r1):
            b1 = so[j + 1]
            if b1 - b0 >= target_b:
              break
          i -= n_chunk - a_end
        else:
          is_random = 0
          b0 = a1
          b1 = so[s0 + first + n_chunk]
        while (a1 - a0) + (b1 - b0) > max_num:
          if a1 - a0 > b1 - b0:
            if _random(words, st) < 0.5:
              a0 += 1
            else:
              a1 -= 1
          else:
            if _random(words, st) < 0.5:
              b0 += 1
            else:
              b1 -= 1
        la = a1 - a0
        lb = b1 - b0
        m = 0
        for p in range(1, la + 1):
          cand[m] = p
          m += 1
        for p in range(la + 2, la + lb + 2):
          cand[m] = p
          m += 1
        for k in range(m - 1, 0, -1):
          j = _randbelow(words, st, k + 1)
          t = cand[k]; cand[k] = cand[j]; cand[j] = t
        num = min(ntp[la + lb + 3], m)
        for q in range(num):
          p = cand[q]
          orig = stream[a0 + p - 1] if p <= la else stream[b0 + p - la - 2]
          if _random(words, st) < 0.8:
            tok = mask_id
          elif _random(words, st) < 0.5:
            tok = orig
          else:
            tok = _randbelow(words, st, vocab_size)
          # insertion sort by position as we go
          r = q
          while r > 0 and pick_pos[r - 1] > p:
            pick_pos[r] = pick_pos[r - 1]
            pick_tok[r] = pick_tok[r - 1]
            r -= 1
          pick_pos[r] = p
          pick_tok[r] = tok
        n = st[N]
        o_starts[n, 0] = a0
        o_starts[n, 1] = b0
        o_lengths[n, 0] = la
        o_lengths[n, 1] = lb
        o_nsl[n] = is_random
        o_counts[n] = num
        pp = st[P]
        for q in range(num):
          o_pos[pp + q] = pick_pos[q]
          o_inp[pp + q] = pick_tok[q]
        st[P] = pp + num
        st[N] = n + 1
        n_chunk = 0
        cur_len = 0
      i += 1
    if st[OVERFLOW]:
      st[CUR], st[N], st[P], st[OVERFLOW] = save_cur, save_n, save_p, 0
      return 1, pos
  return 0, dupe_factor * n_docs


class _Words:
  """Raw MT19937 words continuing a `random.Random(seed)` stream, held in a growing buffer."""

  def __init__(self, seed: int, chunk: int):
    state = random.Random(seed).getstate()[1]
    self.gen = np.random.MT19937()
    self.gen.state = {"bit_generator": "MT19937",
                      "state": {"key": np.asarray(state[:624], dtype=np.uint32), "pos": int(state[624])}}
    self.chunk = int(chunk)
    self.buf = self.gen.random_raw(self.chunk).astype(np.int64)

  def refill(self, st) -> None:
    """Drop words before the cursor, append a fresh chunk."""
    self.buf = np.concatenate([self.buf[st[CUR]:], self.gen.random_raw(self.chunk).astype(np.int64)])
    st[CUR] = 0
    st[OVERFLOW] = 0


def _shuffle(words: _Words, st, a: np.ndarray) -> None:
  """Python's shuffle on the rows of `a` (in place), refilling on overflow."""
  while True:
    save = st[CUR]
    work = a.copy()
    _shuffle_rows(words.buf, st, work)
    if not st[OVERFLOW]:
      a[...] = work
      return
    st[CUR] = save
    st[OVERFLOW] = 0
    words.refill(st)


def numba_engine(corpus: Corpus, s: Settings, ids: Ids) -> Instances:
  tokens, D = len(corpus.stream), len(corpus.doc_bounds)
  if max(D, ids.vocab_size, s.max_seq_length) >= 2**31:  # _randbelow here draws one 32-bit word per try
    raise ValueError("numba engine: more than 2**31 documents or vocab entries; use engine='python'")
  est = int(s.dupe_factor * (2.6 * tokens + 40 * D)) + 4 * D + 65536
  words = _Words(s.random_seed, min(est, 1 << 23))
  st = np.zeros(4, np.int64)
  docs = corpus.doc_bounds.astype(np.int64).copy()
  _shuffle(words, st, docs)
  so = corpus.sent_offsets.astype(np.int64)
  stream = corpus.stream.astype(np.int32)
  ntp = np.array([num_to_predict(L, s.masked_lm_prob, s.max_predictions_per_seq)
                  for L in range(s.max_seq_length + 1)], dtype=np.int64)
  cap = max(1024, int(s.dupe_factor * (tokens / max(s.max_seq_length - 3, 1) * 1.5 + D)))
  pcap = max(cap * 8, int(s.dupe_factor * tokens * min(1.0, s.masked_lm_prob * 1.2)) + 1024)
  cols = None
  pos = 0
  while True:
    if cols is None:
      cols = [np.zeros((cap, 2), np.int64), np.zeros((cap, 2), np.int64), np.zeros(cap, np.int64),
              np.zeros(cap, np.int64), np.zeros(pcap, np.int64), np.zeros(pcap, np.int64)]
    status, pos = _run(words.buf, st, so, docs, stream, ntp, pos, s.max_seq_length, s.short_seq_prob,
                       s.dupe_factor, ids.mask, ids.vocab_size, *cols, s.max_predictions_per_seq)
    if status == 0:
      break
    if status == 1:
      words.refill(st)
    else:  # grow the output arrays, keeping what is there
      cap, pcap = cap * 2, pcap * 2
      grown = [np.zeros((cap, 2), np.int64), np.zeros((cap, 2), np.int64), np.zeros(cap, np.int64),
               np.zeros(cap, np.int64), np.zeros(pcap, np.int64), np.zeros(pcap, np.int64)]
      for g, c in zip(grown, cols):
        g[:len(c)] = c
      cols = grown
  n, p = int(st[N]), int(st[P])
  starts, lengths, nsl, counts, positions, inputs = cols
  order = np.arange(n, dtype=np.int64).reshape(-1, 1)
  _shuffle(words, st, order)
  return _reorder(starts[:n], lengths[:n], nsl[:n], counts[:n], positions[:p], inputs[:p], order[:, 0])

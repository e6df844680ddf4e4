"""Compiled instance engine: the algorithm of `instances._python_engine`, draw for draw, in numba.

Python's `random.Random(seed)` is a Mersenne Twister (MT19937). Its state (624 words + position, from
`getstate()`) is copied into an array and the generator is run here, in compiled code, exactly as CPython's
`genrand_uint32` runs it; on top of it the code replays what CPython does with the words:
  random()          two words a, b: ((a >> 5) * 2**26 + (b >> 6)) / 2**53
  getrandbits(k)    one word >> (32 - k)                          (k <= 32)
  _randbelow(n)     k = n.bit_length(); r = getrandbits(k) until r < n
  randint(a, b)     a + _randbelow(b - a + 1)
  shuffle(x)        for i = len(x)-1 .. 1: j = _randbelow(i + 1); swap x[i], x[j]
tests/data/test_instances.py checks this against `random.Random` draw for draw.
"""
from __future__ import annotations
import random

import numpy as np
from numba import njit

from mlperf_bert.data.corpus import Corpus, Ids, Instances, PreprocessingSettings, num_to_predict

# st (int64 array) slots: MT position, instances written, predictions written
POS, N, P = 0, 1, 2
_N624, _M397 = 624, 397


# Every helper is inlined and none calls a function: in numba a call that passes arrays costs reference
# counting on each call, which made the per-word cost ten times higher.
@njit(cache=True, inline="always")
def _word(mt, st):
  """CPython's genrand_uint32: the next tempered word (twisting the 624-word state when it is used up)."""
  i = st[POS]
  if i >= _N624:
    for k in range(_N624):
      y = (mt[k] & 0x80000000) | (mt[(k + 1) % _N624] & 0x7FFFFFFF)
      v = mt[(k + _M397) % _N624] ^ (y >> 1)
      if y & 1:
        v ^= 0x9908B0DF
      mt[k] = v
    i = 0
  y = mt[i]
  st[POS] = i + 1
  y ^= y >> 11
  y ^= (y << 7) & 0x9D2C5680
  y ^= (y << 15) & 0xEFC60000
  y ^= y >> 18
  return y


@njit(cache=True, inline="always")
def _random(mt, st):
  a = _word(mt, st) >> 5
  b = _word(mt, st) >> 6
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _bit_length(n):
  k = 0
  while n:
    k += 1
    n >>= 1
  return k


@njit(cache=True, inline="always")
def _randbelow(mt, st, n):
  shift = 32 - _bit_length(n)
  while True:
    r = _word(mt, st) >> shift
    if r < n:
      return r


@njit(cache=True, inline="always")
def _shuffle(mt, st, x):
  """Python's shuffle of the 1-D array x, in place."""
  m = x.shape[0]
  if m < 2:
    return
  shift = 32 - _bit_length(m)
  for i in range(m - 1, 0, -1):
    n = i + 1
    if (n << shift) < 0x80000000:  # n.bit_length() dropped by one
      shift += 1
    while True:
      r = _word(mt, st) >> shift
      if r < n:
        break
    t = x[i]
    x[i] = x[r]
    x[r] = t


@njit(cache=True)
def shuffle(mt, st, x):
  """Python's shuffle of the 1-D array x, in place (callable from Python)."""
  _shuffle(mt, st, x)


@njit(cache=True)
def draw_ops(mt, st, ops, args):
  """Test hook: replay operations (0 random(), 1 randint(*args), 2 shuffle(range(args[0]))) -> flat results."""
  out = []
  for i in range(ops.shape[0]):
    if ops[i] == 0:
      out.append(_random(mt, st))
    elif ops[i] == 1:
      out.append(float(args[i, 0] + _randbelow(mt, st, args[i, 1] - args[i, 0] + 1)))
    else:
      x = np.arange(args[i, 0])
      _shuffle(mt, st, x)
      for k in range(x.shape[0]):
        out.append(float(x[k]))
  out.append(float(_word(mt, st)))  # where the stream stands afterwards
  return np.array(out)


@njit(cache=True)
def _run(mt, st, so, docs, stream, ntp, max_seq_length, short_seq_prob, dupe_factor, mask_id, vocab_size,
         o_starts, o_lengths, o_nsl, o_counts, o_pos, o_inp, max_pred):
  """Make every instance (creation order) into the o_* columns. Returns False if they are too small (the
  driver grows them and calls again from scratch with the MT state it saved)."""
  n_docs = docs.shape[0]
  max_num = max_seq_length - 3
  cand = np.empty(max_seq_length, np.int64)
  pick_pos = np.empty(max_pred, np.int64)
  pick_tok = np.empty(max_pred, np.int64)
  for pos in range(dupe_factor * n_docs):
    di = pos % n_docs
    s0 = docs[di, 0]
    n_sent = docs[di, 1] - s0
    if o_nsl.shape[0] - st[N] < n_sent or o_pos.shape[0] - st[P] < n_sent * max_pred:
      return False
    target = max_num
    if _random(mt, st) < short_seq_prob:
      target = 2 + _randbelow(mt, st, max_num - 1)
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
          a_end = 1 + _randbelow(mt, st, n_chunk - 1)
        a0 = so[s0 + first]
        a1 = so[s0 + first + a_end]
        if n_chunk == 1 or _random(mt, st) < 0.5:
          is_random = 1
          target_b = target - (a1 - a0)
          rdi = 0
          for _ in range(10):
            rdi = _randbelow(mt, st, n_docs)
            if rdi != di:
              break
          r0 = docs[rdi, 0]
          r1 = docs[rdi, 1]
          rs = _randbelow(mt, st, r1 - r0)
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
            if _random(mt, st) < 0.5:
              a0 += 1
            else:
              a1 -= 1
          else:
            if _random(mt, st) < 0.5:
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
        _shuffle(mt, st, cand[:m])
        num = min(ntp[la + lb + 3], m)
        for q in range(num):
          p = cand[q]
          orig = stream[a0 + p - 1] if p <= la else stream[b0 + p - la - 2]
          if _random(mt, st) < 0.8:
            tok = mask_id
          elif _random(mt, st) < 0.5:
            tok = orig
          else:
            tok = _randbelow(mt, st, vocab_size)
          r = q  # insertion sort by position as we go
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
  return True


@njit(cache=True)
def _reorder(order, starts, lengths, nsl, counts, pos, inp, r_starts, r_lengths, r_nsl, r_off, r_pos, r_inp):
  """Columns in `order` (the final shuffle), written into the r_* arrays."""
  n = order.shape[0]
  off = np.zeros(n + 1, np.int64)
  for i in range(n):
    off[i + 1] = off[i] + counts[i]
  r_off[0] = 0
  for k in range(n):
    i = order[k]
    r_starts[k, 0] = starts[i, 0]
    r_starts[k, 1] = starts[i, 1]
    r_lengths[k, 0] = lengths[i, 0]
    r_lengths[k, 1] = lengths[i, 1]
    r_nsl[k] = nsl[i]
    c = counts[i]
    o = r_off[k]
    for q in range(c):
      r_pos[o + q] = pos[off[i] + q]
      r_inp[o + q] = inp[off[i] + q]
    r_off[k + 1] = o + c


def mt_state(seed: int):
  """(mt, st): the MT19937 state of `random.Random(seed)` as arrays for the compiled code."""
  state = random.Random(seed).getstate()[1]
  mt = np.asarray(state[:624], dtype=np.int64)
  st = np.zeros(3, np.int64)
  st[POS] = state[624]
  return mt, st


def numba_engine(corpus: Corpus, s: PreprocessingSettings, ids: Ids) -> Instances:
  tokens, D = len(corpus.stream), len(corpus.doc_bounds)
  if max(D, ids.vocab_size, s.max_seq_length) >= 2**31:  # _randbelow here draws one 32-bit word per try
    raise ValueError("numba engine: more than 2**31 documents or vocab entries; use engine='python'")
  mt, st = mt_state(s.random_seed)
  perm = np.arange(D, dtype=np.int64)
  shuffle(mt, st, perm)
  docs = corpus.doc_bounds.astype(np.int64)[perm]
  so = corpus.sent_offsets.astype(np.int64)
  stream = corpus.stream
  ntp = np.array([num_to_predict(L, s.masked_lm_prob, s.max_predictions_per_seq)
                  for L in range(s.max_seq_length + 1)], dtype=np.int64)
  cap = max(1024, int(s.dupe_factor * (tokens / max(s.max_seq_length - 3, 1) * 1.3 + D * 1.2)))
  pcap = max(1024, int(s.dupe_factor * (tokens + 3 * D) * min(1.0, s.masked_lm_prob * 1.1)) + 64 * cap // 8)
  saved = (mt.copy(), st.copy())
  while True:
    cols = [np.zeros((cap, 2), np.int64), np.zeros((cap, 2), np.int32), np.zeros(cap, np.int8),
            np.zeros(cap, np.int32), np.zeros(pcap, np.int32), np.zeros(pcap, np.int32)]
    if _run(mt, st, so, docs, stream, ntp, s.max_seq_length, s.short_seq_prob, s.dupe_factor, ids.mask,
            ids.vocab_size, *cols, s.max_predictions_per_seq):
      break
    cap, pcap = cap * 2, pcap * 2  # rare: start again, from the saved generator state, with room to spare
    mt, st = saved[0].copy(), saved[1].copy()
  n, p = int(st[N]), int(st[P])
  starts, lengths, nsl, counts, positions, inputs = cols
  order = np.arange(n, dtype=np.int64)
  shuffle(mt, st, order)
  out = Instances(starts=np.empty((n, 2), np.int64), lengths=np.empty((n, 2), np.int32), nsl=np.empty(n, np.int8),
                  pred_offsets=np.empty(n + 1, np.int64), positions=np.empty(p, np.uint16),
                  inputs=np.empty(p, np.int32))
  _reorder(order, starts, lengths, nsl, counts, positions, inputs, out.starts, out.lengths, out.nsl,
           out.pred_offsets, out.positions, out.inputs)
  return out

"""Masked-LM / next-sentence instances, exactly as MLCommons' `create_pretraining_data.py` makes them.

The reference, per input file: read lines (a blank line ends a document; lines with no tokens are skipped),
drop empty documents, `rng = random.Random(random_seed)`, shuffle the documents, then `dupe_factor` times over
every document build instances (sentence chunks up to a target length, a random cut into A and B, B a random
document's sentences half of the time, `truncate_seq_pair`, then masking: shuffled candidate positions, the
first `num_to_predict` masked 80 % [MASK] / 10 % kept / 10 % random word), and finally shuffle all instances.

Here the same algorithm runs on token ids. Because A and B are each a contiguous run of the file's token
stream (consecutive sentences, trimmed at either end), an instance is kept as two spans of that stream plus
its masked positions and their input tokens: the compact form the shard stores (docs/shard-format.md).

Two engines consume the Mersenne Twister stream identically: `engine="python"` drives `random.Random`
itself (the plain statement of the algorithm); `engine="numba"` copies the generator state into numpy's
MT19937, draws raw 32-bit words in bulk and replays `random()`, `randint()` and `shuffle()` on them in
compiled code (see mlperf_bert/data/fastinst.py). Both give the same instances (tests check this).
`engine="auto"` takes numba for files large enough to repay its first-call compile (~7 CPU s when its cache is
empty, as in each new checkout) and the plain engine for small ones, such as the demo's topics (`choose_engine`).
"""
from __future__ import annotations
import array, random, sys
from pathlib import Path
from typing import Callable

import numpy as np

from mlperf_bert.data.corpus import (Corpus, Ids, Instances, PreprocessingSettings, num_to_predict,
                                     preprocessing_settings, special_ids)
from mlperf_bert.errors import UserError
from mlperf_bert.fileio import file_digest
from mlperf_bert.data.tokenizer import Tokenizer, read_source, split_lines


# ---------------------------------------------------------------------------------------------- reading

def tokenize_corpus(text_path, tokenizer: Tokenizer, *, progress: Callable[[int, int], None] | None = None,
                    chunk_lines: int = 16384) -> Corpus:
  """Read and tokenize one text file as the reference does (documents split on blank lines).

  progress(lines_done, lines_total) is called after each chunk of lines."""
  text_path = Path(text_path)
  text, dropped, sha256 = read_source(text_path)
  n_bytes = text_path.stat().st_size
  lines = split_lines(text)
  del text
  flat, sent_lens, doc_bounds = array.array("i"), [], []
  doc_open = 0  # first sentence of the current document
  for s in range(0, len(lines), chunk_lines):
    chunk = [l.strip() for l in lines[s:s + chunk_lines]]
    keep = [i for i, l in enumerate(chunk) if l]
    ids = tokenizer.encode_lines([chunk[i] for i in keep])
    k = 0
    for i, l in enumerate(chunk):
      if not l:  # a blank line starts a new document
        if len(sent_lens) > doc_open:
          doc_bounds.append((doc_open, len(sent_lens)))
        doc_open = len(sent_lens)
        continue
      toks = ids[k]; k += 1
      if toks:
        sent_lens.append(len(toks))
        flat.extend(toks)
    if progress is not None:
      progress(min(s + chunk_lines, len(lines)), len(lines))
  if len(sent_lens) > doc_open:
    doc_bounds.append((doc_open, len(sent_lens)))
  stream = np.frombuffer(flat, dtype=np.int32) if len(flat) else np.zeros(0, np.int32)
  if len(stream) and stream.max() < 65536:
    stream = stream.astype(np.uint16)
  else:
    stream = stream.copy()
  del flat
  offsets = np.zeros(len(sent_lens) + 1, np.int64)
  np.cumsum(sent_lens, out=offsets[1:])
  return Corpus(path=str(text_path), sha256=sha256, stream=stream, sent_offsets=offsets,
                doc_bounds=np.asarray(doc_bounds, np.int64).reshape(-1, 2), text_bytes=n_bytes,
                dropped_bytes=dropped, lines=len(lines))


# ---------------------------------------------------------------------------------------------- algorithm

def _python_engine(corpus: Corpus, st: PreprocessingSettings, ids: Ids) -> Instances:
  """The algorithm with `random.Random`, draw for draw as the reference."""
  rng = random.Random(st.random_seed)
  so = corpus.sent_offsets.tolist()
  stream = corpus.stream
  docs = [tuple(d) for d in corpus.doc_bounds.tolist()]
  rng.shuffle(docs)
  n_docs = len(docs)
  max_num = st.max_seq_length - 3
  starts, lengths, nsl, counts = [], [], [], []
  positions, inputs = array.array("i"), array.array("i")  # compact: millions of entries
  for _ in range(st.dupe_factor):
    for di in range(n_docs):
      s0, s1 = docs[di]
      n_sent = s1 - s0
      target = max_num
      if rng.random() < st.short_seq_prob:
        target = rng.randint(2, max_num)
      first, n_chunk, cur_len = 0, 0, 0
      i = 0
      while i < n_sent:
        if n_chunk == 0:
          first = i
        n_chunk += 1
        cur_len += so[s0 + i + 1] - so[s0 + i]
        if i == n_sent - 1 or cur_len >= target:
          a_end = 1
          if n_chunk >= 2:
            a_end = rng.randint(1, n_chunk - 1)
          a0, a1 = so[s0 + first], so[s0 + first + a_end]
          if n_chunk == 1 or rng.random() < 0.5:
            is_random = 1
            target_b = target - (a1 - a0)
            for _ in range(10):
              rdi = rng.randint(0, n_docs - 1)
              if rdi != di:
                break
            r0, r1 = docs[rdi]
            rs = rng.randint(0, r1 - r0 - 1)
            b0 = b1 = so[r0 + rs]
            for j in range(r0 + rs, r1):
              b1 = so[j + 1]
              if b1 - b0 >= target_b:
                break
            i -= n_chunk - a_end
          else:
            is_random = 0
            b0, b1 = a1, so[s0 + first + n_chunk]
          while (a1 - a0) + (b1 - b0) > max_num:
            if a1 - a0 > b1 - b0:
              if rng.random() < 0.5:
                a0 += 1
              else:
                a1 -= 1
            else:
              if rng.random() < 0.5:
                b0 += 1
              else:
                b1 -= 1
          la, lb = a1 - a0, b1 - b0
          row_len = la + lb + 3
          cand = list(range(1, la + 1)) + list(range(la + 2, la + lb + 2))
          rng.shuffle(cand)
          picks = cand[:num_to_predict(row_len, st.masked_lm_prob, st.max_predictions_per_seq)]
          chosen = []
          for p in picks:
            orig = int(stream[a0 + p - 1] if p <= la else stream[b0 + p - la - 2])
            if rng.random() < 0.8:
              tok = ids.mask
            elif rng.random() < 0.5:
              tok = orig
            else:
              tok = rng.randint(0, ids.vocab_size - 1)
            chosen.append((p, tok))
          chosen.sort()
          starts.append((a0, b0)); lengths.append((la, lb)); nsl.append(is_random); counts.append(len(chosen))
          positions.extend(p for p, _ in chosen); inputs.extend(t for _, t in chosen)
          first, n_chunk, cur_len = 0, 0, 0
        i += 1
  order = list(range(len(nsl)))
  rng.shuffle(order)
  counts = np.asarray(counts, np.int64)
  offsets = np.zeros(len(counts) + 1, np.int64)
  np.cumsum(counts, out=offsets[1:])
  made = Instances(starts=np.asarray(starts, np.int64).reshape(-1, 2), lengths=np.asarray(lengths, np.int64).reshape(-1, 2),
                   nsl=np.asarray(nsl, np.int64), pred_offsets=offsets, positions=np.frombuffer(positions, np.int32),
                   inputs=np.frombuffer(inputs, np.int32))
  return made.take(np.asarray(order, np.int64))  # the final shuffle


# Below this much work (corpus tokens x dupe_factor) `auto` takes the python engine. Measured on Xeon-2 of
# docs/benchmarks.md on 2026-12-01 (CHANGELOG.md, instance engine `auto`): a demo topic (108k tokens, 1.1M x dupe 10) took 0.7 CPU s in python, 0.9 s in
# numba with its cache warm and 8.1 s with it cold; 3.7 MB of text (9.5M) took 6.9 s in python, 2.2 s in numba.
PYTHON_ENGINE_MAX_WORK = 2_000_000


def choose_engine(corpus: Corpus, settings: PreprocessingSettings) -> str:
  """The engine `auto` runs: python for small files (no compile to pay), else numba when it is installed."""
  if len(corpus.stream) * settings.dupe_factor <= PYTHON_ENGINE_MAX_WORK: return "python"
  return available_engines()[0]


def available_engines() -> list[str]:
  try:
    import numba  # noqa: F401
  except ImportError:
    return ["python"]
  return ["numba", "python"]


def create_instances(corpus: Corpus, settings: PreprocessingSettings, ids: Ids, *, engine: str = "auto") -> Instances:
  """All instances of one file, in the reference's final order. engine: 'auto', 'numba' or 'python'."""
  settings.check()
  if len(corpus.doc_bounds) == 0:
    raise UserError(f"text file {corpus.path} has no document with any token: expected sentences, one per line, "
                    "documents separated by blank lines; re-extract the corpus or remove the file from the inputs")
  if engine == "auto":
    engine = choose_engine(corpus, settings)
  if engine == "python":
    return _python_engine(corpus, settings, ids)
  if engine == "numba":
    from mlperf_bert.data import fastinst
    return fastinst.numba_engine(corpus, settings, ids)
  raise ValueError(f"unknown engine {engine!r}")


# ---------------------------------------------------------------------------------------------- text -> shard

def make_instances(text_path, vocab_path, settings: PreprocessingSettings, *, engine: str = "auto",
                   progress: bool = False, tokenizer: Tokenizer | None = None) -> tuple[Corpus, Instances, Ids]:
  """Tokenize one text file and create its instances (reference order). progress: a tqdm bar on stderr."""
  from mlperf_bert.data.tokenizer import load_vocab
  settings.check()
  if tokenizer is None:
    tokenizer = Tokenizer(load_vocab(vocab_path))
  ids = special_ids(tokenizer.vocab)
  ids.vocab_sha256 = file_digest(vocab_path, "sha256") if vocab_path is not None else ""
  text_path = Path(text_path)
  try:
    size = text_path.stat().st_size
  except OSError as e:
    raise UserError(f"cannot read text file {text_path}: {e.strerror}; check the path or re-extract the corpus") from None
  if size == 0:
    raise UserError(f"text file {text_path} is empty: expected sentences, one per line, documents separated by "
                    "blank lines; re-extract the corpus (its md5 manifest should have caught this)")
  bar = None
  if progress:
    from tqdm import tqdm
    # leave=True: a job log (not a terminal) keeps the bar's final state, lines and lines/s
    bar = tqdm(total=0, unit=" lines", desc=f"tokenize {text_path.name}", leave=True, file=sys.stderr)

  def tick(done: int, total: int) -> None:
    bar.total = total
    bar.update(done - bar.n)

  try:
    corpus = tokenize_corpus(text_path, tokenizer, progress=tick if bar is not None else None)
  finally:
    if bar is not None:
      bar.close()
  return corpus, create_instances(corpus, settings, ids, engine=engine), ids


def write_instances(out_path, corpus: Corpus, inst: Instances, settings: PreprocessingSettings, ids: Ids,
                    eval_set: bool = False) -> dict:
  """Write instances as a framed span shard (atomic; `eval_set` marks the eval set) and its .sha256 sidecar;
  returns the shard stats."""
  from mlperf_bert.data.shards import write_shard_arrays, write_sidecar
  stats = write_shard_arrays(out_path, stream=corpus.stream, starts=inst.starts, lengths=inst.lengths, nsl=inst.nsl,
                             pred_offsets=inst.pred_offsets, positions=inst.positions, inputs=inst.inputs,
                             max_seq_length=settings.max_seq_length,
                             max_predictions_per_seq=settings.max_predictions_per_seq, framed=True,
                             cls_id=ids.cls, sep_id=ids.sep, vocab_size=ids.vocab_size, eval_set=eval_set,
                             source_sha256=corpus.sha256, settings_sha256=settings.sha256(),
                             vocab_sha256=ids.vocab_sha256)
  write_sidecar(out_path)
  stats.update(output=str(out_path), text_bytes=corpus.text_bytes, dropped_bytes=corpus.dropped_bytes,
               documents=len(corpus.doc_bounds), sentences=len(corpus.sent_offsets) - 1)
  return stats


def warn_dropped(log: Callable[[str], None], text_path, corpus: Corpus) -> None:
  """The job log says how many invalid UTF-8 bytes were dropped, as the reference's convert_to_unicode does."""
  if corpus.dropped_bytes:
    log(f"warning: {text_path}: dropped {corpus.dropped_bytes} bytes that are not valid UTF-8 (as the reference does)")


def summary_line(stats: dict) -> str:
  return (f"{stats['output']}: {stats['instances']} instances, {stats['tokens']} tokens, {stats['bytes']} bytes "
          f"({stats['bytes'] / max(stats['text_bytes'], 1):.2f}x the text's {stats['text_bytes']}), "
          f"{stats['dropped_bytes']} invalid UTF-8 bytes dropped, {stats['cpu_seconds']:.2f} CPU s")


def build_shard(text_path, vocab_path, out_path, *, max_seq_length: int = 512, max_predictions_per_seq: int = 76,
                masked_lm_prob: float = 0.15, short_seq_prob: float = 0.1, random_seed: int = 12345,
                dupe_factor: int = 10, engine: str = "auto", progress: bool = False,
                log: Callable[[str], None] | None = print, space_check: bool = True) -> dict:
  """One topic's text -> its shard (and `<shard>.sha256`), identical in content to the reference's TFRecord. With
  `space_check`, the planned shard must fit before the text is read (data/footprint.py).

  Returns stats: output, instances, tokens, predictions, bytes, text_bytes, dropped_bytes, documents,
  sentences, cpu_seconds. `log` gets the summary line (and a warning if invalid UTF-8 bytes were dropped).
  """
  import time
  from mlperf_bert.data.footprint import check_shard_space
  t0 = time.process_time()
  st = preprocessing_settings(max_seq_length, max_predictions_per_seq, masked_lm_prob, short_seq_prob, random_seed,
                              dupe_factor)
  if space_check:
    check_shard_space(text_path, out_path, max_seq_length=max_seq_length,
                      max_predictions_per_seq=max_predictions_per_seq, dupe_factor=dupe_factor)
  corpus, inst, ids = make_instances(text_path, vocab_path, st, engine=engine, progress=progress)
  stats = write_instances(out_path, corpus, inst, st, ids)
  stats["cpu_seconds"] = time.process_time() - t0
  if log is not None:
    warn_dropped(log, text_path, corpus)
    log(summary_line(stats))
  return stats

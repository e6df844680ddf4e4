"""Instances equal MLCommons' create_pretraining_data.py output (oracle digests), for every engine."""
import random

import numpy as np
import pytest

from conftest import DEMO
from feature_digest import digest
from mlperf_bert.cli import main
from mlperf_bert.errors import UserError
from mlperf_bert.data.corpus import PreprocessingSettings
from mlperf_bert.data.instances import (available_engines, build_shard, create_instances, special_ids,
                                   tokenize_corpus)
from mlperf_bert.data.shards import Shard, read_features
from mlperf_bert.data.tokenizer import Tokenizer, load_vocab

PART0 = "86fa9dff905a6f8a0f5c8339a0aa405aabb4a7e4adaa48d6958a353f733cdde6"
ENGINES = available_engines()


@pytest.fixture(scope="module")
def tok():
  return Tokenizer(load_vocab(DEMO / "vocab.txt"))


@pytest.mark.parametrize("engine", ENGINES)
def test_part0_matches_reference_digest(tmp_path, demo_text, engine):
  out = tmp_path / "part0.shard"
  logs = []
  st = build_shard(demo_text / "part-00000-of-00008", DEMO / "vocab.txt", out, engine=engine, log=logs.append)
  assert st["instances"] == 2673 and st["dropped_bytes"] == 0
  assert digest(read_features(out)) == PART0
  assert st["bytes"] <= 5 * st["text_bytes"]
  assert "2673 instances" in logs[-1] and "0 invalid UTF-8 bytes dropped" in logs[-1]
  assert (tmp_path / "part0.shard.sha256").exists()


def test_cli_shard_and_features_are_build_shard_and_read_features(tmp_path, demo_text):
  """The `shard` and `features` subcommands run the functions tested above (the eval.txt digest, EVAL_ALL, is checked
  once, in test_evalset.py): a small topic through the CLI equals build_shard + read_features."""
  text = tmp_path / "small.txt"
  text.write_text("\n\n".join((demo_text / "part-00000-of-00008").read_text().split("\n\n")[:20]) + "\n")
  out, npz, ref = tmp_path / "cli.shard", tmp_path / "cli.npz", tmp_path / "ref.shard"
  assert main(["shard", "--input", str(text), "--vocab", str(DEMO / "vocab.txt"), "--output", str(out),
               "--no-progress"]) == 0
  assert main(["features", str(out), "--npz", str(npz)]) == 0
  build_shard(text, DEMO / "vocab.txt", ref, log=None)
  want = read_features(ref)
  with np.load(npz, allow_pickle=False) as f:
    assert f["input_ids"].shape[0] == len(Shard(ref)) > 0 and digest(f) == digest(want)


@pytest.mark.parametrize("settings", [PreprocessingSettings(128, 20, 0.15, 0.1, 7, 2),
                                      PreprocessingSettings(64, 10, 0.3, 0.5, 1, 1),
                                      PreprocessingSettings(5, 2, 0.15, 0.9, 3, 1)])
def test_engines_agree_on_other_settings(tok, demo_text, settings):
  corpus = tokenize_corpus(demo_text / "part-00003-of-00008", tok)
  ids = special_ids(tok.vocab)
  results = [create_instances(corpus, settings, ids, engine=e) for e in ENGINES]
  inst = results[0]
  assert len(inst) > 0
  rows = inst.lengths.sum(axis=1) + 3
  assert rows.max() <= settings.max_seq_length and np.diff(inst.pred_offsets).max() <= settings.max_predictions_per_seq
  for other in results[1:]:
    for k in ("starts", "lengths", "nsl", "pred_offsets", "positions", "inputs"):
      np.testing.assert_array_equal(getattr(inst, k), getattr(other, k), err_msg=k)


def test_auto_engine_is_python_for_small_files(tok, demo_text):
  """`auto` runs the plain engine where numba's first-call compile would cost more than the work (a demo topic),
  and numba (when installed) for large files; both make the same instances (the tests above)."""
  import dataclasses
  from mlperf_bert.data.instances import PYTHON_ENGINE_MAX_WORK, choose_engine
  corpus = tokenize_corpus(demo_text / "part-00003-of-00008", tok)
  demo = PreprocessingSettings(128, 20, 0.15, 0.1, 12345, 10)
  assert len(corpus.stream) * demo.dupe_factor <= PYTHON_ENGINE_MAX_WORK
  assert choose_engine(corpus, demo) == "python"
  big = dataclasses.replace(demo, dupe_factor=PYTHON_ENGINE_MAX_WORK // len(corpus.stream) + 1)
  assert choose_engine(corpus, big) == ENGINES[0]
  if "numba" in ENGINES: assert choose_engine(corpus, big) == "numba"


def test_same_seed_same_bytes_other_seed_differs(tmp_path, demo_text):
  a, b, c = tmp_path / "a.shard", tmp_path / "b.shard", tmp_path / "c.shard"
  kw = dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2, log=None)
  build_shard(demo_text / "part-00001-of-00008", DEMO / "vocab.txt", a, **kw)
  build_shard(demo_text / "part-00001-of-00008", DEMO / "vocab.txt", b, **kw)
  build_shard(demo_text / "part-00001-of-00008", DEMO / "vocab.txt", c, random_seed=1, **kw)
  assert a.read_bytes() == b.read_bytes() != c.read_bytes()
  assert Shard(a).max_seq_length == 128


def test_bad_inputs(tmp_path):
  empty = tmp_path / "part-empty"
  empty.write_bytes(b"")
  with pytest.raises(UserError, match="part-empty.*empty"):
    build_shard(empty, DEMO / "vocab.txt", tmp_path / "x.shard", log=None)
  blank = tmp_path / "part-blank"
  blank.write_text("\n \n\t\n\x01\n")
  with pytest.raises(UserError, match="part-blank.*no document"):
    build_shard(blank, DEMO / "vocab.txt", tmp_path / "x.shard", log=None)
  with pytest.raises(UserError, match="missing-topic"):
    build_shard(tmp_path / "missing-topic", DEMO / "vocab.txt", tmp_path / "x.shard", log=None)
  with pytest.raises(UserError, match="max_seq_length"):
    build_shard(blank, DEMO / "vocab.txt", tmp_path / "x.shard", max_seq_length=4, log=None)
  assert not (tmp_path / "x.shard").exists()


def test_documents_and_invalid_bytes(tmp_path, tok):
  text = tmp_path / "topic"
  # blank (whitespace-only, incl. U+2028) lines split documents; lines with no tokens do not
  text.write_bytes("One two three.\nFour five.\n\nSix seven\n\u2028\nEight \xff nine.\n\x01\nTen.\n".encode()
                   .replace(b"\xc3\xbf", b"\xff"))
  corpus = tokenize_corpus(text, tok)
  assert corpus.dropped_bytes == 1
  assert corpus.doc_bounds.tolist() == [[0, 2], [2, 3], [3, 5]]
  logs = []
  st = build_shard(text, DEMO / "vocab.txt", tmp_path / "t.shard", max_seq_length=32, max_predictions_per_seq=5,
                   log=logs.append)
  assert st["dropped_bytes"] == 1 and "dropped 1 bytes" in logs[0] and "1 invalid UTF-8 bytes dropped" in logs[-1]
  assert st["documents"] == 3 and st["instances"] >= 30


@pytest.mark.skipif("numba" not in ENGINES, reason="numba not installed")
def test_bulk_words_replay_python_random_draw_for_draw():
  from mlperf_bert.data.fastinst import draw_ops, mt_state
  seed = 12345
  rng = random.Random(seed)
  plan = random.Random(99)
  ops, args, want = [], [], []
  for _ in range(3000):
    op = plan.choice([0, 1, 1, 2])
    if op == 0:
      ops.append(0); args.append((0, 0)); want.append(rng.random())
    elif op == 1:
      a = plan.randint(0, 5)
      b = a + plan.choice([0, 1, 2, 3, 7, 8, 100, 30521, 2**31 - 1, 2**31, 2**32 - 7])
      ops.append(1); args.append((a, b)); want.append(float(rng.randint(a, b)))
    else:
      m = plan.choice([0, 1, 2, 5, 64, 509])
      x = list(range(m)); rng.shuffle(x)
      ops.append(2); args.append((m, 0)); want.extend(float(v) for v in x)
  want.append(float(rng.getrandbits(32)))  # and the stream continues where Python's does
  mt, st = mt_state(seed)
  got = draw_ops(mt, st, np.array(ops, np.int64), np.array(args, np.int64))
  assert got.tolist() == want


def make_tricky_topic(demo_text, path):
  """Demo text with odd lines sprinkled in: Greek sigma, Zl/Zs-only and control-only lines, an overlong word, CJK,
  CR, stray invalid UTF-8 bytes, extra document breaks and a last one-line document."""
  rng = random.Random(3)
  src = (demo_text / "part-00005-of-00008").read_text(encoding="utf-8").split("\n")
  extras = ["ΟΔΥΣΣΕΥΣ ΣΑΣ.", "\u2028", "   ", "\x01\x02", "a" * 250, "日本語のテキスト。", "x\r", "\u00a0\u3000", "Σ",
            "naïve café"]
  out = []
  for line in src[:1500]:
    out.append(line)
    if rng.random() < 0.05:
      out.append(rng.choice(extras))
    if rng.random() < 0.03:
      out.append("")
  path.write_bytes("\n".join(out).encode() + b"\n\xff\xfe stray bytes \xe2\x82\n\nlast doc single line")
  return path


# Digests from running the MLCommons reference (create_pretraining_data.py + tokenization.py, unmodified logic)
# on make_tricky_topic's file (md5 f718af90a4a90fc6f2db6265c6e61cf9) with these settings.
TRICKY = [((128, 20, 0.15, 0.1, 7, 2), 925, "c839180f37e45a96d2ca9f5357854bff5fc2749309a7989e79f0daebc293c6f3"),
          ((64, 10, 0.3, 0.5, 1, 1), 967, "19e6591af16418516938647276759ff3d331dd7b461809391706e441a7599563")]


@pytest.mark.parametrize("engine", ENGINES)
def test_tricky_topic_matches_reference_with_other_settings(tmp_path, demo_text, engine):
  import hashlib
  topic = make_tricky_topic(demo_text, tmp_path / "tricky.txt")
  assert hashlib.md5(topic.read_bytes()).hexdigest() == "f718af90a4a90fc6f2db6265c6e61cf9"
  for (S, P, mlm, ssp, seed, dupe), n, want in TRICKY:
    out = tmp_path / f"t{S}.shard"
    st = build_shard(topic, DEMO / "vocab.txt", out, max_seq_length=S, max_predictions_per_seq=P, masked_lm_prob=mlm,
                     short_seq_prob=ssp, random_seed=seed, dupe_factor=dupe, engine=engine, log=None)
    assert st["instances"] == n and st["dropped_bytes"] == 4
    assert digest(read_features(out)) == want


@pytest.mark.slow
def test_27mb_topic_streams_under_1gb(tmp_path, demo_text):
  """One job on a 27 MB topic (demo text repeated) keeps its peak RSS under 1 GB and its shard under 5x the text."""
  import os, sys
  block = b"".join(p.read_bytes().rstrip(b"\n") + b"\n\n" for p in sorted(demo_text.glob("part-*")))
  topic = tmp_path / "big-topic"
  topic.write_bytes(block * (27 * 2**20 // len(block) + 1))
  out = tmp_path / "big.shard"
  pid = os.fork()
  if pid == 0:  # a fresh process, as a workflow job
    try:
      os.execv(sys.executable, [sys.executable, "-m", "mlperf_bert", "shard", "--input", str(topic), "--vocab",
                                str(DEMO / "vocab.txt"), "--output", str(out), "--no-progress"])
    finally:
      os._exit(127)
  _, status, ru = os.wait4(pid, 0)
  assert os.waitstatus_to_exitcode(status) == 0
  assert ru.ru_maxrss * 1024 < 2**30, f"peak RSS {ru.ru_maxrss / 1024:.0f} MB"
  assert out.stat().st_size <= 5 * topic.stat().st_size
  sh = Shard(out)
  assert len(sh) > 150000 and sh[len(sh) - 1]["input_mask"].sum() > 0

"""audit/chain.py on a small real basedir (real shards built from demo text, a real train record): a clean chain
passes; each broken link (text -> shard, settings, duplicates, shard -> train record, train record -> log) is one
FAIL row naming that link and the file. A version-1 shard (no source record) is still read, and named."""
import shutil, struct, zlib
from pathlib import Path

import pytest
from tiny_shards import TINY_PRE, topic_tree

from mlperf_bert.constants import platform_path
from mlperf_bert.audit.chain import check_chain
from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.provenance import hashes
from mlperf_bert.data.evalset import build_evalset
from mlperf_bert.data.instances import build_shard
from mlperf_bert.data.shards import HEADER_SIZE, Shard, read_features, write_sidecar
from mlperf_bert.train.record import publish_result, read_record, record_path

DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo"
PRE = TINY_PRE
TOPICS = [f"part-0000{i}-of-00003" for i in range(3)]
LOG = (':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
       '"value": 0.0470, "metadata": {"epoch_num": 64}}\n')


def _settings(seed: int):
  """The resolved settings of the cpu platform for `seed` (what the train process records)."""
  from mlperf_bert.train.hparams import load_platform, resolve
  return resolve(load_platform(platform_path(DEMO.parents[1], "cpu")), seed=seed)

@pytest.fixture(scope="module")
def clean(tmp_path_factory, demo_text):
  """A basedir: results4/ (3 topics of 80 lines, eval.txt), download/vocab.txt, shards/, eval/, and a result log
  with the train record a finished train process writes."""
  base = tmp_path_factory.mktemp("chain") / "base"
  topic_tree(base, demo_text, TOPICS, DEMO / "vocab.txt")
  (base / "results4/eval.txt").write_text("\n".join((demo_text / "eval.txt").read_text().split("\n")[:60]) + "\n")
  build_evalset(base / "results4/eval.txt", base / "download/vocab.txt", base / "eval/eval.shard", num_examples=20,
                log=None, **PRE)
  work = base / "logs" / "partial.log"
  work.parent.mkdir()
  work.write_text(LOG)
  shards = [Shard(base / "shards" / f"{t}.shard") for t in TOPICS]
  publish_result(work, base / "results/cpu/result_bert_0.log", shards=shards, eval_shard=Shard(base / "eval/eval.shard"),
                 init_weights=None, bert_config=DEMO / "bert_config.json", settings=_settings(0), status="success",
                 accuracies=[(1, 0.0470)])
  return base


def audit_of(base: Path, pre=PRE) -> list[tuple[str, str, str]]:
  a = Audit(str(base), "basedir", "5.0.0")
  check_chain(a, base, sorted(base.glob("results/*/result_bert_*.log")), hashes, pre)
  return [(r.status, r.subject, r.reason) for r in a.rows]


def fails(rows):
  return [(s, r) for st, s, r in rows if st == "FAIL"]


@pytest.fixture
def tree(clean, tmp_path):
  dst = tmp_path / "base"
  shutil.copytree(clean, dst)
  return dst


def test_record_holds_what_the_train_process_read_and_wrote(clean):
  rec = read_record(clean / "results/cpu/result_bert_0.train.json")
  assert rec["log"]["sha256"] == hashes(clean / "results/cpu/result_bert_0.log")["sha256"]
  assert [e["path"] for e in rec["shards"]] == [f"../../shards/{t}.shard" for t in TOPICS]  # relative: no basedir
  for e in rec["shards"]:
    p = clean / "results/cpu" / e["path"]
    assert e["sha256"] == hashes(p)["sha256"] and e["source_sha256"] == hashes(clean / "results4" / p.stem)["sha256"]
  assert rec["eval_set"]["sha256"] == hashes(clean / "eval/eval.shard")["sha256"]
  assert rec["eval_accuracy"] == [[1, 0.047]] and str(clean) not in (clean / "results/cpu/result_bert_0.train.json").read_text()


def test_clean_chain_passes(clean):
  rows = audit_of(clean)
  assert not fails(rows), rows
  reasons = " | ".join(r for _, _, r in rows)
  for link in ("text -> shard: each of 4 shard(s)", "no duplicate shards", "shard -> train record: the 3 shard(s)",
               "train record -> log: the log is byte for byte"):
    assert link in reasons, rows


def test_shard_copied_over_another_names_its_text_the_duplicate_and_the_record(tree):
  a, b = tree / f"shards/{TOPICS[1]}.shard", tree / f"shards/{TOPICS[2]}.shard"
  shutil.copy(b, a); write_sidecar(a)   # the whitewash: the sidecar remade
  f = fails(audit_of(tree))
  rel = f"shards/{TOPICS[1]}.shard"
  assert any(s == rel and r.startswith("text -> shard: built from other text") and f"that of results4/{TOPICS[2]}" in r
             for s, r in f), f
  assert any(r.startswith("duplicate shards:") and rel in r and f"shards/{TOPICS[2]}.shard" in r for _, r in f), f
  assert any(s == rel and r.startswith("shard -> train record: sha256 now") for s, r in f), f


def test_edited_text_breaks_text_to_shard(tree):
  t = tree / "results4" / TOPICS[0]
  t.write_text(t.read_text().replace("the", "teh", 1))
  f = fails(audit_of(tree))
  assert f == [(f"shards/{TOPICS[0]}.shard", f[0][1])] and "text -> shard: built from other text" in f[0][1], f
  assert "no text present" in f[0][1]


def test_shard_of_other_settings_is_named(tree):
  t = TOPICS[0]
  build_shard(tree / "results4" / t, tree / "download/vocab.txt", tree / f"shards/{t}.shard", log=None,
              **dict(PRE, dupe_factor=2))
  f = fails(audit_of(tree))
  assert any(s == f"shards/{t}.shard" and r.startswith("text -> shard: built with another settings") for s, r in f), f
  # and it is not what the train process read
  assert any(s == f"shards/{t}.shard" and r.startswith("shard -> train record: sha256 now") for s, r in f), f


def test_extra_and_missing_shards_break_shard_to_record(tree):
  extra = tree / "shards/part-00009-of-00003.shard"
  shutil.copy(tree / f"shards/{TOPICS[0]}.shard", extra)
  (tree / f"shards/{TOPICS[2]}.shard").unlink()
  f = fails(audit_of(tree))
  assert ("shards/part-00009-of-00003.shard", f[-1][1]) in f and "not among the files the train process read" in f[-1][1]
  assert any(s == f"shards/{TOPICS[2]}.shard" and "the train process read this shard, now missing" in r
             for s, r in f), f


def test_edited_log_breaks_record_to_log_and_names_the_accuracy(tree):
  log = tree / "results/cpu/result_bert_0.log"
  log.write_text(log.read_text().replace('"value": 0.0470', '"value": 0.74'))
  f = fails(audit_of(tree))
  assert len(f) == 1 and f[0][0] == "results/cpu/result_bert_0.log", f
  assert f[0][1].startswith("train record -> log: the log's sha256")
  assert "eval_accuracy #1: the log says 0.74, the train process measured 0.047" in f[0][1]


def test_missing_or_foreign_record(tree):
  rp = record_path(tree / "results/cpu/result_bert_0.log")
  rp.write_text('{"schema": "something else"}')
  f = fails(audit_of(tree))
  assert len(f) == 1 and f[0][1].startswith("shard -> train record:") and "forcerun train" in f[0][1], f
  rp.unlink()
  f = fails(audit_of(tree))
  assert f == [("results/cpu/result_bert_0.log", f[0][1])] and "no result_bert_0.train.json" in f[0][1], f


def test_version_1_shard_is_read_and_named(tree):
  """A shard written before shards recorded their source (format 1, a 128-byte header) still reads; the chain says
  it records no source."""
  p = tree / f"shards/{TOPICS[0]}.shard"
  data = p.read_bytes()
  head = bytearray(data[:72]); struct.pack_into("<II", head, 8, 1, 128)
  head = bytes(head).ljust(124, b"\0"); head += struct.pack("<I", zlib.crc32(head))
  v1 = tree / "v1.shard"
  v1.write_bytes(head + data[HEADER_SIZE:])
  sh = Shard(v1)
  assert sh.version == 1 and sh.source_sha256 is None and sh.vocab_size == 30522
  assert all((a == b).all() for a, b in zip(read_features(v1).values(), read_features(p).values()))
  shutil.move(v1, p)
  f = fails(audit_of(tree))
  assert any(s == f"shards/{TOPICS[0]}.shard" and r.startswith("text -> shard: the shard records no source text "
                                                               "(format version 1") for s, r in f), f


def test_a_record_that_cannot_be_written_leaves_no_log(tmp_path, clean):
  work = tmp_path / "w.log"; work.write_text(LOG)
  out = tmp_path / "r" / "result_bert_0.log"
  record_path(out).mkdir(parents=True)  # a directory where the record goes: its rename fails
  with pytest.raises(Exception):
    publish_result(work, out, shards=[], eval_shard=Shard(clean / "eval/eval.shard"), init_weights=None,
                   bert_config=DEMO / "bert_config.json", settings=_settings(0), status="success", accuracies=[])
  assert not out.exists() and work.exists()

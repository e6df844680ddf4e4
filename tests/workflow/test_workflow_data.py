"""The data half of the workflow, run for real with Snakemake on the bundled demo corpus and on bad corpora."""
import hashlib, os, re
from pathlib import Path

import pytest

from workflow_helpers import REPO, DEMO, demo_topic, make_corpus, snakemake, tree_state, write_config

BASE = "results/demo"
TOPIC3 = f"{BASE}/shards/part-00003-of-00008.shard"
DATA_TARGETS = [f"{BASE}/shards/SHA256SUMS", f"{BASE}/eval/eval.shard"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
  """The demo's data targets, built once with --cores 2 in a scratch working directory."""
  work = tmp_path_factory.mktemp("demo")
  snakemake(work, "--cores", "2", *DATA_TARGETS)
  return work


@pytest.mark.slow
def test_demo_builds_verified_text_shards_and_evalset(demo):
  base = demo / BASE
  shards = sorted((base / "shards").glob("*.shard"))
  assert [p.name for p in shards] == [f"part-{i:05d}-of-00008.shard" for i in range(8)]
  sums = (base / "shards" / "SHA256SUMS").read_text().splitlines()
  assert len(sums) == 8
  for line in sums:
    digest, name = line.split()
    assert hashlib.sha256((base / "shards" / name.lstrip("*")).read_bytes()).hexdigest() == digest
  assert sorted(p.name for p in (base / "verified").iterdir()) == sorted(
    [f"part-{i:05d}-of-00008.ok" for i in range(8)] + ["eval.txt.ok"])
  from mlperf_bert.data.shards import Shard
  ev = Shard(base / "eval" / "eval.shard")
  assert len(ev) == 10000 and ev.max_seq_length == 128 and ev.max_predictions_per_seq == 20
  # every rule has a log; the shard logs carry tqdm progress
  for rule in ("download", "extract", "verify_topic", "verify_eval", "shard", "shard_checksums", "evalset"):
    assert list((base / "logs" / rule).glob("*.log")), rule
  shard_log = (base / "logs" / "shard" / "part-00003-of-00008.log").read_text()
  assert "100%|" in shard_log and "lines/s" in shard_log, shard_log


@pytest.mark.slow
def test_dry_run_names_exactly_the_edited_topics_chain(demo):
  text = demo / BASE / "results4" / "part-00005-of-00008"
  original = text.read_bytes()
  st = text.stat()
  try:
    text.write_bytes(original.replace(b"the", b"teh", 1))
    r = snakemake(demo, "-n", "--cores", "2", *DATA_TARGETS)
    out = r.stdout + r.stderr
    jobs = [l.split()[-1].rstrip(":") for l in out.splitlines() if l.startswith(("rule ", "localrule ", "checkpoint "))]
    assert sorted(jobs) == ["shard", "verify_topic"], out
    assert "Updated input files: results/demo/results4/part-00005-of-00008" in out, out
  finally:
    text.write_bytes(original)
    os.utime(text, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.slow
def test_rebuild_one_topic_changes_nothing_else(demo):
  base = demo / BASE
  before = tree_state(base)
  # the documented command (README): force one topic's shard, nothing else
  snakemake(demo, "--cores", "2", "--force", TOPIC3)
  after = tree_state(base)
  changed = sorted(k for k in before if before[k] != after[k])
  rebuilt = {"shards/part-00003-of-00008.shard", "shards/part-00003-of-00008.shard.sha256"}
  assert set(changed) <= rebuilt and "shards/part-00003-of-00008.shard" in [
    k for k in before if before[k][1] != after[k][1]], changed
  assert all(before[k][0] == after[k][0] for k in rebuilt)  # byte-identical rebuild
  assert set(after) == set(before)
  r = snakemake(demo, "-n", "--cores", "2", *DATA_TARGETS)
  assert "Nothing to be done" in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.slow
def test_same_seed_same_bytes_with_one_core(demo, tmp_path):
  snakemake(tmp_path, "--cores", "1", f"{BASE}/shards/SHA256SUMS")
  assert (tmp_path / BASE / "shards" / "SHA256SUMS").read_bytes() == (demo / BASE / "shards" / "SHA256SUMS").read_bytes()


@pytest.mark.slow
def test_bad_topics_fail_alone_under_keep_going(tmp_path):
  good = demo_topic(0)[:60000]
  bad_utf8 = demo_topic(1)[:60000].replace(b"the ", b"th\xff\xfe ", 7)
  corpus = make_corpus(tmp_path / "corpus", {
    "part-00000-of-00004": good,
    "part-00001-of-00004": demo_topic(2)[:60000],   # manifest says otherwise below
    "part-00002-of-00004": bad_utf8,
    "part-00003-of-00004": b"",                     # empty topic
  }, manifest_override={"part-00001-of-00004": "0123456789abcdef0123456789abcdef"})
  base = tmp_path / "run"
  cfg = write_config(tmp_path / "cfg.yaml", base, corpus, dupe_factor=1)
  r = snakemake(tmp_path, "--cores", "2", "--keep-going", str(base / "shards" / "SHA256SUMS"),
                configfile=cfg, check=False)
  out = r.stdout + r.stderr
  assert r.returncode != 0
  shards = base / "shards"
  assert (shards / "part-00000-of-00004.shard").exists(), out[-6000:]
  assert (shards / "part-00002-of-00004.shard").exists()
  assert not (shards / "part-00001-of-00004.shard").exists()
  assert not (shards / "part-00003-of-00004.shard").exists()
  log1 = (base / "logs" / "verify_topic" / "part-00001-of-00004.log").read_text()
  assert "MD5 mismatch" in log1 and "0123456789abcdef0123456789abcdef" in log1
  assert "MD5 mismatch" in out  # also on the console
  log3 = (base / "logs" / "shard" / "part-00003-of-00004.log").read_text()
  assert "part-00003-of-00004" in log3 and "empty" in log3.lower()
  log2 = (base / "logs" / "shard" / "part-00002-of-00004.log").read_text()
  assert "14 bytes" in log2 or "14 invalid" in log2, log2[-2000:]  # 7 × b"\xff\xfe" dropped
  leftovers = [p for p in base.rglob("*") if p.name.endswith(".part") or ".partial" in p.name]
  assert leftovers == []


@pytest.mark.slow
def test_vocab_without_special_tokens_is_refused(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(l for l in (DEMO / "vocab.txt").read_text().splitlines(True) if l.strip() != "[MASK]"))
  corpus = make_corpus(tmp_path / "corpus", {"part-00000-of-00001": demo_topic(0)[:20000]})
  base = tmp_path / "run"
  cfg = write_config(tmp_path / "cfg.yaml", base, corpus, vocab=vocab, dupe_factor=1)
  r = snakemake(tmp_path, "--cores", "1", str(base / "shards" / "SHA256SUMS"), configfile=cfg, check=False)
  assert r.returncode != 0
  out = r.stdout + r.stderr
  assert "[MASK]" in out and "vocab.txt" in out
  assert not list((base / "shards").glob("*.shard")) if (base / "shards").exists() else True


@pytest.mark.slow
def test_truncated_tarball_stops_at_download(tmp_path):
  corpus = make_corpus(tmp_path / "corpus", {"part-00000-of-00001": demo_topic(0)})
  data = corpus["tarball"].read_bytes()
  corpus["tarball"].write_bytes(data[: len(data) // 3])
  base = tmp_path / "run"
  cfg = write_config(tmp_path / "cfg.yaml", base, corpus)
  r = snakemake(tmp_path, "--cores", "1", str(base / "shards" / "SHA256SUMS"), configfile=cfg, check=False)
  assert r.returncode != 0
  assert "corrupt or truncated" in r.stdout + r.stderr
  assert not (base / "results4").exists() and not (base / "results4.files").exists()
  # with no published md5, the download's own check (the archive lists to its end) refuses it
  assert "results_text.tar.gz: the archive is corrupt or truncated" in r.stdout + r.stderr
  assert not (base / "download" / "results_text.tar.gz").exists()


def test_bad_config_is_named_before_anything_runs(tmp_path):
  r = snakemake(tmp_path, "-n", "--config", "max_seq_length=128", check=False)
  assert r.returncode != 0
  out = r.stdout + r.stderr
  assert "unknown key 'max_seq_length'" in out and "Fix these keys" in out
  r = snakemake(tmp_path, "-n", "--config", "eval_examples=lots", check=False)
  assert "'eval_examples' must be of type integer" in r.stdout + r.stderr


@pytest.mark.slow
def test_touched_tarball_reextracts_but_rebuilds_nothing(demo):
  """A restore or rsync touches the 1.5 MB tarball (too big for Snakemake's checksum): extract reruns, every
  extracted file keeps its time, so no topic is verified or sharded again."""
  base = demo / BASE
  before = tree_state(base)
  tar = base / "download" / "results_text.tar.gz"
  os.utime(tar)
  r = snakemake(demo, "--cores", "2", *DATA_TARGETS)
  out = r.stdout + r.stderr
  jobs = [l.split()[-1].rstrip(":") for l in out.splitlines() if re.match(r"(local)?(rule|checkpoint) \S+:$", l)]
  assert jobs == ["extract"], out  # run: nothing after the checkpoint (planned before it: its maybe-dependents)
  after = tree_state(base)
  assert {k for k in before if before[k] != after[k]} == {"download/results_text.tar.gz", "results4.files"}
  assert all(before[k][0] == after[k][0] for k in before)

"""audit/reexec.py, the cheap parts: the sample's order repeats with its seed and covers every item; the batch
comparison (bit-exact, or within the band across devices); a shard rebuilt from its text passes, a well-formed shard
whose header claims a text it was not built from fails; a record whose batches do not give the log's accuracy fails
before anything is evaluated; a record without final weights is "not re-executable", never PASS.
(The whole re-execution, eval included, runs on the demo tree: tests/workflow/test_end_to_end.py.)"""
import hashlib, json, shutil
from pathlib import Path

import pytest
from tiny_shards import TINY_PRE, topic_tree
from conftest import FIXTURES

from mlperf_bert.audit.provenance import hashes
from mlperf_bert.audit.reexec import BAND, Budget, batches_agree, catch_chance, draw_order, draw_seed, rebuild_shard, \
  reexecute_data, reexecute_eval
from mlperf_bert.audit.rows import Audit
from mlperf_bert.data.instances import make_instances, write_instances
from mlperf_bert.data.corpus import preprocessing_settings

DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo"
PRE = TINY_PRE
TOPICS = ["part-00000-of-00002", "part-00001-of-00002"]
LOG = (':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
       '"value": %r, "metadata": {"epoch_num": 64}}\n')


def test_draw_order_is_a_permutation_repeated_by_its_seed():
  a = draw_order(50, 1234, "shards")
  assert sorted(a) == list(range(50)) and a == draw_order(50, 1234, "shards")
  assert a != draw_order(50, 1235, "shards") and a != draw_order(50, 1234, "result_bert_0.log")
  assert draw_seed() != draw_seed() or draw_seed() != draw_seed()  # 32 random bits: two equal pairs in a row is 2**-64
  assert catch_chance(3, 8).startswith("a change to any one of the 8 is caught with probability 3/8 (missed with "
                                       "probability 62.5%")


def test_batch_comparison_exact_and_within_the_band():
  rec = [30.0, 100.0, 0.3]
  assert batches_agree(rec, [30.0, 100.0, 0.3], exact=True) == ""
  assert "on the weights, the record says 31/100" in batches_agree([31.0, 100.0, 0.31], rec, exact=True)
  assert batches_agree(rec, [30.0, 100.0, 0.30000001], exact=True)          # bit-exact means bit-exact
  assert batches_agree(rec, [31.0, 100.0, 0.31], exact=False) == ""          # another device: a flipped tie
  assert batches_agree(rec, [30.0 + 100 * BAND + 1, 100.0, 0.33], exact=False)
  assert batches_agree(rec, [30.0, 99.0, 0.3], exact=False)                  # totals never move
  assert batches_agree([72.0, 100.0, 0.72], [5.0, 100.0, 0.05], exact=False)  # a forged accuracy


@pytest.fixture(scope="module")
def base(tmp_path_factory, demo_text):
  """shards/ of two 80-line topics built from results4/ with PRE and download/vocab.txt."""
  b = tmp_path_factory.mktemp("reexec") / "base"
  topic_tree(b, demo_text, TOPICS, DEMO / "vocab.txt")
  return b


def test_rebuilt_shards_pass_and_a_shard_lying_about_its_text_fails(base, tmp_path):
  a = Audit(str(base), "basedir", "5.0.0")
  reexecute_data(a, base, PRE, None, seed=5, budget=Budget(coverage=1.0), deadline=None, hasher=hashes)
  assert [(r.status, r.subject) for r in a.rows] == [("PASS", "shards")], a.rows
  assert "2 of 2 topics' shards (drawn with seed 5) rebuilt" in a.rows[0].reason and "byte-identical" in a.rows[0].reason
  # a forged shard: well-formed, its header names part-00000's text and the settings, its body is part-00001's
  forged = tmp_path / "base"
  shutil.copytree(base, forged)
  st = preprocessing_settings(**PRE)
  corpus, inst, ids = make_instances(forged / "results4" / TOPICS[1], forged / "download/vocab.txt", st)
  corpus.sha256 = hashes(forged / "results4" / TOPICS[0])["sha256"]
  write_instances(forged / "shards" / f"{TOPICS[0]}.shard", corpus, inst, st, ids)
  status, why = rebuild_shard(forged, forged / "shards" / f"{TOPICS[0]}.shard", PRE, tmp_path, hashes)
  assert status == "FAIL" and f"rebuilt from results4/{TOPICS[0]} with the recorded settings" in why, why
  # other settings than the header's: the chain's FAIL says so; the re-execution says it cannot redo it
  status, why = rebuild_shard(base, base / "shards" / f"{TOPICS[1]}.shard", dict(PRE, dupe_factor=2), tmp_path, hashes)
  assert status == "WARN" and why.startswith("not re-executable: its header's settings"), why


def _tree(tmp_path: Path, logged: float, batches, weights: bool = True) -> Path:
  """results/cpu/result_bert_0.log (one eval_accuracy) and a train record holding `batches` (and weights)."""
  from mlperf_bert.train.record import SCHEMA
  d = tmp_path / "results" / "cpu"
  d.mkdir(parents=True)
  (d / "result_bert_0.log").write_text(LOG % logged)
  (d / "result_bert_0.final.safetensors").write_bytes(b"weights")
  rec = {"schema": SCHEMA, "hparams": {}}
  if weights:
    rec["final_weights"] = {"path": "result_bert_0.final.safetensors", "bytes": 7,
                            "sha256": hashlib.sha256(b"weights").hexdigest()}
    rec["last_eval"] = {"step": 4, "evals_done": 1, "metric": "pooled", "batch_size": 8, "device": "CPU",
                        "devices": 1, "float_type": "float32", "batches": batches}
  (d / "result_bert_0.train.json").write_text(json.dumps(rec))
  return d / "result_bert_0.log"


def test_a_logged_accuracy_the_recorded_batches_do_not_give_fails(tmp_path):
  """The forger who edits the log and the record's accuracy but not its batches: FAIL before any eval."""
  log = _tree(tmp_path, 0.72, [[3.0, 40.0, 0.075], [2.0, 40.0, 0.05]])
  a = Audit(str(tmp_path), "basedir", "5.0.0")
  reexecute_eval(a, tmp_path, log, seed=1, budget=Budget(seconds=10), deadline=None, hasher=hashes)
  assert [r.status for r in a.rows] == ["FAIL"], a.rows
  assert "the log's last eval_accuracy is 0.72, the 2 eval batches in result_bert_0.train.json give 0.0625" \
    in a.rows[0].reason, a.rows[0].reason


def test_a_record_without_final_weights_is_not_re_executable(tmp_path):
  log = _tree(tmp_path, 0.0625, None, weights=False)
  a = Audit(str(tmp_path), "basedir", "5.0.0")
  reexecute_eval(a, tmp_path, log, seed=1, budget=Budget(seconds=10), deadline=None, hasher=hashes)
  assert [r.status for r in a.rows] == ["WARN"] and a.rows[0].reason.startswith("not re-executable: "), a.rows


def test_a_received_submission_is_not_re_executable(tmp_path):
  """tinycorp's published v4.1 tinybox_red (logs only): the table says re-execution was not possible, not PASS."""
  from mlperf_bert.audit.command import run_audit
  org = tmp_path / "tinycorp"
  src = FIXTURES / "tinycorp-v4.1"
  shutil.copytree(src / "systems", org / "systems")
  shutil.copytree(src / "results" / "tinybox_red", org / "results" / "tinybox_red")
  for j in (org / "systems").glob("*.json"):
    if j.stem != "tinybox_red": j.unlink()
  a = run_audit(org, ruleset="4.1.0")
  rows = [r for r in a.rows if r.check == "re-execution"]
  assert [r.status for r in rows] == ["SKIP"] and rows[0].reason.startswith("not re-executable: a received"), rows

"""audit/reexec.py, the cheap parts: the sample's order repeats with its seed and covers every item; the batch
comparison (bit-exact, or within the batch's near ties across devices) and the near-tie count itself; a shard rebuilt from its text passes, a well-formed shard
whose header claims a text it was not built from fails; a record whose batches do not give the log's accuracy fails
before anything is evaluated; a record without final weights is "not re-executable", never PASS.
(The whole re-execution, eval included, runs on the demo tree: tests/workflow/test_end_to_end.py.)"""
import hashlib, json, shutil
from pathlib import Path

import pytest
from tiny_shards import TINY_PRE, topic_tree
from conftest import FIXTURES

from mlperf_bert.audit.provenance import hashes
from mlperf_bert.audit.reexec import REL_EPS, Budget, allowed, batches_agree, catch_chance, draw_order, draw_seed, \
  rebuild_shard, reexecute_data, reexecute_eval, whole_eval_band
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


def test_batch_comparison_exact_and_within_the_near_ties():
  rec = [30.0, 100.0, 0.3]
  assert batches_agree(rec, [30.0, 100.0, 0.3], None) == ""
  assert "on the weights, the record says 31/100" in batches_agree([31.0, 100.0, 0.31], rec, None)
  assert batches_agree(rec, [30.0, 100.0, 0.30000001], None)                 # bit-exact means bit-exact
  # another device: a batch may move by its near ties (weight 1 each here; 2 of its 100 labels are near ties)
  assert batches_agree(rec, [31.0, 100.0, 0.31], [1.0, 1.0, 100.0]) == ""    # one near tie flipped
  assert batches_agree(rec, [32.0, 100.0, 0.32], [2.0, 2.0, 100.0]) == ""
  why = batches_agree(rec, [32.0, 100.0, 0.32], [1.0, 1.0, 100.0])          # two moved, one could
  assert "1 near-tied prediction(s) could flip on another device, so at most 1 correct may differ" in why
  assert batches_agree(rec, [31.0, 100.0, 0.31], [0.0, 0.0, 100.0])           # no near tie: nothing may move
  assert batches_agree(rec, [30.0, 99.0, 0.3], [5.0, 5.0, 100.0])             # totals never move
  assert batches_agree([32.0, 100.0, 0.32], [30.0, 100.0, 0.30], [0.0, 0.0, 100.0])  # 2 % more correct: no band
  assert allowed(None) == (0.0, 0.0) and allowed([3.0, 2.0, 50.0]) == (3.0, 0.04 + 1e-6)
  assert whole_eval_band([(2.0, 0.02), (0.0, 1e-6)], [100.0, 100.0], "pooled") == pytest.approx(0.01 + 1e-6)
  assert whole_eval_band([(2.0, 0.02), (0.0, 0.0)], [100.0, 100.0], "tinygrad") == pytest.approx(0.01)
  assert REL_EPS["float32"] < REL_EPS["half"] < REL_EPS["bfloat16"]


def test_near_ties_count_only_predictions_whose_correctness_can_flip():
  """near_ties (train/evidence.py): a prediction counts when its label's logit and the best other logit lie within
  rel_eps of its largest |logit|, whether it is right (a close runner-up) or wrong (a close label); two wrong tokens
  that nearly tie do not count; the masked-LM weights and padding rows weigh them as `correct` does, tinygrad's
  accuracy counts the labels that are not 0."""
  import numpy as np
  from mlperf_bert.train.evidence import near_ties
  logits = np.zeros((2, 3, 5), np.float32)
  logits[0, 0, 1:3] = [10.0, 9.99]          # label 1 right, the runner-up 1e-3 of 10 behind: near
  logits[0, 1, 1:3] = [10.0, 5.0]           # label 1 right by far
  logits[0, 2, 1:3] = [9.995, 10.0]         # label 1 wrong, 5e-4 of 10 short: near
  logits[1, 0, 1:4] = [1.0, 10.0, 9.999]    # label 1 wrong by far; two other tokens nearly tie: not near
  logits[1, 1, 1:3] = [10.0, 10.0]          # an exact tie: near
  logits[1, 2, 1:3] = [10.0, 9.999]         # near, with masked-LM weight 0 and label 0 (a padded prediction)
  ids = np.array([[1, 1, 1], [1, 1, 0]])
  logits[1, 2] = np.roll(logits[1, 2], -1)  # its margins as label 0 sees them
  batch = {"masked_lm_ids": ids, "masked_lm_weights": np.array([[1, 1, 1], [1, 1, 0.]])}
  ones = np.ones(2, np.float32)
  assert near_ties(logits, batch, ones, rel_eps=2e-3) == [3.0, 3.0, 5.0]
  assert near_ties(logits, batch, np.array([1, 0], np.float32), rel_eps=2e-3) == [2.0, 3.0, 5.0]  # row 1 padding
  assert near_ties(logits, batch, ones, rel_eps=1e-5) == [1.0, 1.0, 5.0]  # only the exact tie


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
  from mlperf_bert.train.record import RECORD_SCHEMA
  d = tmp_path / "results" / "cpu"
  d.mkdir(parents=True)
  (d / "result_bert_0.log").write_text(LOG % logged)
  (d / "result_bert_0.final.safetensors").write_bytes(b"weights")
  rec = {"schema": RECORD_SCHEMA, "settings": {}}
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


def test_the_workers_are_subcommands_of_the_one_cli(tmp_path):
  """The audit starts its workers as `python -m mlperf_bert reexecute-eval|reexecute-segment REQUEST.json`
  (run_worker): a record they cannot read is one {"error"} JSON line naming the file, before any device is opened. (Their full runs, on the demo tree: tests/workflow/test_end_to_end.py.)"""
  from mlperf_bert.audit.reexec import run_worker
  missing = tmp_path / "result_bert_0.train.json"
  for command, extra in (("reexecute-eval", {"indices": [0]}), ("reexecute-segment", {"from": 0, "to": 2})):
    lines, tail, stopped = run_worker(command, {"record": str(missing), "device": "CPU", "devices": 1, **extra}, None)
    assert not stopped and len(lines) == 1, (command, lines, tail)
    assert lines[0]["error"].startswith(f"{missing}: not a readable train record"), (command, lines)

"""The chain's first links on a small real basedir: download -> text (audit/text.py: each file of results4/ against the
download's md5 list, that list against the md5 the config pins, eval.txt against eval.md5) and the eval set proved
from eval.txt (audit/rebuild.py rebuilds it; audit/chain.py wants the record's eval set to be the tree's own).
(The same forgeries on a tree the workflow built: tests/workflow/test_end_to_end.py, its last section.)"""
import hashlib, json, shutil
from pathlib import Path

import pytest
from tiny_shards import TINY_PRE, topic_tree, visible_eval_set

from mlperf_bert.audit.bounded import Budget
from mlperf_bert.audit.chain import check_chain
from mlperf_bert.audit.provenance import hashes
from mlperf_bert.audit.rebuild import reexecute_data
from mlperf_bert.audit.reexec import reexecute_eval
from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.text import check_text
from mlperf_bert.data.evalset import build_evalset
from mlperf_bert.data.shards import Shard
from mlperf_bert.train.record import RECORD_SCHEMA

DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo"
TOPICS = ["part-00000-of-00002", "part-00001-of-00002"]
MANIFEST = "bert_reference_results_text_md5.txt"
EVAL_EXAMPLES = 20
md5 = lambda b: hashlib.md5(b).hexdigest()


@pytest.fixture(scope="module")
def clean(tmp_path_factory, demo_text):
  """results4/ (2 topics of 80 lines, eval.txt of 60), its md5 list, eval.md5 (outside the tree), the shards and
  the eval set built from them; (basedir, config) as the audit resolves the config."""
  root = tmp_path_factory.mktemp("text")
  base = topic_tree(root / "base", demo_text, TOPICS, DEMO / "vocab.txt")
  ev = "\n".join((demo_text / "eval.txt").read_text().split("\n")[:60]) + "\n"
  (base / "results4/eval.txt").write_text(ev)
  build_evalset(base / "results4/eval.txt", base / "download/vocab.txt", base / "eval/eval.shard",
                num_examples=EVAL_EXAMPLES, log=None, **TINY_PRE)
  listing = "".join(f"{md5((base / 'results4' / t).read_bytes())}  ./{t}\n" for t in TOPICS + ["eval.txt"])
  (base / "download" / MANIFEST).write_text(listing)
  (root / "eval.md5").write_text("".join(md5(a.rstrip().encode()) + "\n" for a in ev.split("\n\n") if a.strip()))
  return base, {"eval_md5": str(root / "eval.md5"), "sources": {MANIFEST: {"md5": md5(listing.encode())}}}


@pytest.fixture
def tree(clean, tmp_path):
  shutil.copytree(clean[0], tmp_path / "base")
  return tmp_path / "base", clean[1]


def text_rows(base: Path, cfg: dict, passes: bool = False) -> list[tuple[str, str, str]]:
  """The rows of check_text (its PASS rows only when `passes`)."""
  a = Audit(str(base), "basedir", "5.0.0")
  check_text(a, base, hashes, cfg, base)
  return [(r.status, r.subject, r.reason) for r in a.rows if passes or r.status != "PASS"]


def test_clean_text_matches_the_md5_list_and_eval_md5(clean):
  rows = text_rows(*clean, passes=True)
  assert [(s, subj) for s, subj, _ in rows] == [("PASS", "download"), ("PASS", "results4/eval.txt"),
                                                ("PASS", "results4")], rows
  assert rows[0][2] == f"config md5 -> download: the 1 download(s) the config pins an md5 for match it ({MANIFEST})"
  assert rows[1][2].startswith("eval.md5 -> eval text: its ") and rows[1][2].endswith(" articles match eval.md5")
  assert rows[2][2] == (f"md5 list -> text: the 3 file(s) of results4/ it lists match download/{MANIFEST} (its md5 "
                        "pinned by the config)")


def test_replaced_topic_text_fails_whatever_was_rebuilt_from_it(tree):
  """The forgery: half a topic plus the whole eval text (to train on the eval set), its shard rebuilt honestly from
  it: the text -> shard link holds, the rebuild gives the same bytes; the md5 list does not."""
  from mlperf_bert.data.instances import build_shard
  base, cfg = tree
  t = base / "results4" / TOPICS[1]
  lines = t.read_text().split("\n")
  t.write_text("\n".join(lines[:len(lines) // 2]) + "\n" + (base / "results4/eval.txt").read_text())
  build_shard(t, base / "download/vocab.txt", base / f"shards/{TOPICS[1]}.shard", log=None, **TINY_PRE)
  a = Audit(str(base), "basedir", "5.0.0")
  check_chain(a, base, [], hashes, TINY_PRE)
  assert not [r for r in a.rows if r.status == "FAIL"], a.rows     # text -> shard: built from the text beside it
  rows = text_rows(base, cfg)
  assert [(s, subj) for s, subj, _ in rows] == [("FAIL", f"results4/{TOPICS[1]}")], rows
  assert rows[0][2].startswith(f"md5 list -> text: md5 {md5(t.read_bytes())}, download/{MANIFEST} lists ")
  assert "the text was changed after it was extracted" in rows[0][2]


def test_md5_list_rewritten_to_agree_fails_against_the_md5_the_config_pins(tree):
  base, cfg = tree
  t = base / "results4" / TOPICS[0]
  t.write_text(t.read_text().replace("the", "teh", 1))
  m = base / "download" / MANIFEST
  m.write_text("".join(f"{md5((base / 'results4' / n).read_bytes())}  ./{n}\n" for n in TOPICS + ["eval.txt"]))
  rows = text_rows(base, cfg)
  assert [(s, subj) for s, subj, _ in rows] == [("FAIL", f"download/{MANIFEST}")], rows
  assert rows[0][2].startswith("config md5 -> download: md5 ") and \
    f"the config pins {cfg['sources'][MANIFEST]['md5']} for it" in rows[0][2]
  # a config that pins no md5 (an R2 dataset's list): the list is taken on trust, and the row says so
  unpinned = text_rows(base, {"eval_md5": cfg["eval_md5"]}, passes=True)
  assert [s for s, _, _ in unpinned] == ["PASS", "PASS"] and "taken on trust: the config pins no md5" in unpinned[1][2]


def test_a_download_the_config_pins_is_checked_against_its_md5(tree):
  """The vocab replaced and everything rebuilt from it would keep every link from the text on: the config's md5 of
  download/vocab.txt, which the download rule checked, tells."""
  base, cfg = tree
  pins = {**cfg, "sources": {**cfg["sources"], "vocab.txt": {"md5": md5((DEMO / "vocab.txt").read_bytes())}}}
  assert text_rows(base, pins) == []
  v = base / "download/vocab.txt"
  v.write_text(v.read_text() + "forged\n")
  rows = text_rows(base, pins)
  assert [(s, subj) for s, subj, _ in rows] == [("FAIL", "download/vocab.txt")], rows
  pinned = pins["sources"]["vocab.txt"]["md5"]
  assert rows[0][2] == (f"config md5 -> download: md5 {md5(v.read_bytes())}, the config pins {pinned} for it: it is "
                        "not the file the config names; download it again (delete it, then snakemake all)")


def test_eval_text_is_checked_against_eval_md5_even_with_the_md5_list_rewritten(tree):
  base, cfg = tree
  ev = base / "results4/eval.txt"
  ev.write_text(ev.read_text().replace("the", "teh", 1))
  (base / "download" / MANIFEST).write_text("".join(f"{md5((base / 'results4' / n).read_bytes())}  ./{n}\n"
                                                     for n in TOPICS + ["eval.txt"]))
  rows = text_rows(base, {"eval_md5": cfg["eval_md5"]})      # no pin: only eval.md5 (in the checkout) can tell
  assert [(s, subj) for s, subj, _ in rows] == [("FAIL", "results4/eval.txt")], rows
  assert rows[0][2].startswith("eval.md5 -> eval text: ") and "eval.md5 expects" in rows[0][2], rows


def test_a_text_outside_the_md5_list_with_a_shard_fails(tree):
  base, cfg = tree
  shutil.copy(base / "results4" / TOPICS[0], base / "results4/part-00009-of-00002")
  assert [s for s, _, _ in text_rows(base, cfg)] == ["WARN"]                 # extracted, never used
  shutil.copy(base / f"shards/{TOPICS[0]}.shard", base / "shards/part-00009-of-00002.shard")
  rows = text_rows(base, cfg)
  assert [(s, subj) for s, subj, _ in rows] == [("FAIL", "results4/part-00009-of-00002")], rows


def test_the_eval_set_is_rebuilt_from_eval_txt_and_a_crafted_one_fails(tree, tmp_path):
  """The eval set with its masked tokens left visible, its header naming eval.txt and the settings (the chain passes):
  rebuilt from eval.txt with the recorded settings and eval_examples, its bytes differ: FAIL, and no eval batch is
  evaluated on it."""
  base, _ = tree
  a = Audit(str(base), "basedir", "5.0.0")
  assert reexecute_data(a, base, TINY_PRE, EVAL_EXAMPLES, 3, Budget(coverage=0.5), None, hashes) is True
  assert [(r.status, r.subject) for r in a.rows] == [("PASS", "eval/eval.shard"), ("PASS", "shards")], a.rows
  assert "eval set rebuilt from results4/eval.txt with the recorded settings and eval_examples 20" in a.rows[0].reason
  assert "1 of 2 topics' shards" in a.rows[1].reason and "missed with probability 50.0%" in a.rows[1].reason
  visible_eval_set(base / "results4/eval.txt", base / "download/vocab.txt", base / "eval/eval.shard", TINY_PRE,
                   EVAL_EXAMPLES)
  with Shard(base / "eval/eval.shard") as sh:
    b = sh.batch(list(range(EVAL_EXAMPLES)))
    seen = b["input_ids"][range(EVAL_EXAMPLES), b["masked_lm_positions"].T].T
    assert sh.eval_set and (seen == b["masked_lm_ids"])[b["masked_lm_weights"] > 0].all()
  a = Audit(str(base), "basedir", "5.0.0")
  check_chain(a, base, [], hashes, TINY_PRE)
  assert not [r for r in a.rows if r.status == "FAIL"], a.rows      # its header names eval.txt and the settings
  a = Audit(str(base), "basedir", "5.0.0")
  assert reexecute_data(a, base, TINY_PRE, EVAL_EXAMPLES, 3, Budget(coverage=0.5), None, hashes) is False
  assert a.rows[0].status == "FAIL" and a.rows[0].subject == "eval/eval.shard", a.rows
  assert a.rows[0].reason.startswith("eval set rebuilt: rebuilt from results4/eval.txt with the recorded settings and "
                                     "eval_examples 20, the eval set is ")
  assert "it is not the eval set results4/eval.txt gives" in a.rows[0].reason


def _record_pointing_at(base: Path, crafted: Path) -> Path:
  """results/cpu/result_bert_0.log and a train record whose eval set is `crafted` (the tree's eval set listed among
  its shards, so every file present was 'read'), with weights and batches that give the log's accuracy."""
  d = base / "results/cpu"
  d.mkdir(parents=True)
  log = d / "result_bert_0.log"
  log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
                 '"value": 0.75, "metadata": {"epoch_num": 64}}\n')
  (d / "result_bert_0.final.safetensors").write_bytes(b"weights")
  entry = lambda p: {"path": str(Path("../..") / p.relative_to(base)), "bytes": p.stat().st_size,
                     "sha256": hashes(p)["sha256"]}
  rec = {"schema": RECORD_SCHEMA, "settings": {}, "log": entry(log), "eval_set": entry(crafted),
         "shards": [entry(p) for p in sorted((base / "shards").glob("*.shard"))] + [entry(base / "eval/eval.shard")],
         "final_weights": {"path": "result_bert_0.final.safetensors", "bytes": 7,
                           "sha256": hashes(d / "result_bert_0.final.safetensors")["sha256"]},
         "last_eval": {"evals_done": 1, "metric": "pooled", "device": "CPU", "devices": 1,
                       "batches": [[15.0, 20.0, 0.75]]}}
  (d / "result_bert_0.train.json").write_text(json.dumps(rec))
  return log


def test_a_record_naming_another_eval_set_fails_and_is_not_evaluated(tree):
  base, _ = tree
  crafted = base / "results/crafted.shard"
  crafted.parent.mkdir()
  visible_eval_set(base / "results4/eval.txt", base / "download/vocab.txt", crafted, TINY_PRE, EVAL_EXAMPLES)
  log = _record_pointing_at(base, crafted)
  a = Audit(str(base), "basedir", "5.0.0")
  check_chain(a, base, [log], hashes, TINY_PRE)
  fails = [(r.subject, r.reason) for r in a.rows if r.status == "FAIL"]
  assert fails[0][0] == "results/crafted.shard" and fails[0][1].startswith(
    "shard -> train record: the eval set the train process read is ../../results/crafted.shard "
    "(results/crafted.shard), not this tree's eval/eval.shard"), fails
  assert any(s == "eval/eval.shard" and "read ../../eval/eval.shard as a training shard" in r for s, r in fails), fails
  a = Audit(str(base), "basedir", "5.0.0")
  reexecute_eval(a, base, log, seed=1, budget=Budget(seconds=10), deadline=None, hasher=hashes)
  assert [r.status for r in a.rows] == ["WARN"] and a.rows[0].reason.startswith(
    "not redone: none of the 1 batches of the last eval: the train record's eval set is ../../results/crafted.shard, "
    "not this tree's eval/eval.shard"), a.rows

"""trainer tinygrad (mlperf_bert/train/tinygrad_trainer/) and `compare` (audit/compare.py).

The tests marked `checkout` need a tinygrad work tree of e0139fa, named by MLPERF_BERT_TINYGRAD_CHECKOUT (as
tests/train/test_device_check.py), and are skipped without it:

  git -C /path/to/tinygrad archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
  MLPERF_BERT_TINYGRAD_CHECKOUT=/tmp/tg .venv/bin/python -m pytest tests/train/test_tinygrad_trainer.py
"""
from __future__ import annotations
import json, os, pickle, subprocess, sys
from pathlib import Path

import numpy as np
import pytest

from tiny_shards import tiny_instances

from mlperf_bert.constants import platform_path
from mlperf_bert.cli import main as cli_main
from mlperf_bert.constants import FEATURES
from mlperf_bert.data.loader import TrainLoader, open_shards
from mlperf_bert.data.shards import write_shard
from mlperf_bert.errors import UserError
from mlperf_bert.train.tinygrad_trainer.source import PINNED_COMMIT, Source, bring_checkout, parse_source, tree_id
from mlperf_bert.train.tinygrad_trainer.tf_init import init_model_config, write_tf_init_weights
from mlperf_bert.train.tinygrad_trainer.checks import eval_overrides
from mlperf_bert.train.tinygrad_trainer.export import export
from mlperf_bert.train.tinygrad_trainer.process import HOOK_DIR
from conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
CHECKOUT = os.environ.get("MLPERF_BERT_TINYGRAD_CHECKOUT", "")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="set MLPERF_BERT_TINYGRAD_CHECKOUT to a tinygrad work tree of "
                                    "e0139fa (e.g. a git archive unpacked) to run tinygrad's own loader")
SEQ, PRED = 16, 3
V41 = FIXTURES / "tinycorp-v4.1" / "results" / "tinybox_red" / "bert"


@pytest.fixture
def exported(tmp_path):
  """Twelve small shards (more files than the loader's 8 slots) and an eval set, exported for tinygrad."""
  rng = np.random.default_rng(0)
  shards = []
  for f, n in enumerate([7, 3, 11, 5, 2, 9, 4, 6, 8, 3, 5, 7]):
    shards.append(tmp_path / "shards" / f"part-{f:05d}-of-00012.shard")
    shards[-1].parent.mkdir(exist_ok=True)
    write_shard(shards[-1], tiny_instances(n, f + 1, rng), max_seq_length=SEQ, max_predictions_per_seq=PRED)
  ev = tmp_path / "eval.shard"
  write_shard(ev, tiny_instances(10, 99, rng), max_seq_length=SEQ, max_predictions_per_seq=PRED, eval_set=True)
  stats = export(shards, ev, tmp_path / "tg", SEQ, PRED, log=lambda s: None)
  return shards, ev, tmp_path / "tg", stats


def test_export_lays_out_what_train_bert_reads(exported):
  """train/<stem>.pkl per shard (get_wiki_train_files' glob, in the shards' order) and eval.pkl: lists of per-sample
  dicts of (1, n) arrays with instance_to_features' keys and dtypes, the rows of the shards in order."""
  shards, ev, out, stats = exported
  files = sorted((out / "train").glob("*.pkl"))
  assert [f.stem for f in files] == [s.name[:-len(".shard")] for s in shards]
  assert stats["train_rows"] == sum(len(s) for s in open_shards(shards)) and stats["eval_rows"] == 10
  for f, sh in [(files[2], open_shards([shards[2]])[0]), (out / "eval.pkl", open_shards([ev], what="eval")[0])]:
    rows = pickle.loads(f.read_bytes())
    want = sh.batch(np.arange(len(sh)))
    assert len(rows) == len(sh)
    for i, r in enumerate(rows):
      assert list(r) == list(FEATURES)
      for k in FEATURES:
        assert r[k].shape == (1,) + want[k].shape[1:] and r[k].dtype == (np.float32 if k == "masked_lm_weights" else np.int32)
        np.testing.assert_array_equal(r[k][0], want[k][i])


_TG_LOADER = """
import json, sys, numpy as np, tinygrad
from examples.mlperf.dataloader import batch_load_train_bert, batch_load_val_bert
bs, n = int(sys.argv[1]), int(sys.argv[2])
it, ev = batch_load_train_bert(bs), batch_load_val_bert(4)
out = {f"t{i}_{k}": v.numpy() for i in range(n) for k, v in next(it).items()}
out.update({f"e{i}_{k}": v.numpy() for i in range(3) for k, v in next(ev).items()})
np.savez(sys.argv[3], **out)
print(json.dumps({"tinygrad": tinygrad.__file__}))
"""


def _tinygrad_batches(data: Path, tmp: Path, seed: int | None, bs: int, n: int) -> tuple[dict, str]:
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOK_DIR), CHECKOUT]), "BASEDIR": str(data),
         "NUM_CPU_THREADS": "8", "CACHEDB": str(tmp / "cache.db"), "MLPERF_BERT_SHUFFLE_SEED": "" if seed is None else str(seed)}
  p = subprocess.run([sys.executable, "-c", _TG_LOADER, str(bs), str(n), str(tmp / "tg.npz")], env=env, cwd=tmp,
                     capture_output=True, text=True, timeout=300, check=False)
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
  return dict(np.load(tmp / "tg.npz")), json.loads(p.stdout.strip().splitlines()[-1])["tinygrad"]


@pytest.mark.slow
@needs_checkout
@pytest.mark.parametrize("seed", [0, 5])
def test_tinygrad_loader_on_the_export_gives_this_projects_batches(exported, tmp_path, seed):
  """tinygrad's own batch_load_train_bert / batch_load_val_bert (the checkout's tinygrad, not the installed one) on the
  exported files, with `random` seeded by the hook: the same first batches as this project's TrainLoader for the seed
  (8 files interleaved, as NUM_CPU_THREADS=8), and the eval rows in order."""
  shards, ev, out, _ = exported
  bs, n = 4, 12   # 48 of the 75 samples: past the refill of the interleave's first emptied slots
  got, tg_file = _tinygrad_batches(out, tmp_path, seed, bs, n)
  assert Path(tg_file).resolve().is_relative_to(Path(CHECKOUT).resolve()), tg_file
  with TrainLoader(open_shards(shards), bs, seed=seed, cycle_length=8) as it:
    ours = [next(it)[1] for _ in range(n)]
  for i in range(n):
    for k in FEATURES:
      np.testing.assert_array_equal(got[f"t{i}_{k}"], ours[i][k].astype(got[f"t{i}_{k}"].dtype), err_msg=f"batch {i} {k}")
  evs = open_shards([ev], what="eval")[0].batch(np.arange(10))
  for i in range(3):  # tinygrad's eval iterator wraps: rows 8, 9, 0, 1 in the third batch
    rows = [(4 * i + j) % 10 for j in range(4)]
    np.testing.assert_array_equal(got[f"e{i}_input_ids"], evs["input_ids"][rows])


@pytest.mark.slow
@needs_checkout
def test_without_the_hook_the_order_is_not_seeded(exported, tmp_path):
  """The hook is what makes the order equal: without MLPERF_BERT_SHUFFLE_SEED two runs of tinygrad's loader give
  different first batches (Python's unseeded random, docs/parity.md row 4) in all but a negligible share of runs."""
  _, _, out, _ = exported
  firsts = set()
  for r in range(3):
    (tmp_path / str(r)).mkdir()
    got, _ = _tinygrad_batches(out, tmp_path / str(r), None, 4, 1)
    firsts.add(tuple(got["t0_input_ids"][:, 1]))
  assert len(firsts) > 1


def _git(*a, cwd):
  subprocess.run(["git", *a], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def fake_repo(tmp_path):
  """A small git work tree with train_bert's script path, committed."""
  src = tmp_path / "src"
  (src / "examples" / "mlperf").mkdir(parents=True)
  (src / "examples" / "mlperf" / "model_train.py").write_text("print('train')\n")
  (src / "README").write_text("x\n")
  _git("init", "-q", cwd=src)
  _git("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A", cwd=src)
  _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", cwd=src)
  commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
  return src, commit


def test_local_checkout_is_copied_and_verified_by_its_tree(fake_repo, tmp_path):
  src, commit = fake_repo
  rec = bring_checkout(Source("path", str(src), commit), tmp_path / "b" / "checkout", tmp_path / "b" / "c.json", repo=REPO)
  want = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=src, capture_output=True, text=True).stdout.strip()
  assert rec["tree"] == want and rec["commit"] == commit and rec["source"] == "local checkout"
  assert (tmp_path / "b" / "checkout" / "examples" / "mlperf" / "model_train.py").is_file()
  assert not (tmp_path / "b" / "checkout" / ".git").exists()
  assert json.loads((tmp_path / "b" / "c.json").read_text()) == rec
  (src / "README").write_text("changed\n")  # a modified checkout is not that commit
  with pytest.raises(UserError, match="not the tree"):
    bring_checkout(Source("path", str(src), commit), tmp_path / "b2" / "checkout", tmp_path / "b2" / "c.json", repo=REPO)
  assert not (tmp_path / "b2" / "checkout").exists() and not (tmp_path / "b2" / "checkout.part").exists()


def test_git_source_is_cloned_at_the_commit(fake_repo, tmp_path):
  src, commit = fake_repo
  rec = bring_checkout(Source("git", str(src), commit), tmp_path / "checkout", tmp_path / "c.json", repo=REPO)
  assert rec["commit"] == commit and (tmp_path / "checkout" / "README").is_file()
  with pytest.raises(UserError, match="git checkout"):
    bring_checkout(Source("git", str(src), "0" * 40), tmp_path / "x", tmp_path / "x.json", repo=REPO)


def test_a_plain_directory_verifies_only_for_the_pinned_commit(fake_repo, tmp_path):
  src, commit = fake_repo
  plain = tmp_path / "plain"
  plain.mkdir()
  subprocess.run(f"git -C {src} archive HEAD | tar -x -C {plain}", shell=True, check=True)
  with pytest.raises(UserError, match="only the pinned commit"):
    bring_checkout(Source("path", str(plain), commit), tmp_path / "c", tmp_path / "c.json", repo=REPO)
  with pytest.raises(UserError, match="not the tree"):  # it is not e0139fa's tree
    bring_checkout(Source("path", str(plain), PINNED_COMMIT), tmp_path / "c", tmp_path / "c.json", repo=REPO)


def _rev(*a, cwd) -> str:
  return subprocess.run(["git", *a], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_replace_ref_does_not_pass_a_changed_train_script_as_the_commit(fake_repo, tmp_path):
  """refs/replace/<commit> makes git show another commit under the commit's name: its tree is not believed."""
  src, commit = fake_repo
  (src / "examples" / "mlperf" / "model_train.py").write_text("print('changed')\n")
  _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "changed", cwd=src)
  forged = _rev("rev-parse", "HEAD", cwd=src)
  _git("replace", commit, forged, cwd=src)
  assert (src / ".git" / "refs" / "replace" / commit).is_file()
  assert _rev("rev-parse", f"{commit}^{{tree}}", cwd=src) == _rev("rev-parse", "HEAD^{tree}", cwd=src)  # git is fooled
  with pytest.raises(UserError, match=r"not the tree .* of commit"):
    bring_checkout(Source("path", str(src), commit), tmp_path / "c" / "checkout", tmp_path / "c" / "c.json", repo=REPO)
  assert not (tmp_path / "c" / "checkout").exists() and not (tmp_path / "c" / "c.json").exists()
  # GIT_REPLACE_REF_BASE or GIT_DIR in the environment change nothing: git runs without inherited GIT_* settings
  os.environ["GIT_REPLACE_REF_BASE"] = "refs/elsewhere/"
  try:
    with pytest.raises(UserError, match="not the tree"):
      bring_checkout(Source("path", str(src), commit), tmp_path / "d", tmp_path / "d.json", repo=REPO)
  finally:
    del os.environ["GIT_REPLACE_REF_BASE"]


def test_tree_id_is_gits_without_git(tmp_path, monkeypatch):
  """Hashed in Python (no git on the PATH): executable bits, symlinks, nested and empty folders, git's order (a
  folder sorts as its name + '/')."""
  d = tmp_path / "t"
  for rel, text in {"a.b": "2", "a-b": "3", "a0/x": "1", "a/x": "4", "a/y/z": "5", "b c": "6", "run.sh": "7"}.items():
    (d / rel).parent.mkdir(parents=True, exist_ok=True)
    (d / rel).write_text(text)
  (d / "run.sh").chmod(0o755)
  (d / "link").symlink_to("a/x")
  (d / "empty" / "deeper").mkdir(parents=True)
  _git("init", "-q", cwd=d)
  _git("add", "-A", "-f", cwd=d)
  want = _rev("write-tree", cwd=d)
  monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
  assert tree_id(d) == want


def test_clone_takes_the_url_as_a_url_and_says_gits_words_in_one_line(tmp_path):
  """`--` before the URL: an option-like URL is no option (no command runs); git's message is one line, no list."""
  marker = tmp_path / "ran"
  for url in (f"--upload-pack=touch {marker}", str(tmp_path / "no-such-repo")):
    with pytest.raises(UserError) as e:
      bring_checkout(Source("git", url, PINNED_COMMIT), tmp_path / "c", tmp_path / "c.json", repo=REPO)
    msg = str(e.value)
    assert "\n" not in msg and "['" not in msg and '["' not in msg, msg
    assert f"failed in .: fatal: repository '{url}' does not exist; check the tinygrad_source" in msg, msg
  assert not marker.exists() and not (tmp_path / "c.part").exists()


@needs_checkout
def test_the_pinned_checkout_verifies_without_git(tmp_path):
  rec = bring_checkout(parse_source(CHECKOUT), tmp_path / "checkout", tmp_path / "c.json", repo=REPO)
  assert rec["commit"] == PINNED_COMMIT and rec["tree"] == tree_id(tmp_path / "checkout")


def test_source_setting():
  assert parse_source(None) == Source("git", "https://github.com/tinygrad/tinygrad.git", PINNED_COMMIT)
  assert parse_source("/x/tg") == Source("path", "/x/tg", PINNED_COMMIT)
  assert parse_source({"git": "u", "commit": "a" * 40}).commit == "a" * 40
  for bad in ({"git": "u", "path": "p"}, {"git": "u", "commit": "e0139fa"}, 3):
    with pytest.raises(UserError): parse_source(bad)


def test_eval_overrides_meet_train_bert_assert():
  from mlperf_bert.train.hparams import load_platform, resolve
  platform = load_platform(platform_path(REPO, "cpu"))
  demo = resolve(platform, {"EVAL_BS": 64, "EVAL_SAMPLES": 512}, seed=0, eval_examples=10000)    # 8 batches of 64
  assert eval_overrides(demo, {}) == {"EVAL_BS": 100, "EVAL_SAMPLES": 10000}
  assert eval_overrides(demo, {"EVAL_BS": 64}) == {"EVAL_BS": 64}  # the user's wins
  enough = resolve(platform, {"EVAL_BS": 90, "EVAL_SAMPLES": 10000}, seed=0, eval_examples=10000)  # 112 batches of 90
  assert eval_overrides(enough, {"BS": 9}) == {"BS": 9}


@pytest.mark.slow
def test_tf_init_weights_hold_this_projects_seeded_init(tmp_path):
  """The TF checkpoint train_bert loads is, name by name, the weights this project's trainer starts from for the seed
  (read back with tensorflow, as load_from_pretrained reads it)."""
  tf = pytest.importorskip("tensorflow")
  from mlperf_bert.train.model import BertForPretraining
  from mlperf_bert.train.hparams import load_platform, resolve
  settings = resolve(load_platform(platform_path(REPO, "cpu")), {"BERT_LAYERS": 1, "BERT_HIDDEN_SIZE": 128,
                     "BERT_NUM_HEADS": 2, "BERT_INTERMEDIATE_SIZE": 512}, seed=3, eval_examples=10000)
  cfg = init_model_config(REPO / "resources" / "demo" / "bert_config.json", settings)
  write_tf_init_weights(tmp_path / "ck", cfg, seed=3)
  ours = {k: v.numpy() for k, v in BertForPretraining(cfg, seed=3).state_dict().items()}
  names = dict(tf.train.list_variables(str(tmp_path / "ck")))
  assert set(names) == set(ours)
  for k in ("bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel", "cls/predictions/output_bias"):
    np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path / "ck"), k), ours[k])


def test_compare_two_published_logs(capsys):
  """compare on two of tinycorp's v4.1 tinybox_red logs: seeds differ (noted and the first differing setting), the
  step reaching 0.72 is the eval before each run_stop, and the same log against itself differs nowhere."""
  from mlperf_bert.audit.compare import compare
  from mlperf_bert.audit.logs import read_log
  a, b = V41 / "result_0.txt", V41 / "result_1.txt"
  lines, facts = compare(a, b)
  la, lb = read_log(a), read_log(b)
  for f, lg in (("reached_a", la), ("reached_b", lb)):
    last = lg.eval_accuracies[-1]
    assert facts[f] == last.metadata["epoch_num"] // lg.global_batch_size and float(last.value) >= 0.72
  assert facts["first_setting_difference"].startswith("seed: ") and "note: the seeds differ" in "\n".join(lines)
  assert facts["run_s"][0] == pytest.approx(la.run_minutes * 60) and facts["init_s"][1] == pytest.approx(lb.init_minutes * 60)
  assert len(facts["evals_a"]) == len(la.eval_accuracies)
  _, same = compare(a, a)
  assert same["first_setting_difference"] is None and same["first_eval_difference"] is None
  assert cli_main(["compare", str(a), str(b), "--target", "0.7"]) == 0
  out = capsys.readouterr().out
  assert "first differing eval: step " in out and "step reaching 0.7" in out


def test_compare_refuses_a_file_that_is_no_log(tmp_path, capsys):
  (tmp_path / "x.log").write_text("hello\n")
  assert cli_main(["compare", str(tmp_path / "x.log"), str(V41 / "result_0.txt")]) == 2
  assert "no :::MLLOG lines" in capsys.readouterr().err


STEP_LINE = r"^\s*(\d+)\s+[\d.]+ ms run,.*?([\d.]+) loss, ([\d.]+) LR"


def _steps(text: str) -> dict[int, tuple[float, float]]:
  import re
  return {int(m[1]): (float(m[2]), float(m[3])) for m in re.finditer(STEP_LINE, text, re.M)}


def _final_eval(log: Path) -> float:
  from mlperf_bert.audit.logs import read_log
  return float(read_log(log).eval_accuracies[-1].value)


@pytest.mark.slow
@needs_checkout
def test_both_trainers_same_seed_dropout_off(tmp_path):
  """Both trainers on the CPU, tiny model (1 layer of tinygrad's BERT_SIZE tiny), fp32, dropout off, seed 3, the same
  shards: tinygrad's RUN process (its own tinygrad, its loader on the export, the TF init checkpoint) and this
  project's `train`. Expected to match: each step's loss as both print it (2 decimals: within 0.011) and LR (within
  1e-6; train_bert prints the next step's), and the eval accuracy after 3 steps on the same 20 eval rows (within one prediction of the 100 at most; the
  weights agree to fp32 rounding, docs/parity.md). tinygrad needs EVAL_BS x MAX_EVAL_STEPS >= 10000: with EVAL_BS 2500
  its wrapping eval iterator gives 4 batches of the same 20 rows, this project evaluates them once."""
  from mlperf_bert.train.hparams import load_platform, resolve
  from mlperf_bert.train.tinygrad_trainer.process import run_phases
  seq, pred, rng = 32, 5, np.random.default_rng(1)
  def inst(n, tag):
    out = []
    for i in range(n):
      la, lb = int(rng.integers(4, 12)), int(rng.integers(4, 12))
      ids = [101] + list(rng.integers(2000, 29000, la)) + [102] + list(rng.integers(2000, 29000, lb)) + [102]
      pos = sorted(rng.choice(np.arange(1, len(ids) - 1), size=pred, replace=False).tolist())
      masked = list(ids)
      for p in pos: masked[p] = 103
      out.append({"input_ids": masked, "segment_ids": [0] * (la + 2) + [1] * (lb + 1), "masked_lm_positions": pos,
                  "masked_lm_ids": [ids[p] for p in pos], "next_sentence_label": int(i % 2)})
    return out
  (tmp_path / "shards").mkdir()
  shards = [tmp_path / "shards" / f"part-{f:05d}-of-00010.shard" for f in range(10)]
  for f, p in enumerate(shards): write_shard(p, inst(6, f), max_seq_length=seq, max_predictions_per_seq=pred)
  ev = tmp_path / "eval.shard"
  write_shard(ev, inst(20, 99), max_seq_length=seq, max_predictions_per_seq=pred, eval_set=True)
  bert_config = REPO / "resources" / "demo" / "bert_config.json"
  common = {"BS": 4, "TRAIN_STEPS": 3, "NUM_WARMUP_STEPS": 1, "EVAL_STEP_FREQ": 3, "TARGET": 1.0, "DISABLE_DROPOUT": True,
            "CKPT": False, "CACHE_CLEAR": False, "INIT_PROCESS": "same"}
  platform = load_platform(platform_path(REPO, "cpu"))
  hp_tg = resolve(platform, {**common, "EVAL_BS": 2500, "EVAL_SAMPLES": 10000}, seed=3, eval_examples=10000)
  export(shards, ev, tmp_path / "tg", seq, pred, log=lambda s: None)
  index = write_tf_init_weights(tmp_path / "ck", init_model_config(bert_config, hp_tg), seed=3)
  run_phases(hp_tg, checkout=CHECKOUT, data_dir=tmp_path / "tg", init_ckpt_dir=tmp_path / "ck", work_dir=tmp_path / "w",
             out=tmp_path / "tg.log", shard_paths=[str(p) for p in shards], eval_path=str(ev),
             bert_config=str(bert_config), init_weights=str(index), init_process=False)
  theirs = _steps((tmp_path / "w" / "train_bert_3.out").read_text())
  sets = [f"{k}={v}" for k, v in {**common, "EVAL_BS": 20, "EVAL_SAMPLES": 20}.items()]
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "train", "--platform-file", str(platform_path(REPO, "cpu")),
                      "--set", *sets, "--shards", *map(str, shards), "--eval", str(ev), "--bert-config", str(bert_config),
                      "--max-seq-length", str(seq), "--max-predictions-per-seq", str(pred), "--seed", "3",
                      "--out", str(tmp_path / "ours.log"), "--ckpt-dir", str(tmp_path / "ourck")],
                     capture_output=True, text=True, timeout=1200, check=False, cwd=REPO,
                     env={**os.environ, "PYTHONPATH": str(REPO)})
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
  ours = _steps(p.stdout)
  assert sorted(theirs) == sorted(ours) == [0, 1, 2]
  for i in ours:
    assert abs(ours[i][0] - theirs[i][0]) <= 0.011, (i, ours[i], theirs[i])
    if i + 1 in ours:  # train_bert prints the LR after its scheduler's step (the next step's); this project the step's
      assert abs(ours[i + 1][1] - theirs[i][1]) <= 1e-6, (i, ours[i + 1], theirs[i])
  assert abs(_final_eval(tmp_path / "ours.log") - _final_eval(tmp_path / "tg.log")) <= 1 / 100 + 1e-9


def test_provenance_names_the_trainer_and_commit(tmp_path):
  """The provenance's `trainer`: the workflow's name/commit/source with the tree the checkout rule verified; a
  checkout record of another commit is refused; the project trainer is named when nothing else is given."""
  from mlperf_bert.audit.provenance import build_provenance_record, trainer_entry
  rec = tmp_path / "checkout.json"
  rec.write_text(json.dumps({"commit": PINNED_COMMIT, "tree": "t" * 40, "source": "local checkout", "kind": "path"}))
  info = {"name": "tinygrad", "commit": PINNED_COMMIT, "source": "local checkout"}
  assert trainer_entry(info, [rec]) == {**info, "tree": "t" * 40}
  with pytest.raises(UserError, match="forcerun tinygrad_checkout"):
    trainer_entry({**info, "commit": "a" * 40}, [rec])
  log = tmp_path / "result_bert_0.log"
  log.write_text(":::MLLOG {}\n")
  kw = dict(log_path=log, inputs={}, config={}, seed=0, platform="cpu", command="x", repo_dir=REPO, basedir=tmp_path)
  assert build_provenance_record(**kw)["trainer"] == {"name": "project"}
  assert build_provenance_record(**kw, trainer=trainer_entry(info, [rec]))["trainer"]["commit"] == PINNED_COMMIT

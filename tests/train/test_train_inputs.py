"""`train` refuses inputs that belong to something else before it writes a byte: the eval set given as a training
shard, a bert_config.json whose vocabulary is smaller than the shards', a seed outside the schema's bounds."""
import json, re, shutil
from pathlib import Path

import numpy as np
import pytest

from mlperf_bert.constants import platform_path
from mlperf_bert.cli import main
from mlperf_bert.data.shards import write_shard
from mlperf_bert.errors import UserError
from mlperf_bert.data.loader import list_shards
from mlperf_bert.data.shards import Shard
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.inputs import RunInputs, check_train_inputs
from mlperf_bert.train.run import TrainRun
from test_train import PRED, SEQ, VOCAB, cpu_kernels, synth_instances, tiny_config  # noqa: F401  (cpu_kernels: autouse)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
  d = tmp_path_factory.mktemp("tree")
  rng = np.random.default_rng(0)
  (d / "shards").mkdir()
  write_shard(d / "shards/part-00000-of-00001.shard", synth_instances(16, rng), max_seq_length=SEQ,
              max_predictions_per_seq=PRED, vocab_size=VOCAB)
  (d / "eval").mkdir()
  write_shard(d / "eval/eval.shard", synth_instances(8, rng), max_seq_length=SEQ, max_predictions_per_seq=PRED,
              vocab_size=VOCAB, eval_set=True)
  tiny_config(d / "bert_config.json")
  return d


def _train(tree, out: Path, **over):
  """What `train` does with its arguments: the cpu platform's settings, the inputs as one value, the run."""
  args = dict(shards=[tree / "shards"], eval_set=tree / "eval/eval.shard", bert_config=tree / "bert_config.json",
              max_seq_length=SEQ, max_predictions_per_seq=PRED, log=out, ckpt_dir=out.parent / "ckpt")
  args.update(over)
  settings = resolve(load_platform(platform_path(REPO, "cpu")), {"BS": 4, "EVAL_BS": 4, "EVAL_SAMPLES": 8},
                     seed=0, eval_examples=len(Shard(args["eval_set"])))
  return TrainRun(settings, RunInputs.of(**{**args, "shards": list_shards(args["shards"])})).run(stop_after=0)


def _nothing_written(out: Path):
  return not out.parent.exists() or sorted(p.name for p in out.parent.iterdir()) == []


def test_the_eval_set_is_refused_as_a_training_shard(tree, tmp_path):
  out = tmp_path / "run" / "result_bert_0.log"
  with pytest.raises(UserError, match=r"eval/eval.shard is the eval set, not a training shard; pass the training"):
    _train(tree, out, shards=[tree / "eval/eval.shard"])
  copy = tmp_path / "elsewhere" / "part-00000-of-00001.shard"  # a copy under a shard's name: its header tells
  copy.parent.mkdir()
  shutil.copy(tree / "eval/eval.shard", copy)
  with pytest.raises(UserError, match="part-00000-of-00001.shard is the eval set"):
    _train(tree, out, shards=[copy])
  assert _nothing_written(out)


def test_a_training_shard_given_as_the_eval_set_is_refused(tree, tmp_path):
  """`train --eval shards/part-00000...`: the eval set must prove it is one (its header's eval flag); with the same
  file among --shards too, the message names that mistake, not "part-00000 is the eval set"."""
  part = tree / "shards/part-00000-of-00001.shard"
  other = tmp_path / "part-00001-of-00002.shard"
  write_shard(other, synth_instances(16, np.random.default_rng(3)), max_seq_length=SEQ, max_predictions_per_seq=PRED,
              vocab_size=VOCAB)
  out = tmp_path / "run" / "result_bert_0.log"
  for shards in ([other], [part]):
    with pytest.raises(UserError) as e:
      _train(tree, out, eval_set=part, shards=shards)
    msg = str(e.value)
    assert msg.startswith(f"{part} is a training shard given as the eval set") and "\n" not in msg, msg
    assert "pass the eval set to --eval (<basedir>/eval/eval.shard" in msg and "is the eval set," not in msg
    assert ("also among --shards" in msg) == (shards == [part])
  assert _nothing_written(out)


def _as_format_1(src: Path, dst: Path) -> Path:
  """The same shard in format 1 (the 128-byte header of docs/shard-format.md, no source record, no eval flag)."""
  import struct, zlib
  data = src.read_bytes()
  head = bytearray(data[:72].ljust(124, b"\0"))
  struct.pack_into("<II", head, 8, 1, 128)
  struct.pack_into("<I", head, 52, struct.unpack_from("<I", head, 52)[0] & ~2)  # format 1 had no eval flag
  dst.write_bytes(bytes(head) + struct.pack("<I", zlib.crc32(bytes(head))) + data[256:])
  return dst


def test_a_format_1_eval_set_is_still_read_with_a_warning(tree, tmp_path):
  old = _as_format_1(tree / "eval/eval.shard", tmp_path / "eval.shard")
  assert Shard(old).version == 1 and not Shard(old).eval_set and len(Shard(old)) == 8
  with pytest.warns(UserWarning, match="format-1 shard, which cannot say whether it is the eval set"):
    check_train_inputs(list_shards(tree / "shards"), old, tree / "bert_config.json")  # accepted: no UserError


def test_a_bert_config_with_a_smaller_vocabulary_is_refused(tree, tmp_path):
  small = tmp_path / "bert_config.json"
  cfg = json.loads((tree / "bert_config.json").read_text())
  small.write_text(json.dumps({**cfg, "vocab_size": VOCAB // 2}))
  out = tmp_path / "run" / "result_bert_0.log"
  with pytest.raises(UserError) as e:
    _train(tree, out, bert_config=small)
  msg = str(e.value)
  assert f"vocab_size {VOCAB // 2} is below the {VOCAB}-token vocabulary" in msg and "\n" not in msg
  assert _nothing_written(out)
  bare = tmp_path / "bare" / "part-00000-of-00001.shard"  # no vocabulary size in its header: its ids are read
  bare.parent.mkdir()
  write_shard(bare, synth_instances(16, np.random.default_rng(2)), max_seq_length=SEQ, max_predictions_per_seq=PRED)
  with pytest.raises(UserError, match=rf"vocab_size {VOCAB // 2}, but .*part-00000-of-00001.shard holds token id") as e:
    _train(tree, out, bert_config=small, shards=[bare])
  assert int(re.search(r"holds token id (\d+)", str(e.value)).group(1)) >= VOCAB // 2
  assert _nothing_written(out)


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_a_seed_outside_the_schema_bounds_is_one_line_and_writes_nothing(tree, tmp_path, capsys, seed):
  out = tmp_path / "run" / "result_bert.log"
  rc = main(["train", "--platform-file", str(platform_path(REPO, "cpu")), "--shards", str(tree / "shards"),
             "--eval", str(tree / "eval/eval.shard"), "--bert-config", str(tree / "bert_config.json"),
             "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED), "--seed", seed,
             "--out", str(out), "--ckpt-dir", str(tmp_path / "ckpt"), "--set", "EVAL_SAMPLES=8"])
  err = capsys.readouterr().err.strip().splitlines()
  assert rc == 2 and err[-1] == (f"error: seed {seed} is outside 0..4294967295 (numpy's seed range, the bounds of "
                                 "`seeds` in schemas/config.schema.yaml); pick a seed in that range")
  assert _nothing_written(out) and not (tmp_path / "ckpt").exists()


def test_init_weights_with_transposed_shapes_are_refused_before_compiling(tree, tmp_path, capsys):
  """A checkpoint whose kernels are transposed is refused from its header before a kernel is compiled: no
  `.log.partial`, no checkpoint folder, and in well under the minute the first compile takes."""
  import time
  from safetensors.numpy import save_file
  from mlperf_bert.train.model import parameter_shapes
  from mlperf_bert.train.trainer import model_config
  settings = resolve(load_platform(platform_path(REPO, "cpu")), {"EVAL_SAMPLES": 8}, seed=0, eval_examples=8)
  cfg = model_config(tree / "bert_config.json", settings.model)  # the platform's size overrides applied
  shapes = parameter_shapes(cfg)
  H, I = cfg.hidden_size, cfg.intermediate_size
  assert H != I
  weights = {k: np.zeros(s[::-1] if k.endswith("intermediate/dense/kernel") else s, np.float32)
             for k, s in shapes.items()}
  bad = tmp_path / "model.safetensors"
  save_file(weights, str(bad))
  out = tmp_path / "run" / "result_bert_0.log"
  t = time.process_time()
  rc = main(["train", "--platform-file", str(platform_path(REPO, "cpu")), "--shards", str(tree / "shards"),
             "--eval", str(tree / "eval/eval.shard"), "--bert-config", str(tree / "bert_config.json"),
             "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED), "--seed", "0",
             "--out", str(out), "--ckpt-dir", str(tmp_path / "ckpt"), "--set", "EVAL_SAMPLES=8",
             "--init-weights", str(bad)])
  took = time.process_time() - t
  err = capsys.readouterr().err.strip().splitlines()
  assert rc == 2 and err[-1] == (f"error: {bad}: parameter 'bert/encoder/layer_0/intermediate/dense/kernel' has shape "
                                 f"[{I}, {H}], the model expects [{H}, {I}]; use the bert_config.json the checkpoint "
                                 "was converted with"), err
  assert _nothing_written(out) and not (tmp_path / "ckpt").exists() and took < 10


def test_train_with_a_settings_file_uses_it_as_it_is(tree, tmp_path, capsys, monkeypatch):
  """--settings (what the train job hands its INIT and RUN processes): read back, never resolved again, so the flags
  that would resolve other settings are refused, one line each."""
  from mlperf_bert.train import hparams, phases
  from mlperf_bert.train.settings import to_json
  s = resolve(load_platform(platform_path(REPO, "cpu")), {"EVAL_SAMPLES": 8}, seed=7, eval_examples=8)
  f = tmp_path / "s.json"
  f.write_text(to_json(s))
  out = tmp_path / "run" / "result_bert_7.log"
  args = ["train", "--settings", str(f), "--shards", str(tree / "eval/eval.shard"), "--eval", str(tree / "eval/eval.shard"),
          "--bert-config", str(tree / "bert_config.json"), "--max-seq-length", str(SEQ),
          "--max-predictions-per-seq", str(PRED), "--out", str(out), "--ckpt-dir", str(tmp_path / "ckpt")]
  for extra in (["--seed", "7"], ["--platform-file", str(platform_path(REPO, "cpu"))], ["--set", "BS=8"]):
    rc = main(args + extra)
    assert rc == 2 and capsys.readouterr().err.strip().splitlines()[-1] == (
      f"error: --settings {f} holds resolved settings, used as they are; drop {extra[0]} (or drop --settings and "
      "resolve a platform file)")
  rc = main(args[:1] + args[3:])
  assert rc == 2 and capsys.readouterr().err.strip().endswith("error: train: pass --platform-file "
                                                             "(platforms/<name>/platform.yaml) or --settings "
                                                             "(resolved settings as JSON: a file, or - for standard "
                                                             "input)")
  # with resolve gone, the run still gets its settings and goes on to check its inputs (the eval set as a shard)
  for mod in (hparams, phases): monkeypatch.setattr(mod, "resolve", lambda *a, **k: pytest.fail("resolve called"))
  rc = main(args)
  assert rc == 2 and "eval.shard is the eval set, not a training shard" in capsys.readouterr().err
  assert _nothing_written(out)

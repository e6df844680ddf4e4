#!/usr/bin/env python3
"""Record what tinygrad's own BERT trainer computes, as the fixture of tests/train/test_parity.py.

    python tools/record_tinygrad_parity.py CHECKOUT --out tests/fixtures/tinygrad-parity/ \
        --shards results/demo/shards --eval results/demo/eval/eval.shard

CHECKOUT is a work tree of tinygrad (e.g. `git -C <mirror> archive <commit> | tar -x -C /tmp/tg`); its own
`tinygrad` package, `extra/models/bert.py`, `examples/mlperf/{model_train,helpers,lr_schedulers,dataloader}.py`
run in a subprocess with the checkout on PYTHONPATH (nothing of tinygrad is copied into this repository).

This process (this project's code) writes the inputs:
  init.safetensors   fixed initial weights of a small BERT (real vocab 30522, 2 layers, hidden 128, 2 heads,
                     intermediate 512) in this project's (Google-BERT) names, made by `init_weights()` below
                     from numpy's PCG64 (every tensor, biases and LayerNorm included, gets its own uniform
                     draws, so a transposed or misnamed tensor shows). At 17 MB it is not committed: the
                     fixture keeps its sha256 (init.sha256) and the test regenerates and checks it;
  batches.npz        5 training batches of BS 8 (seq 128, 20 predictions) from the demo shards, taken with
                     this project's loader (seed 0, tinygrad's sample order), and 2 eval batches (the first 16
                     rows of the eval set);
then the subprocess (a program of tools/tinygrad_parity_programs.py) runs, on CPU in fp32 with dropout off
(DISABLE_DROPOUT=1; tinygrad's and this project's dropout masks come from different random streams), tinygrad's
`train_step_bert` 5 times with its LAMB groups and `PolynomialDecayWithWarmup`, and `eval_step_bert` on the eval
batches, and writes
  eval_batches.npz   the eval batches with part of their labels set to the trained model's predictions;
  expected.json      per step: total / masked-LM / next-sentence loss (before the update), the LR the update
                     used, the LR train_step_bert returns, the global grad norm; the eval metrics;
  weights.npz        after step 5: every weight tensor in full except the two large vocab/position tables,
                     of which a fixed set of rows is kept (plus float64 sum and sum of squares of each tensor).
`--case NAME` (repeatable; default all) also records the extra cases of CASES below (HALF, two devices, an eval in
between with and without FREE_INTERMEDIATE) into subfolders, from those same weights and batches.
"""
from __future__ import annotations
import argparse, hashlib, json, os, subprocess, sys, zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SETTINGS = {"BS": 8, "STEPS": 5, "SEQ": 128, "PRED": 20, "EVAL_BS": 8, "EVAL_BATCHES": 2, "SEED": 0,
            "OPT_BASE_LEARNING_RATE": 0.01, "NUM_WARMUP_STEPS": 2, "TRAIN_STEPS": 6, "DECAY": 0.01,
            "OPT_LAMB_BETA_1": 0.9, "OPT_LAMB_BETA_2": 0.999, "EPSILON": 1e-6, "POLY_POWER": 1.0,
            "BERT_LAYERS": 2, "BERT_HIDDEN_SIZE": 128, "BERT_NUM_HEADS": 2, "BERT_INTERMEDIATE_SIZE": 512}
ROWS_KEPT = 512   # rows of the word/position tables kept in weights.npz (first 256 + 256 fixed random)


def kept_rows(n: int) -> np.ndarray:
  rng = np.random.default_rng(1234)
  rest = rng.choice(np.arange(256, n), size=min(ROWS_KEPT - 256, max(n - 256, 0)), replace=False)
  return np.sort(np.concatenate([np.arange(min(256, n)), rest])).astype(np.int64)


def tinygrad_name(name: str) -> tuple[str, bool]:
  """This project's (Google-BERT) parameter name -> (tinygrad state-dict key, transpose?)."""
  special = {"bert/pooler/dense/kernel": ("cls.pooler.dense.weight", True),
             "bert/pooler/dense/bias": ("cls.pooler.dense.bias", False),
             "cls/predictions/output_bias": ("cls.predictions.bias", False),
             "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
             "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False)}
  if name in special: return special[name]
  out = []
  for part in name.split("/"):
    if part.startswith("layer_") and part[6:].isdigit(): out += ["layer", part[6:]]
    elif part in ("kernel", "gamma"): out.append("weight")
    elif part == "beta": out.append("bias")
    else: out.append(part)
  if name.endswith("_embeddings"): out.append("weight")
  return ".".join(out), name.endswith("/kernel")


def model_config():
  from mlperf_bert.train.model import BertConfig
  s = SETTINGS
  return BertConfig(num_hidden_layers=s["BERT_LAYERS"], hidden_size=s["BERT_HIDDEN_SIZE"],
                    num_attention_heads=s["BERT_NUM_HEADS"], intermediate_size=s["BERT_INTERMEDIATE_SIZE"])


def init_weights() -> dict[str, np.ndarray]:
  """The fixed initial weights: name -> float32 array. Weights uniform in +-0.0346 (std 0.02), biases and LayerNorm
  beta uniform in +-0.02, LayerNorm gamma 1 +- 0.1; each tensor from PCG64 seeded with (SEED, crc32(name))."""
  from mlperf_bert.train.model import parameter_shapes
  out = {}
  for name, shape in parameter_shapes(model_config()).items():
    u = np.random.Generator(np.random.PCG64([SETTINGS["SEED"], zlib.crc32(name.encode())])).random(shape) * 2 - 1
    if name.endswith("/gamma"): v = 1 + 0.1 * u
    elif name.endswith("bias") or name.endswith("/beta"): v = 0.02 * u
    else: v = 0.02 * np.sqrt(3) * u
    out[name] = np.ascontiguousarray(v.astype(np.float32))
  return out


def weights_digest(weights: dict[str, np.ndarray]) -> str:
  h = hashlib.sha256()
  for k in sorted(weights):
    h.update(k.encode()); h.update(str(weights[k].shape).encode()); h.update(np.ascontiguousarray(weights[k], "<f4").tobytes())
  return h.hexdigest()


def write_inputs(out: Path, shards: Path, eval_path: Path) -> None:
  from safetensors.numpy import save_file
  from mlperf_bert.data.loader import TrainLoader, eval_batches, open_shards
  from mlperf_bert.constants import FEATURES
  s = SETTINGS
  w = init_weights()
  save_file(w, str(out / "init.safetensors"), metadata={"seed": str(s["SEED"])})
  (out / "init.sha256").write_text(weights_digest(w) + "\n")
  paths = sorted(shards.glob("*.shard")) if shards.is_dir() else [shards]
  train = open_shards(paths, s["SEQ"], s["PRED"])
  arrays: dict[str, np.ndarray] = {}
  with TrainLoader(train, s["BS"], seed=s["SEED"]) as loader:
    for i in range(s["STEPS"]):
      _, b = next(loader)
      for k in FEATURES: arrays[f"train{i}/{k}"] = b[k]
  ev = open_shards([eval_path], s["SEQ"], s["PRED"], what="eval set")[0]
  for j, (b, _) in enumerate(eval_batches(ev, s["EVAL_BS"], s["EVAL_BS"] * s["EVAL_BATCHES"])):
    for k in FEATURES: arrays[f"eval{j}/{k}"] = b[k]
  np.savez_compressed(out / "batches.npz", **arrays)


# The extra cases (subfolders of the fixture): the fp32 case's initial weights and batches (batches.npz,
# eval_batches.npz of the fixture root), other settings. `float`: DEFAULT_FLOAT (and SUM_DTYPE) of tinygrad;
# `gpus`: devices train_bert's way ([f"{Device.DEFAULT}:{i}"], parameters replicated with to_, every batch tensor
# shard_ on axis 0 by train_step_bert itself); `plan`: t = a train step, e = an eval over EVAL_BATCHES batches as
# train_bert runs it (FREE_INTERMEDIATE: train_step_bert.captured.free_intermediates() before, eval_step_bert's
# after, as train_bert at e0139fa does by default); `pre_losses`: also the masked-LM / next-sentence losses at the
# weights before each update (an extra forward outside the jit; off where the eval-in-between must run as
# train_bert does, nothing else in between).
CASES = {
  "half": {"float": "HALF", "sum_dtype": "HALF", "gpus": 1, "loss_scaler": 2.0 ** 11, "plan": "ttttte",
           "free_intermediate": False, "pre_losses": True},
  "gpus2": {"float": "FLOAT", "sum_dtype": None, "gpus": 2, "loss_scaler": 1.0, "plan": "ttttte",
            "free_intermediate": False, "pre_losses": True},
  "eval-between": {"float": "FLOAT", "sum_dtype": None, "gpus": 1, "loss_scaler": 1.0, "plan": "tttette",
                   "free_intermediate": True, "pre_losses": False},
  # the same with FREE_INTERMEDIATE=0: the continuation the eval should leave alone
  "eval-between-kept": {"float": "FLOAT", "sum_dtype": None, "gpus": 1, "loss_scaler": 1.0, "plan": "tttette",
                        "free_intermediate": False, "pre_losses": False},
}
SAMPLED = 64  # elements of each weight tensor kept in a case's weights.npz (plus float64 sum and sum of squares)


def sampled_index(name: str, size: int) -> np.ndarray:
  """Fixed flat indices of a tensor kept in a case's weights.npz (the same on both sides)."""
  rng = np.random.Generator(np.random.PCG64([4321, zlib.crc32(name.encode())]))
  return np.sort(rng.choice(size, size=min(SAMPLED, size), replace=False)).astype(np.int64)


def record_case(co: Path, root: Path, name: str, commit: str | None) -> None:
  """One extra case into root/name/: expected.json and weights.npz (the fixture's fp32 inputs must exist)."""
  from safetensors.numpy import save_file
  c = CASES[name]
  out = root / name
  out.mkdir(parents=True, exist_ok=True)
  w = init_weights()
  if weights_digest(w) != (root / "init.sha256").read_text().strip():
    raise SystemExit(f"{root}/init.sha256: init_weights() no longer makes those weights; record the fp32 case first")
  save_file(w, str(out / "init.safetensors"), metadata={"seed": str(SETTINGS["SEED"])})
  env = child_env(co)
  env.update(DEFAULT_FLOAT=c["float"], **({"SUM_DTYPE": c["sum_dtype"]} if c["sum_dtype"] else {}))
  from tools.tinygrad_parity_programs import CASE_PROGRAM
  try:
    subprocess.run([sys.executable, "-c", CASE_PROGRAM, str(out), json.dumps(SETTINGS), str(root), json.dumps(c)],
                   cwd=co, env=env, check=True)
  finally:
    (out / "init.safetensors").unlink()
  run = json.loads((out / "expected_run.json").read_text())
  (out / "expected_run.json").unlink()
  expected = {"tinygrad_commit": commit, "case": name, "settings": SETTINGS, "case_settings": c, "device": "CPU",
              "dropout": "off", **run}
  (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
  print(f"wrote {out}/{{expected.json,weights.npz}}")


def child_env(co: Path) -> dict[str, str]:
  s = SETTINGS
  drop = ("DEV", "DEFAULT_FLOAT", "SUM_DTYPE", "BEAM", "USE_ATOMICS", "PYTHONPATH", "GPUS", "FREE_INTERMEDIATE", "RESET_STEP")
  env = {k: v for k, v in os.environ.items() if k not in drop}
  env.update(PYTHONPATH=str(co), PARITY_REPO=str(REPO), CPU="1", DEV="CPU", BERT_SIZE="tiny",
             BERT_LAYERS=str(s["BERT_LAYERS"]), DISABLE_DROPOUT="1", JIT="1")
  return env


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (the commit is read from --commit or git)")
  ap.add_argument("--out", type=Path, default=REPO / "tests/fixtures/tinygrad-parity")
  ap.add_argument("--shards", type=Path, default=REPO / "results/demo/shards")
  ap.add_argument("--eval", type=Path, default=REPO / "results/demo/eval/eval.shard")
  ap.add_argument("--commit", default=None, help="the tinygrad commit the checkout was made from (recorded)")
  ap.add_argument("--case", action="append", choices=["fp32", *CASES], default=None,
                  help="what to record (repeatable; default: all). fp32 (the fixture root) reads the demo shards; "
                       "the others reuse the root's init.sha256, batches.npz and eval_batches.npz")
  a = ap.parse_args(argv)
  co = a.checkout.resolve()
  if not (co / "examples/mlperf/model_train.py").is_file() or not (co / "extra/models/bert.py").is_file():
    print(f"{co}: not a tinygrad work tree with examples/mlperf/model_train.py and extra/models/bert.py; "
          f"make one with `git archive <commit> | tar -x -C DIR`", file=sys.stderr)
    return 2
  a.out = a.out.resolve()
  a.out.mkdir(parents=True, exist_ok=True)
  commit = a.commit
  if commit is None and (co / ".git").exists():
    commit = subprocess.run(["git", "-C", str(co), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
  cases = a.case or ["fp32", *CASES]
  if "fp32" in cases: record_fp32(co, a.out, a.shards, a.eval, commit)
  for name in cases:
    if name != "fp32": record_case(co, a.out, name, commit)
  return 0


def record_fp32(co: Path, out: Path, shards: Path, eval_path: Path, commit: str | None) -> None:
  from tools.tinygrad_parity_programs import FP32_PROGRAM
  write_inputs(out, shards, eval_path)
  s = SETTINGS
  subprocess.run([sys.executable, "-c", FP32_PROGRAM, str(out), json.dumps(s)], cwd=co, env=child_env(co), check=True)
  run = json.loads((out / "expected_run.json").read_text())
  (out / "expected_run.json").unlink()
  (out / "init.safetensors").unlink()  # 17 MB: regenerated by init_weights(), checked against init.sha256
  expected = {"tinygrad_commit": commit, "settings": s, "device": "CPU", "dtype": "float32", "dropout": "off", **run}
  (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
  print(f"wrote {out}/{{init.sha256,batches.npz,eval_batches.npz,weights.npz,expected.json}}")


if __name__ == "__main__":
  raise SystemExit(main())

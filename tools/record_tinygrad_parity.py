#!/usr/bin/env python3
"""Record what tinygrad's own BERT trainer computes, as the fixture of tests/train/test_parity.py.

    python tools/record_tinygrad_parity.py CHECKOUT --out tests/data/tinygrad-parity/ \
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
then the subprocess runs, on CPU in fp32 with dropout off (DISABLE_DROPOUT=1; tinygrad's and this project's
dropout masks come from different random streams), tinygrad's `train_step_bert` 5 times with its LAMB groups
and `PolynomialDecayWithWarmup`, and `eval_step_bert` on the eval batches, and writes
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


# Runs inside the tinygrad checkout (its own tinygrad package on PYTHONPATH). This is this project's driver
# code calling tinygrad's functions; it copies none of them.
CHILD_MODEL = r'''
import json, os, sys
import numpy as np
out = sys.argv[1]; S = json.loads(sys.argv[2])
from tinygrad import Tensor, dtypes
from tinygrad.nn.state import get_state_dict, safe_load
from tinygrad.nn.optim import LAMB, OptimizerGroup
from extra.lr_scheduler import LRSchedulerGroup
from examples.mlperf.model_train import train_step_bert, eval_step_bert
from examples.mlperf.helpers import get_mlperf_bert_model
from examples.mlperf.lr_schedulers import PolynomialDecayWithWarmup
from examples.mlperf.dataloader import process_batch_bert
sys.path.insert(0, os.environ["PARITY_REPO"])
from tools.record_tinygrad_parity import tinygrad_name, kept_rows

FEATURES = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
            "next_sentence_labels"]
Tensor.manual_seed(S["SEED"])
model = get_mlperf_bert_model()
sd = get_state_dict(model)
init = safe_load(os.path.join(out, "init.safetensors"))
seen = set()
for name, t in init.items():
  key, tr = tinygrad_name(name)
  arr = t.numpy()
  sd[key].assign(Tensor(np.ascontiguousarray(arr.T if tr else arr), dtype=sd[key].dtype)).realize()
  seen.add(key)
missing = [k for k in sd if k not in seen and k != "cls.predictions.embedding_weight"]
assert not missing, missing
batches = np.load(os.path.join(sys.argv[3] if len(sys.argv) > 3 else out, "batches.npz"))
def batch(prefix):  # as tinygrad's loader hands them over: per-sample dicts of (1, ...) arrays -> process_batch_bert
  n = batches[f"{prefix}/input_ids"].shape[0]
  return process_batch_bert([{k: batches[f"{prefix}/{k}"][i:i+1] for k in FEATURES} for i in range(n)])

'''

CHILD_OPTIM = r'''
params_no_wd = [v for k, v in sd.items() if "bias" in k or "LayerNorm" in k]
params = [x for x in dict.fromkeys(sd.values()) if x not in set(params_no_wd)]
lr = S["OPT_BASE_LEARNING_RATE"]
opt_wd = LAMB(params, lr=lr, b1=S["OPT_LAMB_BETA_1"], b2=S["OPT_LAMB_BETA_2"], eps=S["EPSILON"], weight_decay=S["DECAY"], adam=False)
opt_no = LAMB(params_no_wd, lr=lr, b1=S["OPT_LAMB_BETA_1"], b2=S["OPT_LAMB_BETA_2"], eps=S["EPSILON"], weight_decay=0.0, adam=False)
opt = OptimizerGroup(opt_wd, opt_no)
sch = LRSchedulerGroup(PolynomialDecayWithWarmup(opt_wd, lr, 0, S["TRAIN_STEPS"], S["NUM_WARMUP_STEPS"], power=S["POLY_POWER"]),
                       PolynomialDecayWithWarmup(opt_no, lr, 0, S["TRAIN_STEPS"], S["NUM_WARMUP_STEPS"], power=S["POLY_POWER"]))
'''

CHILD = CHILD_MODEL + CHILD_OPTIM + r'''
GPUS = [f"{Tensor([0]).device}"]
steps = []
for i in range(S["STEPS"]):
  d = batch(f"train{i}")
  Tensor.training = False
  lm, sr = model(d["input_ids"], d["input_mask"], d["masked_lm_positions"], d["segment_ids"])
  mlm = model.sparse_categorical_crossentropy(lm, d["masked_lm_ids"], ignore_index=d["masked_lm_weights"]).item()
  nsp = sr.binary_crossentropy_logits(d["next_sentence_labels"]).item()
  lr_used = opt_wd.lr.item()
  Tensor.training = True
  loss, norm, lr_ret = train_step_bert(model, opt, sch, 1.0, GPUS, 1, **{f"{k}0": v for k, v in batch(f"train{i}").items()})
  steps.append({"step": i, "loss": loss.item(), "masked_lm_loss": mlm, "next_sentence_loss": nsp, "lr": lr_used,
                "lr_returned": lr_ret.item(), "global_norm": norm.item()})
  print(json.dumps(steps[-1]), flush=True)
Tensor.training = False
# eval batches whose labels are partly the model's own predictions (a 5-step model predicts nothing right): in eval
# batch j, masked position p of row r (weight 1) gets the predicted id when (7 r + p) % (j + 2) == 0, so the two
# batches have different accuracies and the per-batch mean differs from the pooled accuracy
ev = {}
for j in range(S["EVAL_BATCHES"]):
  d = batch(f"eval{j}")
  lm, _ = model(d["input_ids"], d["input_mask"], d["masked_lm_positions"], d["segment_ids"])
  pred = lm.argmax(-1).numpy()
  ids, w = batches[f"eval{j}/masked_lm_ids"].copy(), batches[f"eval{j}/masked_lm_weights"]
  r, p = np.meshgrid(np.arange(ids.shape[0]), np.arange(ids.shape[1]), indexing="ij")
  pick = (w > 0) & ((7 * r + p) % (j + 2) == 0)
  ids[pick] = pred[pick]
  for k in FEATURES: ev[f"evalx{j}/{k}"] = ids if k == "masked_lm_ids" else batches[f"eval{j}/{k}"]
np.savez_compressed(os.path.join(out, "eval_batches.npz"), **ev)
evals = []
for j in range(S["EVAL_BATCHES"]):
  n = ev[f"evalx{j}/input_ids"].shape[0]
  d = process_batch_bert([{k: ev[f"evalx{j}/{k}"][i:i+1] for k in FEATURES} for i in range(n)])
  acc, nsp_acc, lm_loss, nsp_loss = eval_step_bert(model, d["input_ids"], d["segment_ids"], d["input_mask"],
      d["masked_lm_positions"], d["masked_lm_ids"], d["masked_lm_weights"], d["next_sentence_labels"], GPUS)
  evals.append({"masked_lm_accuracy": acc.item(), "next_sentence_accuracy": nsp_acc.item(),
                "masked_lm_loss": lm_loss.item(), "next_sentence_loss": nsp_loss.item()})
w = {}
for name in init:
  key, tr = tinygrad_name(name)
  arr = sd[key].numpy()
  arr = arr.T if tr else arr
  w[f"sum/{name}"] = np.array(arr.astype(np.float64).sum())
  w[f"sumsq/{name}"] = np.array((arr.astype(np.float64) ** 2).sum())
  if arr.ndim == 2 and arr.shape[0] >= 512:
    w[f"rows/{name}"] = kept_rows(arr.shape[0]); w[f"value/{name}"] = np.ascontiguousarray(arr[w[f"rows/{name}"]])
  else: w[f"value/{name}"] = np.ascontiguousarray(arr)
np.savez_compressed(os.path.join(out, "weights.npz"), **w)
json.dump({"steps": steps, "eval": evals,
           "eval_mean_masked_lm_accuracy": sum(e["masked_lm_accuracy"] for e in evals) / len(evals)},
          open(os.path.join(out, "expected_run.json"), "w"), indent=1)
'''


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


CHILD_DEVICES = r"""
C = json.loads(sys.argv[4])
from tinygrad import Device
from tinygrad.nn.state import get_parameters
from tools.record_tinygrad_parity import sampled_index
GPUS = [f"{Device.DEFAULT}:{i}" for i in range(C["gpus"])]
for x in GPUS: Device[x]
if len(GPUS) > 1:
  for p in get_parameters(model): p.to_(GPUS)
"""

CHILD_CASE = r"""
# memoryview has no fp16 format before Python 3.12: a half scalar is read through a cast (outside the jitted steps)
def num(t): return (t.cast(dtypes.float32) if t.dtype.itemsize == 2 else t).item()
ev = np.load(os.path.join(sys.argv[3], "eval_batches.npz"))
def ebatch(j):
  n = ev[f"evalx{j}/input_ids"].shape[0]
  return process_batch_bert([{k: ev[f"evalx{j}/{k}"][i:i+1] for k in FEATURES} for i in range(n)])
state = {f"model/{k}": v for k, v in sd.items()}
for g, o in (("wd", opt_wd), ("no_wd", opt_no)):
  state.update({f"optim_{g}/m{i}": t for i, t in enumerate(o.m)}); state.update({f"optim_{g}/v{i}": t for i, t in enumerate(o.v)})
  state.update({f"optim_{g}/b1_t": o.b1_t, f"optim_{g}/b2_t": o.b2_t, f"optim_{g}/lr": o.lr})
def bufs_of(t):
  b = t.uop.base.realized
  return [b] if not hasattr(b, "bufs") else list(b.bufs)
def freed_by(jit):  # what CapturedJit.free_intermediates() deallocates (its own update_depends), before it runs
  from tinygrad.engine.jit import update_depends
  dep = set([None]); update_depends(dep, jit.captured.jit_cache); dep.discard(None)
  names = sorted(k for k, t in state.items() if any(b in dep for b in bufs_of(t)))
  return {"buffers": len(dep), "bytes": int(sum(b.nbytes for b in dep)), "state_tensors_freed": names}
dt = {"params": sorted({str(t.dtype) for t in sd.values()})}
steps, evals, frees, i = [], [], [], 0
lr_used = num(opt_wd.lr)
for what in C["plan"]:
  if what == "t":
    d = batch(f"train{i}")
    row = {"step": i}
    if C["pre_losses"]:
      Tensor.training = False
      dp = batch(f"train{i}")  # tensors of their own: train_step_bert shards d itself
      for t in dp.values(): t.shard_(GPUS, axis=0) if len(GPUS) > 1 else t.to_(GPUS[0])
      lm, sr = model(dp["input_ids"], dp["input_mask"], dp["masked_lm_positions"], dp["segment_ids"])
      dt.update(lm_logits=str(lm.dtype), seq_relationship_logits=str(sr.dtype))
      mlm_t = model.sparse_categorical_crossentropy(lm, dp["masked_lm_ids"], ignore_index=dp["masked_lm_weights"])
      nsp_t = sr.binary_crossentropy_logits(dp["next_sentence_labels"])
      dt.update(masked_lm_loss=str(mlm_t.dtype), next_sentence_loss=str(nsp_t.dtype))
      row.update(masked_lm_loss=num(mlm_t), next_sentence_loss=num(nsp_t))
    Tensor.training = True
    loss, norm, lr_ret = train_step_bert(model, opt, sch, C["loss_scaler"], GPUS, 1, **{f"{k}0": v for k, v in d.items()})
    dt.update(loss=str(loss.dtype), grads=sorted({str(t.grad.dtype) for t in opt.params if t.grad is not None}))
    row.update(loss=num(loss), lr=lr_used, lr_returned=num(lr_ret), global_norm=num(norm))
    lr_used = row["lr_returned"]
    steps.append(row); print(json.dumps(row), flush=True)
    i += 1
    continue
  free = C["free_intermediate"] and train_step_bert.captured is not None
  if free:
    frees.append({"after_step": i, "jit": "train_step_bert", **freed_by(train_step_bert)})
    train_step_bert.captured.free_intermediates()
  Tensor.training = False
  accs = []
  for j in range(S["EVAL_BATCHES"]):
    e = ebatch(j)
    acc, nsp_acc, lm_loss, nsp_loss = eval_step_bert(model, e["input_ids"], e["segment_ids"], e["input_mask"],
        e["masked_lm_positions"], e["masked_lm_ids"], e["masked_lm_weights"], e["next_sentence_labels"], GPUS)
    accs.append({"masked_lm_accuracy": num(acc), "next_sentence_accuracy": num(nsp_acc),
                 "masked_lm_loss": num(lm_loss), "next_sentence_loss": num(nsp_loss)})
  if C["free_intermediate"] and eval_step_bert.captured is not None:
    frees.append({"after_step": i, "jit": "eval_step_bert", **freed_by(eval_step_bert)})
    eval_step_bert.captured.free_intermediates()
  evals.append({"after_step": i, "batches": accs,
                "mean_masked_lm_accuracy": sum(a["masked_lm_accuracy"] for a in accs) / len(accs)})
  print(json.dumps(evals[-1]), flush=True)
w = {}
for name in init:
  key, tr = tinygrad_name(name)
  t = sd[key]
  arr = (t.to(t.device[0]) if isinstance(t.device, tuple) else t).numpy()
  arr = arr.T if tr else arr
  w[f"sum/{name}"] = np.array(arr.astype(np.float64).sum())
  w[f"sumsq/{name}"] = np.array((arr.astype(np.float64) ** 2).sum())
  w[f"value/{name}"] = np.ascontiguousarray(arr.reshape(-1)[sampled_index(name, arr.size)])
np.savez_compressed(os.path.join(out, "weights.npz"), **w)
json.dump({"steps": steps, "evals": evals, "free_intermediates": frees, "dtypes": dt,
           "devices": [str(g) for g in GPUS], "param_device": str(sd["bert.embeddings.word_embeddings.weight"].device)},
          open(os.path.join(out, "expected_run.json"), "w"), indent=1)
"""


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
  prog = CHILD_MODEL + CHILD_DEVICES + CHILD_OPTIM + CHILD_CASE
  try:
    subprocess.run([sys.executable, "-c", prog, str(out), json.dumps(SETTINGS), str(root), json.dumps(c)],
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
  ap.add_argument("--out", type=Path, default=REPO / "tests/data/tinygrad-parity")
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
  write_inputs(out, shards, eval_path)
  s = SETTINGS
  subprocess.run([sys.executable, "-c", CHILD, str(out), json.dumps(s)], cwd=co, env=child_env(co), check=True)
  run = json.loads((out / "expected_run.json").read_text())
  (out / "expected_run.json").unlink()
  (out / "init.safetensors").unlink()  # 17 MB: regenerated by init_weights(), checked against init.sha256
  expected = {"tinygrad_commit": commit, "settings": s, "device": "CPU", "dtype": "float32", "dropout": "off", **run}
  (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
  print(f"wrote {out}/{{init.sha256,batches.npz,eval_batches.npz,weights.npz,expected.json}}")

if __name__ == "__main__":
  raise SystemExit(main())

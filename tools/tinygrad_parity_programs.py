"""The programs tools/record_tinygrad_parity.py runs inside a tinygrad checkout (`python -c`, the checkout's own
tinygrad package on PYTHONPATH, argv: OUT, the settings as JSON, [the fixture root, the case as JSON]). They are
this project's driver code calling tinygrad's functions (train_step_bert, eval_step_bert, its LAMB groups and
PolynomialDecayWithWarmup); they copy none of them. Each writes OUT/expected_run.json and OUT/weights.npz.
"""

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

CHILD_FP32 = r'''
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


# the fp32 fixture (the root): 5 train steps, then the eval batches relabelled with the model's predictions
FP32_PROGRAM = CHILD_MODEL + CHILD_OPTIM + CHILD_FP32
# an extra case of record_tinygrad_parity.CASES: its devices, dtype and plan of train steps and evals
CASE_PROGRAM = CHILD_MODEL + CHILD_DEVICES + CHILD_OPTIM + CHILD_CASE

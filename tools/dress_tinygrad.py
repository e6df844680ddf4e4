#!/usr/bin/env python3
"""The dress rehearsal of tinygrad's own BERT step: train_step_bert and eval_step_bert of a tinygrad checkout
(examples/mlperf/model_train.py, e.g. the v5.1 commit e0139fa), with the checkout's own tinygrad, on NULL devices at a
platform's settings; the same figures `python -m mlperf_bert dress` gives for this project's step.

    git -C <mirror of github:tinygrad/tinygrad> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
    python tools/dress_tinygrad.py /tmp/tg --platform tinybox_green --layers 2,4 \
        --commit e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 --out tests/fixtures/dress-tinygrad/tinybox_green.json

Each depth runs in a subprocess with the checkout first on PYTHONPATH (nothing of tinygrad is copied here) and the
platform's settings in the environment as run_and_time.sh exports them (GPUS, BS, EVAL_BS, DEFAULT_FLOAT, SUM_DTYPE,
BERT_LAYERS, FREE_INTERMEDIATE), DEV=NULL and BEAM=0. tinygrad at e0139fa has no NULL target (DEV=NULL:CUDA:sm_89 is
0.14's), so its kernels are rendered by its plain NULL renderer and compiled by nothing: compare it with this
project's dress at DRESS_TARGET=NULL:plain. Like train_bert, it builds the model (weights zeroed, as its INIT phase),
LAMB in two groups with PolynomialDecayWithWarmup, and calls train_step_bert three times (un-jitted, captured,
replayed) on get_fake_data_bert batches, frees the intermediates (FREE_INTERMEDIATE) and calls eval_step_bert three
times. Counted from the captured JITs' items (jit_cache: one item a kernel a device, before graph batching):
kernels a device, distinct programs, copies and their bytes, FLOPs and bytes (tinygrad's estimates); memory: the
bytes allocated a device (its Buffer allocate/deallocate, watched), at most, during each step.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child() -> None:
  """Runs inside the checkout's tinygrad (PYTHONPATH): one depth, printed as one JSON line."""
  from collections import defaultdict
  from tinygrad import Device, Tensor, dtypes
  from tinygrad.device import Buffer
  from tinygrad.helpers import getenv
  from tinygrad.uop.ops import sym_infer
  from tinygrad.nn.optim import LAMB, OptimizerGroup
  from tinygrad.nn.state import get_parameters, get_state_dict
  from extra.lr_scheduler import LRSchedulerGroup
  from examples.mlperf import model_train
  from examples.mlperf.helpers import get_fake_data_bert, get_mlperf_bert_model
  from examples.mlperf.lr_schedulers import PolynomialDecayWithWarmup

  held, peak = defaultdict(int), defaultdict(int)
  alloc, dealloc = Buffer.allocate, Buffer.deallocate
  def allocate(self, *a, **k):
    ret = alloc(self, *a, **k)
    if self._base is None:
      held[self.device] += self.nbytes
      peak[self.device] = max(peak[self.device], held[self.device])
    return ret
  def deallocate(self):
    if self._base is None and self.is_allocated(): held[self.device] -= self.nbytes
    return dealloc(self)
  Buffer.allocate, Buffer.deallocate = allocate, deallocate

  GPUS = [f"{Device.DEFAULT}:{i}" for i in range(getenv("GPUS", 1))]
  BS, EVAL_BS = getenv("BS"), getenv("EVAL_BS")
  Tensor.manual_seed(12345)
  model = get_mlperf_bert_model()
  for p in get_parameters(model): p.assign(Tensor.zeros_like(p).contiguous()).realize()
  parameters = get_parameters(model)
  if len(GPUS) > 1:
    for p in parameters: p.to_(GPUS)
  no_wd = [v for k, v in get_state_dict(model).items() if "bias" in k or "LayerNorm" in k]
  wd = [x for x in parameters if x not in set(no_wd)]
  opt_wd = LAMB(wd, lr=0.000175, eps=1e-6, weight_decay=0.01, adam=False)
  opt_no_wd = LAMB(no_wd, lr=0.000175, eps=1e-6, weight_decay=0.0, adam=False)
  optimizer = OptimizerGroup(opt_wd, opt_no_wd)
  scheduler = LRSchedulerGroup(*(PolynomialDecayWithWarmup(o, 0.000175, 0, 40000, 1, power=1.0) for o in (opt_wd, opt_no_wd)))
  loss_scaler = 2.0 ** 11 if dtypes.default_float == dtypes.float16 else 1.0
  state = [*get_parameters(optimizer)]
  devs = [Device.canonicalize(d) for d in GPUS]

  def persistent():
    out, seen = {d: 0 for d in devs}, set()
    for t in state:
      bufs = t.uop.base.realized
      for b in (bufs.bufs if hasattr(bufs, "bufs") else [bufs] if bufs is not None else []):
        base = b._base or b
        if id(base) in seen or base.device not in out: continue
        seen.add(id(base)); out[base.device] += base.nbytes
    return out

  def items(jit):
    kernels, programs, copies, copy_bytes, flops, mem = defaultdict(int), set(), 0, 0, 0, 0
    for ei in jit.captured.jit_cache:
      prg, name = ei.prg, type(ei.prg).__name__
      ops, nbytes = sym_infer(prg.estimates.ops, {}), sym_infer(prg.estimates.mem, {})
      flops, mem = flops + int(ops), mem + int(nbytes)
      if name == "CompiledRunner":
        kernels[Device.canonicalize(prg.device)] += 1
        programs.add(prg.p.src)
      elif name in ("BufferCopy", "BufferXfer"):
        copies += 1
        copy_bytes += ei.bufs[0].nbytes
    return {"kernels_per_device": dict(kernels), "kernels": sum(kernels.values()), "programs": len(programs),
            "copies": copies, "copy_bytes": copy_bytes, "flops": flops, "bytes": mem}

  out = {"layers": getenv("BERT_LAYERS"), "batch_size": BS, "eval_batch_size": EVAL_BS, "devices": devs}
  for d in devs: peak[d] = held[d]
  for i in range(3):
    data = get_fake_data_bert(BS)
    for k, v in list(data.items()): data[f"{k}0"] = data.pop(k)
    Tensor.training = True
    model_train.train_step_bert(model, optimizer, scheduler, loss_scaler, GPUS, 1, **data)
    if i == 0: out["persistent"] = persistent()   # the LAMB state is realized by the first step
  out["train_peak"] = {d: peak[d] for d in devs}
  out["train"] = items(model_train.train_step_bert)
  if getenv("FREE_INTERMEDIATE", 1): model_train.train_step_bert.captured.free_intermediates()
  out["between"] = {d: held[d] for d in devs}
  for d in devs: peak[d] = held[d]
  Tensor.training = False
  for _ in range(3):
    e = get_fake_data_bert(EVAL_BS)
    model_train.eval_step_bert(model, e["input_ids"], e["segment_ids"], e["input_mask"], e["masked_lm_positions"],
                               e["masked_lm_ids"], e["masked_lm_weights"], e["next_sentence_labels"], GPUS)
  out["eval_peak"] = {d: peak[d] for d in devs}
  out["eval"] = items(model_train.eval_step_bert)
  print("DRESS " + json.dumps(out), flush=True)


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (git archive of the commit)")
  ap.add_argument("--platform", default="tinybox_green", help="profiles/NAME/platform.yaml")
  ap.add_argument("--layers", default="2,4", help="the depths, comma-separated (default 2,4)")
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override platform keys")
  ap.add_argument("--commit", required=True, help="the checkout's commit (recorded)")
  ap.add_argument("--out", type=Path, required=True)
  a = ap.parse_args()
  sys.path.insert(0, str(REPO))
  from mlperf_bert.cli import _parse_set
  from mlperf_bert.train.hparams import load_platform, resolve
  s = resolve(load_platform(REPO / "profiles" / a.platform / "platform.yaml"), _parse_set(a.set))
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEV")}
  env.update(PYTHONPATH=str(a.checkout), DEV="NULL", BEAM="0", GPUS=str(s.gpus), BS=str(s.batch_size),
             EVAL_BS=str(s.eval.batch_size), DEFAULT_FLOAT=s.float_type.upper(), FREE_INTERMEDIATE=str(s.free_intermediate or 0),
             BERT_SIZE="tiny" if s.model.hidden_size == 128 else "large",
             **({"SUM_DTYPE": s.tinygrad.sum_dtype} if s.tinygrad.sum_dtype else {}),
             **({"PARALLEL": str(s.tinygrad.parallel)} if s.tinygrad.parallel is not None else {}))
  points = []
  for n in (int(x) for x in a.layers.split(",")):
    p = subprocess.run([sys.executable, __file__, "--child"], cwd=a.checkout, env={**env, "BERT_LAYERS": str(n)},
                       capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("DRESS ")]
    if p.returncode or not line: sys.exit(f"tinygrad's step at {n} layers failed:\n{p.stderr[-4000:]}")
    points.append(json.loads(line[0][6:]))
    print(f"{n} layers: train {points[-1]['train']['kernels']} kernels, {points[-1]['train']['flops'] / 1e12:.2f} TFLOP",
          file=sys.stderr)
  a.out.parent.mkdir(parents=True, exist_ok=True)
  a.out.write_text(json.dumps({"tinygrad_commit": a.commit, "platform": a.platform, "renderer": "NULL (plain)",
                               "settings": {k: env[k] for k in ("GPUS", "BS", "EVAL_BS", "DEFAULT_FLOAT")},
                               "points": points}, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  if sys.argv[1:] == ["--child"]: child()
  else: sys.exit(main())

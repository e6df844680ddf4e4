#!/usr/bin/env python3
"""The dress of tinygrad's own BERT step: train_step_bert and eval_step_bert of a tinygrad checkout
(examples/mlperf/model_train.py, e.g. the v5.1 commit e0139fa), with the checkout's own tinygrad, on NULL devices at a
platform's settings; the same figures `python -m mlperf_bert dress` gives for this project's step.

    git -C <mirror of github:tinygrad/tinygrad> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
    python tools/dress_tinygrad.py /tmp/tg --platform tinybox_green --layers 2,4 --set BS=96 EVAL_BS=96 \
        --commit e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 --out tests/fixtures/dress-tinygrad/tinybox_green-e0139fa-bs96.json

Each depth runs in a subprocess with the checkout first on PYTHONPATH (nothing of tinygrad is copied here) and the
platform's settings in the environment as run_and_time.sh exports them (GPUS, BS, EVAL_BS, DEFAULT_FLOAT, SUM_DTYPE,
BERT_LAYERS), DEV=NULL and BEAM=0. FREE_INTERMEDIATE is the checkout's own default in train_bert (tinybox_green's
scripts never set it; it flipped at 77b5e6774e, 5034c6fb37 and 6cad622f59) unless `--set FREE_INTERMEDIATE=N`.
tinygrad of 2025 has no NULL target (DEV=NULL:CUDA:sm_89 is 0.14's), so its kernels are rendered by its plain NULL
renderer and compiled by nothing: compare it with this project's dress at DRESS_TARGET=NULL:plain; where its NULL
allocator has no sub-buffers (before 2025-08-10) the tool gives it the one-line `_offset` tinygrad added then, so the
JIT's memory planner packs the intermediates as on a GPU. Like train_bert, it builds the model (weights zeroed, as its
INIT phase), LAMB in two groups with PolynomialDecayWithWarmup, and calls train_step_bert three times (un-jitted,
captured, replayed) on batches made as the loader makes them (numpy arrays on the CPU), frees the intermediates as
train_bert does around an eval (FREE_INTERMEDIATE), calls eval_step_bert three times, frees its intermediates and
calls train_step_bert once more. train_step_bert is the module's, or (from 4562f217e1) the one train_bert defines,
compiled from the checkout's source with the locals it reads. Counted from the captured JITs' items (jit_cache: one
item a kernel a device, before graph batching): kernels a device, distinct programs, copies and their bytes, FLOPs
and bytes (tinygrad's estimates); memory: the bytes allocated a device (its Buffer allocate/deallocate, watched), at
most, during each step, and what each free_intermediates deallocated; the CPU seconds of each depth.
"""
from __future__ import annotations
import argparse, ast, json, os, resource, subprocess, sys, time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def step_source(path: str) -> tuple[ast.FunctionDef | None, Any]:
  """From the checkout's model_train.py: train_bert's nested train_step_bert (tinygrad moved it into train_bert at
  4562f217e1; None where it is a module-level function) and FREE_INTERMEDIATE's default in train_bert (its
  `getenv("FREE_INTERMEDIATE", d)`: d, or 0 where getenv has no default)."""
  tree = ast.parse(Path(path).read_text())
  tb = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train_bert")
  nested = next((n for n in ast.walk(tb) if isinstance(n, ast.FunctionDef) and n.name == "train_step_bert"), None)
  fi = [c for c in ast.walk(tb) if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "getenv"
        and c.args and isinstance(c.args[0], ast.Constant) and c.args[0].value == "FREE_INTERMEDIATE"]
  default = ast.literal_eval(fi[0].args[1]) if fi and len(fi[0].args) > 1 else 0 if fi else None
  return nested, default


def bind_nested(fn: ast.FunctionDef, module, scope: dict) -> Any:
  """train_bert's own train_step_bert (its TinyJit included), compiled from the checkout's source with train_bert's
  locals it reads (model, optimizer_group, ...) given in `scope`; exits naming a local this tool does not build."""
  import builtins
  own = {a.arg for a in fn.args.args} | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
  free = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - own
  missing = sorted(free - set(vars(module)) - set(vars(builtins)) - set(scope))
  if missing: sys.exit(f"{module.__file__}: train_bert's train_step_bert reads {missing}, which this tool does not build")
  ns = {**vars(module), **scope}
  exec(compile(ast.Module(body=[fn], type_ignores=[]), module.__file__, "exec"), ns)
  return ns[fn.name]


def train_bert_state(GPUS: list[str]) -> tuple[Any, Any, Any, float]:
  """(model, optimizer group, scheduler group, loss scaler) as the checkout's train_bert builds them for BERT (LAMB in
  two groups, PolynomialDecayWithWarmup), the weights zeroed (tinygrad's INIT phase) and placed on GPUS. Call it in a
  child whose sys.path holds the checkout's examples/ and extra/ first."""
  from tinygrad import Tensor, dtypes
  from tinygrad.nn.optim import LAMB, OptimizerGroup
  from tinygrad.nn.state import get_parameters, get_state_dict
  from extra.lr_scheduler import LRSchedulerGroup
  from examples.mlperf.helpers import get_mlperf_bert_model
  from examples.mlperf.lr_schedulers import PolynomialDecayWithWarmup
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
  return model, optimizer, scheduler, loss_scaler


def child() -> None:
  """Runs inside the checkout's tinygrad (PYTHONPATH): one depth, printed as one JSON line."""
  import inspect
  from collections import defaultdict
  import numpy as np
  from tinygrad import Device, Tensor, dtypes
  from tinygrad.device import Buffer
  from tinygrad.helpers import getenv
  from tinygrad.uop.ops import sym_infer
  from tinygrad.nn.state import get_parameters
  from examples.mlperf import model_train
  from examples.mlperf.helpers import get_fake_data_bert

  from tinygrad.runtime.ops_null import NullAllocator
  # a GPU's allocator hands out sub-buffers (views), so the JIT's memory planner packs a step's intermediates into one
  # buffer a device; tinygrad's NULL device could not until 5403a4aeaf (2025-08-10, #11606, which added just this)
  offset_shim = not hasattr(NullAllocator, "_offset")
  if offset_shim: NullAllocator._offset = lambda self, buf, offset, size: None
  held, peak, freed = defaultdict(int), defaultdict(int), None
  alloc, dealloc = Buffer.allocate, Buffer.deallocate
  def allocate(self, *a, **k):
    ret = alloc(self, *a, **k)
    if self._base is None:
      held[self.device] += self.nbytes
      peak[self.device] = max(peak[self.device], held[self.device])
    return ret
  def deallocate(self):
    if self.is_allocated():
      if self._base is None: held[self.device] -= self.nbytes
      if freed is not None: freed["bases" if self._base is None else "views"] += 1
    return dealloc(self)
  Buffer.allocate, Buffer.deallocate = allocate, deallocate

  GPUS = [f"{Device.DEFAULT}:{i}" for i in range(getenv("GPUS", 1))]
  BS, EVAL_BS = getenv("BS"), getenv("EVAL_BS")
  nested, fi_default = step_source(model_train.__file__)
  free_intermediate = getenv("FREE_INTERMEDIATE", fi_default or 0)
  model, optimizer, scheduler, loss_scaler = train_bert_state(GPUS)
  state = [*get_parameters(optimizer)]
  devs = [Device.canonicalize(d) for d in GPUS]
  train_step = model_train.train_step_bert if nested is None else bind_nested(nested, model_train, dict(
    model=model, optimizer_group=optimizer, scheduler_group=scheduler, loss_scaler=loss_scaler, GPUS=GPUS))

  def call_train(d):
    """train_step_bert as train_bert calls it at this commit: its parameters by name, a `**kwargs` as the batch's
    keys with the grad_acc index 0 (e0139fa), the batch's input_mask and masked_lm_positions by the step's names."""
    by_name = dict(model=model, optimizer=optimizer, scheduler=scheduler, loss_scaler=loss_scaler, GPUS=GPUS, grad_acc=1,
                   input_ids=d["input_ids"], segment_ids=d["segment_ids"], attention_mask=d["input_mask"],
                   masked_positions=d["masked_lm_positions"], masked_lm_ids=d["masked_lm_ids"],
                   masked_lm_weights=d["masked_lm_weights"], next_sentence_labels=d["next_sentence_labels"])
    args, kwargs = [], {}
    for name, prm in inspect.signature(train_step.fxn).parameters.items():
      if prm.kind is prm.VAR_KEYWORD: kwargs = {f"{k}0": v for k, v in d.items()}
      elif name not in by_name: sys.exit(f"{model_train.__file__}: train_step_bert takes {name!r}, which this tool does not pass")
      else: args.append(by_name[name])
    Tensor.training = True
    return train_step(*args, **kwargs)

  def free(jit) -> dict:
    """The captured step's free_intermediates, as train_bert calls it around an eval: what it deallocated."""
    nonlocal freed
    freed, before = defaultdict(int), sum(held[d] for d in devs)
    jit.captured.free_intermediates()
    out, freed = {**freed, "bytes": before - sum(held[d] for d in devs)}, None
    return out

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

  def batch(bs: int) -> dict:
    """A batch as the checkout's loader makes one (process_batch_bert: Tensors of numpy arrays on the CPU), of
    get_fake_data_bert's keys, shapes and dtypes: its Tensor.empty batch is no input of the JIT ("somehow jit does
    not count empty as input", tinygrad #13661), so the captured step would replay the first batch and
    free_intermediates, which frees what depends on the inputs, free nothing."""
    return {k: Tensor(np.zeros(t.shape, np.float32 if t.dtype == dtypes.float32 else np.int32), dtype=t.dtype, device="CPU")
            for k, t in get_fake_data_bert(bs).items()}

  def mark(): peak.update({d: held[d] for d in devs})
  out = {"layers": getenv("BERT_LAYERS"), "batch_size": BS, "eval_batch_size": EVAL_BS, "devices": devs,
         "free_intermediate": free_intermediate, "free_intermediate_default": fi_default, "null_offset_shim": offset_shim,
         "train_step": "model_train.train_step_bert" if nested is None else "train_bert's train_step_bert"}
  mark()
  for i in range(3):
    call_train(batch(BS))
    if i == 0: out["persistent"] = persistent()   # the LAMB state is realized by the first step
  out["train_peak"] = {d: peak[d] for d in devs}
  out["train"] = items(train_step)
  if free_intermediate: out["freed_train"] = free(train_step)
  out["between"] = {d: held[d] for d in devs}
  mark()
  Tensor.training = False
  for _ in range(3):
    e = batch(EVAL_BS)
    model_train.eval_step_bert(model, e["input_ids"], e["segment_ids"], e["input_mask"], e["masked_lm_positions"],
                               e["masked_lm_ids"], e["masked_lm_weights"], e["next_sentence_labels"], GPUS)
  out["eval_peak"] = {d: peak[d] for d in devs}
  out["eval"] = items(model_train.eval_step_bert)
  if free_intermediate: out["freed_eval"] = free(model_train.eval_step_bert)
  mark()
  call_train(batch(BS))   # the first train step after an eval (the captured step, replayed)
  out["train_after_eval_peak"] = {d: peak[d] for d in devs}
  print("DRESS " + json.dumps(out), flush=True)


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (git archive of the commit)")
  ap.add_argument("--platform", default="tinybox_green", help="platforms/NAME/platform.yaml")
  ap.add_argument("--layers", default="2,4", help="the depths, comma-separated (default 2,4)")
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                  help="override platform keys (BS=96 EVAL_BS=96); FREE_INTERMEDIATE=N only when given: else the "
                       "checkout's own default in train_bert, as its run_and_time.sh leaves it")
  ap.add_argument("--commit", required=True, help="the checkout's commit (recorded)")
  ap.add_argument("--out", type=Path, required=True)
  a = ap.parse_args()
  sys.path.insert(0, str(REPO))
  from mlperf_bert.cli.common import _parse_set
  from mlperf_bert.constants import platform_path
  from mlperf_bert.train.dress.report import tinygrad_prediction
  from mlperf_bert.train.hparams import load_platform, resolve
  over = _parse_set(a.set)
  s = resolve(load_platform(platform_path(REPO, a.platform)), over)
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEV", "FREE_INTERMEDIATE", "RESET_STEP")}
  env.update(PYTHONPATH=str(a.checkout), DEV="NULL", BEAM="0", GPUS=str(s.gpus), BS=str(s.batch_size),
             EVAL_BS=str(s.eval.batch_size), DEFAULT_FLOAT=s.float_type.upper(),
             BERT_SIZE="tiny" if s.model.hidden_size == 128 else "large",
             **({"FREE_INTERMEDIATE": str(s.free_intermediate or 0)} if "FREE_INTERMEDIATE" in over else {}),
             **({"SUM_DTYPE": s.tinygrad.sum_dtype} if s.tinygrad.sum_dtype else {}),
             **({"PARALLEL": str(s.tinygrad.parallel)} if s.tinygrad.parallel is not None else {}))
  points = []
  for n in (int(x) for x in a.layers.split(",")):
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    p = subprocess.run([sys.executable, __file__, "--child"], cwd=a.checkout, env={**env, "BERT_LAYERS": str(n)},
                       capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = [l for l in p.stdout.splitlines() if l.startswith("DRESS ")]
    if p.returncode or not line: sys.exit(f"tinygrad's step at {n} layers failed:\n{p.stderr[-4000:]}")
    points.append({**json.loads(line[0][6:]), "cost": {
      "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1), "wall_s": round(time.monotonic() - t0, 1),
      "max_rss_mb": round(r1.ru_maxrss / 1024)}})
    print(f"{n} layers: train {points[-1]['train']['kernels']} kernels, {points[-1]['train']['flops'] / 1e12:.2f} TFLOP, "
          f"FREE_INTERMEDIATE {points[-1]['free_intermediate']}, {points[-1]['cost']['cpu_s']} CPU s", file=sys.stderr)
  record = {"tinygrad_commit": a.commit, "platform": a.platform, "renderer": "NULL (plain)",
            "settings": {k: env[k] for k in ("GPUS", "BS", "EVAL_BS", "DEFAULT_FLOAT")}
                        | {"FREE_INTERMEDIATE": str(points[0]["free_intermediate"])}, "points": points}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  tmp = a.out.with_name(a.out.name + ".tmp")
  tmp.write_text(json.dumps(record, indent=1) + "\n")
  tmp.replace(a.out)
  if len(points) == 2:
    r = tinygrad_prediction(record)
    print(", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in r["memory"].items()) +
          f"; usable on {r['card']} {r['usable'] / 1e9:.2f} GB: {'fits' if r['fits'] else 'does not fit'}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  if sys.argv[1:] == ["--child"]: child()
  else: sys.exit(main())

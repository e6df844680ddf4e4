"""The measurements of one dress (mlperf_bert/train/dress/): the train and eval steps of a ModelTrainer, as the
train rule builds it, called as a run calls them, and what they launch and hold on each device.

Import it only after the dress exported its environment (run.py; tinygrad reads DEV, DEFAULT_FLOAT, BEAM, ... at import).

One measurement (`measure`) at one depth and batch size:
  1. the trainer (random weights, LAMB state) realized: the persistent state of each device;
  2. three train calls on dummy batches: the first captured by TinyJit (the trainer captures its steps on their first
     call, memory planned by train/jitmem.py), two replayed; the train-step peak is the most bytes any device held at
     once during them (tinygrad's per-device allocation counter, watched at every change);
  3. FREE_INTERMEDIATE as the platform sets it (trainer.free_intermediates of the train step, as run.py before an
     eval): the bytes held between the steps;
  4. three eval calls (EVAL_BS, all rows real): the eval-step peak; FREE_INTERMEDIATE frees the eval step's too;
  5. one train call again (the next step after an eval re-allocates what was freed).
The captured JITs' items (each graph batch opened) give the kernels launched a step per device, the distinct programs,
the copies between devices and their bytes; tinygrad's counters after a jitted replay count one "kernel" per graph
batch, so they are never read for counts. The memory plans of both captures give the timeline of the device that
holds most (timeline.py). It reads tinygrad 0.14.0's JIT internals and refuses another version.
"""
from __future__ import annotations
import collections, dataclasses, gc, time
from importlib.metadata import version
from typing import Any

import numpy as np
from tinygrad import Device, Tensor
from tinygrad.device import CompileError, MultiBuffer
from tinygrad.helpers import GlobalCounters, ansistrip
from tinygrad.engine.realize import estimate_uop, get_call_kernels
from tinygrad.uop.ops import Ops, sym_infer

from mlperf_bert.constants import TINYGRAD_PINNED
from mlperf_bert.errors import UserError
from mlperf_bert.train.model import BertConfig
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.trainer import ModelTrainer, devices_for, fake_batch



class _PeakBytes(collections.defaultdict):
  """tinygrad's GlobalCounters.mem_used_per_device, remembering each device's most bytes since `reset`."""
  def __init__(self, current: dict):
    super().__init__(int, current)
    self.peak: dict[str, int] = dict(current)
  def __setitem__(self, k, v):
    super().__setitem__(k, v)
    if v > self.peak.get(k, 0): self.peak[k] = v
  def reset(self): self.peak = dict(self)


def _watch_memory() -> _PeakBytes:
  if not isinstance(GlobalCounters.mem_used_per_device, _PeakBytes):
    GlobalCounters.mem_used_per_device = _PeakBytes(dict(GlobalCounters.mem_used_per_device))
  return GlobalCounters.mem_used_per_device


def _calls(linear) -> list:
  """The calls of a captured JIT's linear, each graph batch opened."""
  out = []
  for call in linear.src:
    ast = call.src[0]
    if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph": out += _calls(ast.src[0])
    else: out.append(call)
  return out


def jit_items(jit, devices: tuple[str, ...]) -> dict[str, Any]:
  """Kernels a step launches (per device), distinct programs, copies and their bytes, FLOPs and bytes (tinygrad's
  estimates) of a captured TinyJit."""
  kernels = {d: 0 for d in devices}
  programs, names = set(), set()
  copies = copy_bytes = flops = mem = 0
  for call in _calls(jit.captured._linear):
    ast, ks = call.src[0], get_call_kernels(call)
    est = estimate_uop(call)
    flops += len(ks) * int(sym_infer(est.ops, {}))
    mem += len(ks) * int(sym_infer(est.mem, {}))
    if ast.op is Ops.PROGRAM:
      programs.add(ast.key)
      names.add(ast.arg.name)
      for d, _ in ks: kernels[d] = kernels.get(d, 0) + 1
    elif ast.op is Ops.COPY:
      copies += len(ks)
      copy_bytes += len(ks) * int(sym_infer(est.mem, {}))
  return {"kernels_per_device": kernels, "kernels": sum(kernels.values()), "programs": len(programs),
          "copies": copies, "copy_bytes": copy_bytes, "flops": flops, "bytes": mem,
          "calls": call_records(jit)}


def _devices(u) -> list[str]:
  return list(u.device) if isinstance(u.device, tuple) else [u.device]


def ast_keys(sink) -> tuple[str, str]:
  """A kernel's AST key as tinygrad 0.14 keys a program and a BEAM search (its buffers' devices in it), and the key
  of the same AST with each device index dropped (NV:3 -> NV: as tinygrad before the AST carried devices, e0139fa,
  keyed one search for all devices); 16 hex digits each."""
  def kind(d): return tuple(kind(x) for x in d) if isinstance(d, tuple) else str(d).split(":")[0]
  sub = {u: u.replace(arg=dataclasses.replace(u.arg, device=kind(u.arg.device))) for u in sink.toposort()
         if u.op is Ops.PARAM and getattr(u.arg, "device", None) is not None}
  return sink.key.hex()[:16], (sink.substitute(sub) if sub else sink).key.hex()[:16]


def call_records(jit) -> list[dict[str, Any]]:
  """Each call of a captured TinyJit in its order, for the cost model (mlperf_bert/train/cost/): a kernel's name,
  devices, FLOPs and bytes (tinygrad's estimates: ops, lds, mem), launch dimensions (global size in blocks, local size
  in threads), the accumulate dtype of its tensor/matrix-core uops (Ops.WMMA; None without), its AST's keys (ast_keys:
  with and without the devices) and its buffers out and in (a list a device); a copy's bytes, its source and destination devices and buffers. Buffers are numbered by first appearance."""
  ids: dict[Any, int] = {}

  def num(u) -> list[int]:   # each device's buffer of an argument (a MultiBuffer's pieces), numbered
    try: real = u.buffer
    except Exception: real = None   # a jit input or a view tinygrad resolves at launch: the UOp itself
    if real is None: return [ids.setdefault(("uop", u), len(ids))]
    bufs = real.bufs if isinstance(real, MultiBuffer) else [real]
    return [ids.setdefault(id(b._base or b), len(ids)) for b in bufs]

  def per_device(args, idx) -> list[list[int]]:   # each device's buffers of the arguments `idx`, as "devices" orders them
    nums = [num(args[i]) for i in idx]
    return [[n[j] if len(n) > 1 else n[0] for n in nums] for j in range(len(_devices(args[0])))]
  out, keys = [], {}
  for call in _calls(jit.captured._linear):
    ast, args = call.src[0], tuple(s for s in call.src[1:] if not s.is_bound_var)
    est = estimate_uop(call)
    if ast.op is Ops.PROGRAM:
      info = ast.arg
      gs, ls = info.launch_dims({})
      lin = next((s for s in ast.src if s.op is Ops.LINEAR), None)
      # the accumulate dtype of its tensor-core (WMMA) uops: "half", "float", or None without tensor cores
      wmma = next((u for u in lin.src if u.op is Ops.WMMA), None) if lin is not None else None
      tc = None if wmma is None else getattr(wmma.dtype, "base", wmma.dtype).name
      if ast not in keys: keys[ast] = ast_keys(ast.src[0])
      out.append({"k": "kernel", "name": ansistrip(info.name), "devices": _devices(args[0]), "ast": keys[ast][0],
                  "ast_any_device": keys[ast][1], "flops": int(sym_infer(est.ops, {})),
                  "bytes": int(sym_infer(est.mem, {})), "lds": int(sym_infer(est.lds, {})),
                  "global": [int(x) for x in gs], "local": [int(x) for x in ls] if ls else None, "tc": tc,
                  "outs": per_device(args, info.outs), "ins": per_device(args, info.ins)})
    elif ast.op is Ops.COPY:
      out.append({"k": "copy", "name": "copy", "bytes": int(sym_infer(est.mem, {})), "dst": _devices(args[0]),
                  "src": _devices(args[1]), "outs": num(args[0]), "ins": num(args[1])})
  return out


def _bytes_per_device(tensors, devices: tuple[str, ...]) -> dict[str, int]:
  out = {d: 0 for d in devices}
  seen = set()
  for t in tensors:
    real = t.uop.base.realized
    if real is None: continue
    for b in (real.bufs if isinstance(real, MultiBuffer) else [real]):
      base = b._base or b
      if id(base) in seen or base.device not in out: continue
      seen.add(id(base))
      out[base.device] += base.nbytes
  return out


def _held(mem: _PeakBytes, devices, base) -> dict[str, int]:
  gc.collect()
  return {d: mem[d] - base.get(d, 0) for d in devices}


def _three_calls(name: str, call, log) -> list[float]:
  """A jitted step called three times (captured on the first, then replayed): each call's seconds."""
  times = []
  for i in range(3):
    st = time.perf_counter()
    res = call()
    del res
    times.append(round(time.perf_counter() - st, 2))
    log(f"dress: {name} call {i + 1} ({'captured' if i == 0 else 'replayed'}) {times[-1]:.1f} s")
  return times


def _timelines(trainer: ModelTrainer, device: str) -> dict[str, Any]:
  """Each captured step's memory plan on `device` (timeline.py)."""
  from mlperf_bert.train.dress.timeline import timeline
  out: dict[str, Any] = {"device": device}
  for name, jit in (("train", trainer.train_step), ("eval", trainer.eval_step)):
    if name in trainer.plans and jit.captured is not None:
      out[name] = timeline(trainer.plans[name], _calls(jit.captured._linear), device)
  return out


def measure(s: Settings, cfg: BertConfig, seq: int, pred: int, log=print) -> dict[str, Any]:
  """One dress measurement of `s` (its BS, EVAL_BS, GPUS, BERT_LAYERS) on the devices of its DEV; a kernel the
  target's compiler refuses is a one-line error with the compiler's first error."""
  try: return _measure(s, cfg, seq, pred, log)
  except CompileError as e:
    text = str(e).splitlines()
    first = next((l.strip() for l in text if "error" in l.lower() and l.strip() != text[0].strip()), text[0] if text else "")
    raise UserError(f"a kernel of the step does not compile for {s.tinygrad.dev}: {text[0] if text else ''}: {first}; "
                    f"a platform setting may ask for what the target lacks (USE_ATOMICS=1 renders C11 atomics that "
                    f"nvrtc refuses): fix the platform file or --set it") from None


def _measure(s: Settings, cfg: BertConfig, seq: int, pred: int, log=print) -> dict[str, Any]:
  if (have := version("tinygrad")) != TINYGRAD_PINNED:
    raise UserError(f"the dress reads tinygrad {TINYGRAD_PINNED}'s JIT internals, found tinygrad {have}; install "
                    f"tinygrad=={TINYGRAD_PINNED}")
  devices = devices_for(s.tinygrad.dev, s.gpus)
  mem = _watch_memory()
  gc.collect()
  base = {d: mem[d] for d in devices}
  rng = np.random.default_rng(s.seed)
  st = time.perf_counter()
  Tensor.manual_seed(s.seed)
  trainer = ModelTrainer(cfg, s, devices, seed=s.seed)
  Tensor.realize(*trainer.persistent_tensors())
  persistent = _bytes_per_device(trainer.persistent_tensors(), devices)
  out: dict[str, Any] = {"layers": cfg.num_hidden_layers, "batch_size": s.batch_size, "eval_batch_size": s.eval.batch_size,
                         "devices": list(devices), "persistent": persistent, "held_after_init": _held(mem, devices, base)}
  log(f"dress: {cfg.num_hidden_layers} layers, BS {s.batch_size}, EVAL_BS {s.eval.batch_size} on {len(devices)} x "
      f"{devices[0]} ({s.tinygrad.dev}): model built in {time.perf_counter() - st:.1f} s")
  mem.reset()
  times = _three_calls("train", lambda t=trainer: t.train(fake_batch(s.batch_size, seq, pred, cfg.vocab_size, rng)), log)
  out["train_peak"] = {d: mem.peak[d] - base.get(d, 0) for d in devices}
  out["train_held"] = _held(mem, devices, base)
  out["train"] = {**jit_items(trainer.train_step, devices), "seconds": times}
  if s.free_intermediate: trainer.free_intermediates(trainer.train_step)
  out["between"] = _held(mem, devices, base)
  mem.reset()
  ones = np.ones(s.eval.batch_size, np.float32)
  times = _three_calls(
    "eval", lambda t=trainer: t.evaluate(fake_batch(s.eval.batch_size, seq, pred, cfg.vocab_size, rng), ones), log)
  out["eval_peak"] = {d: mem.peak[d] - base.get(d, 0) for d in devices}
  out["eval"] = {**jit_items(trainer.eval_step, devices), "seconds": times}
  if s.free_intermediate: trainer.free_intermediates(trainer.eval_step)
  mem.reset()
  loss, _, _ = trainer.train(fake_batch(s.batch_size, seq, pred, cfg.vocab_size, rng))
  del loss
  out["train_after_eval_peak"] = {d: mem.peak[d] - base.get(d, 0) for d in devices}
  worst = max(devices, key=lambda d: max(out[k][d] for k in ("train_peak", "eval_peak", "train_after_eval_peak")))
  out["timeline"] = _timelines(trainer, worst)
  try: out["compiler"] = type(Device[devices[0]].compiler).__name__
  except RuntimeError: out["compiler"] = "none"   # tinygrad's own NULL renderer has none
  del trainer
  gc.collect()
  return out


#!/usr/bin/env python3
"""The census of the distinct programs of a train and an eval step: this project's (ModelTrainer, as the dress runs
it) and tinygrad's own (train_step_bert and eval_step_bert of a tinygrad checkout's examples/mlperf, e.g. the v5.1
commit e0139fa, through tools/dress_tinygrad.py's machinery), both on this project's tinygrad (0.14), the same NULL
target (the platform's DRESS_TARGET, e.g. NULL:CUDA:sm_89, compiled by the target's compiler), the same settings and
depth; each distinct program is a BEAM search in the INIT phase on the box. Program by program, the two lists are
diffed and the differences sorted into classes.

    git -C <mirror of github:tinygrad/tinygrad> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
    python tools/program_census.py /tmp/tg --commit e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 \
        --platform tinybox_green --layers 2 --out tests/fixtures/program-census/tinybox_green-e0139fa-2layers.json

Only the checkout's `examples/` and `extra/` are used (linked into a temporary folder that goes first on PYTHONPATH);
its tinygrad package is not: comparing each side on its own tinygrad mixes the scheduler's version into the count.
What of e0139fa's code tinygrad 0.14 changed is bridged in the child (nothing of tinygrad is copied):
`Tensor(..., requires_grad=False)` is `is_param = False`, `Tensor.arange(..., device=d)` the device-less arange,
training `Context(TRAINING=1)`, and `tinygrad.device.is_dtype_supported` (imported by extra/models/unet.py, never
called by the BERT steps) exits if called; eval_step_bert's copy of its results to the CPU reads NULL's zeros
(NULL_ALLOW_COPYOUT=1).
Each side runs in its own subprocess (tinygrad reads DEV at import). The project's steps are captured on their first
call; tinygrad's TinyJit runs plainly first and captures on its second call, on batches made as its loader makes
them (dress_tinygrad.py). A program is one PROGRAM of a captured step (each graph batch opened), named by its key
(tinygrad's hash of the kernel's AST, source and binary); its row gives its name (the kernel's shape), the key of
its AST before code generation, the devices that launch it and its launches a step.
"""
from __future__ import annotations
import argparse, inspect, hashlib, importlib.util, json, os, re, subprocess, sys, tempfile, time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _dress_tinygrad():
  spec = importlib.util.spec_from_file_location("dress_tinygrad", REPO / "tools" / "dress_tinygrad.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def census(jit) -> dict[str, list]:
  """The distinct programs of a captured TinyJit: {program key: [name, AST key, devices, launches a step]}."""
  from tinygrad.engine.realize import get_call_kernels
  from tinygrad.uop.ops import Ops
  from mlperf_bert.train.dress.measure import _calls
  out: dict[str, list] = {}
  for call in _calls(jit.captured._linear):
    ast = call.src[0]
    if ast.op is not Ops.PROGRAM: continue
    row = out.setdefault(ast.key.hex()[:16], [ANSI.sub("", ast.arg.name), ast.src[0].key.hex()[:16], [], 0])
    devs = [d for d, _ in get_call_kernels(call)]
    row[2] = sorted(set(row[2]) | set(devs))
    row[3] += len(devs)
  return out


def _side(devices: list[str], train_jit, eval_jit, calls: bool) -> dict[str, Any]:
  """A side's record: its devices and each captured step's programs (census), with `calls` their calls for the cost
  model too (measure.py call_records, as a dress records this project's steps)."""
  out = {"devices": devices, "train": census(train_jit), "eval": census(eval_jit)}
  if calls:
    from mlperf_bert.train.dress.measure import call_records
    out["calls"] = {"train": call_records(train_jit), "eval": call_records(eval_jit)}
  return out


def _setup(platform: str, layers: int, sets: list[str]):
  from mlperf_bert.cli.common import _parse_set
  from mlperf_bert.train.dress import DEFAULT_BERT_CONFIG, config_depth, find_platform_file, set_up_dress
  return set_up_dress(find_platform_file(platform), config_depth(REPO / DEFAULT_BERT_CONFIG), layers=layers,
                      overrides=_parse_set(sets))


def child_project(platform: str, layers: int, sets: list[str], calls: bool = False) -> dict[str, Any]:
  """This project's steps as the dress builds them: one train call and one eval call, each captured; `calls`: as
  _side."""
  from mlperf_bert.train.dress import DEFAULT_BERT_CONFIG, export_environment
  setup = _setup(platform, layers, sets)
  export_environment(setup, os.environ)
  import numpy as np
  from tinygrad import Tensor
  from mlperf_bert.train.dress.setup import PRED, SEQ
  from mlperf_bert.train.trainer import ModelTrainer, devices_for, fake_batch, model_config
  s = setup.settings
  cfg = model_config(REPO / DEFAULT_BERT_CONFIG, s.model)
  devices = devices_for(s.tinygrad.dev, s.gpus)
  rng = np.random.default_rng(s.seed)
  Tensor.manual_seed(s.seed)
  trainer = ModelTrainer(cfg, s, devices, seed=s.seed)
  trainer.train(fake_batch(s.batch_size, SEQ, PRED, cfg.vocab_size, rng))
  trainer.evaluate(fake_batch(s.eval.batch_size, SEQ, PRED, cfg.vocab_size, rng), np.ones(s.eval.batch_size, np.float32))
  return _side(list(devices), trainer.train_step, trainer.eval_step, calls)


OLD_FLAGS = ("FUSE_CONV_BW",)   # tinygrad.helpers flags of older checkouts' imports, absent from 0.14


def child_tinygrad(platform: str, layers: int, sets: list[str], calls: bool = False) -> dict[str, Any]:
  """tinygrad's train_step_bert and eval_step_bert (the checkout's examples, first on sys.path) on this project's
  tinygrad, built as tools/dress_tinygrad.py builds them: two calls of each (plain, captured); `calls`: as _side."""
  from mlperf_bert.train.dress import export_environment
  setup = _setup(platform, layers, sets)
  export_environment(setup, os.environ)
  s = setup.settings
  os.environ.update(GPUS=str(s.gpus), BS=str(s.batch_size), EVAL_BS=str(s.eval.batch_size), BERT_LAYERS=str(layers),
                    BERT_SIZE="tiny" if s.model.hidden_size == 128 else "large",
                    NULL_ALLOW_COPYOUT="1")   # eval_step_bert copies its results to the CPU (nothing is read)
  dt = _dress_tinygrad()
  import numpy as np
  import tinygrad.device
  from tinygrad import Device, Tensor, dtypes
  from tinygrad.helpers import Context
  # the checkout's examples on a newer tinygrad: training is Context(TRAINING=1) there (Tensor.training is gone), and
  # tinygrad.device.is_dtype_supported, which extra/models/unet.py imports (the BERT steps never call it), is gone
  def unsupported(*_): sys.exit("tinygrad.device.is_dtype_supported is not in this tinygrad; the census cannot run a step that calls it")
  if not hasattr(tinygrad.device, "is_dtype_supported"): tinygrad.device.is_dtype_supported = unsupported
  # and Tensor(..., requires_grad=False) (the arange counters, the LR schedulers' epoch counter) is is_param False
  init = Tensor.__init__
  def tensor_init(self, *args, requires_grad=None, **kwargs):
    init(self, *args, **kwargs)
    if requires_grad is False: self.is_param = False
  Tensor.__init__ = tensor_init
  # Tensor.arange(n, device=d, requires_grad=False): this tinygrad's arange is a device-less constant that takes the
  # device of what it meets; full (ones, zeros) takes no requires_grad
  for name, drop in (("arange", ("requires_grad", "device")), ("full", ("requires_grad",))):
    fn = getattr(Tensor, name).__func__
    setattr(Tensor, name, classmethod(lambda cls, *a, _fn=fn, _drop=drop, **k: _fn(cls, *a, **{x: v for x, v in k.items() if x not in _drop})))
  # an older checkout (v4.1's b5546912) imports helpers' flags this tinygrad dropped (FUSE_CONV_BW, for ResNet):
  # each is given as a ContextVar at 0, its default there; the BERT steps never read them
  import tinygrad.helpers as th
  for name in OLD_FLAGS:
    if not hasattr(th, name): setattr(th, name, th.ContextVar(name, 0))
  # and sums with acc_dtype (v4.1): this tinygrad's dtype, which accumulates in it and returns it, as acc_dtype did
  tsum = Tensor.sum
  Tensor.sum = lambda self, *a, acc_dtype=None, **k: tsum(self, *a, **({"dtype": acc_dtype} if acc_dtype is not None else {}), **k)
  from examples.mlperf import model_train
  from examples.mlperf.helpers import get_fake_data_bert
  GPUS = [f"{Device.DEFAULT}:{i}" for i in range(s.gpus)]
  nested, _ = dt.step_source(model_train.__file__)
  model, optimizer, scheduler, loss_scaler = dt.train_bert_state(GPUS)
  train_step = model_train.train_step_bert if nested is None else dt.bind_nested(nested, model_train, dict(
    model=model, optimizer_group=optimizer, scheduler_group=scheduler, loss_scaler=loss_scaler, GPUS=GPUS))

  def batch(bs: int) -> dict:   # as dress_tinygrad.py's: numpy arrays on the CPU, the loader's keys and dtypes
    return {k: Tensor(np.zeros(t.shape, np.float32 if t.dtype == dtypes.float32 else np.int32), dtype=t.dtype, device="CPU")
            for k, t in get_fake_data_bert(bs).items()}
  if nested is not None:
    sys.exit(f"{model_train.__file__}: a nested train_step_bert is not censused yet (only e0139fa's module-level one)")
  # v4.1's steps (b5546912) take the batch sharded on GPUS already (helpers.get_data_bert), and no GPUS; e0139fa's
  # take the CPU batch with GPUS and shard it inside
  sharded = "input_ids" in inspect.signature(inspect.unwrap(getattr(model_train.train_step_bert, "fxn", model_train.train_step_bert))).parameters
  order = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
  def on_gpus(bs: int) -> list:   # v4.1's own fake batch, sharded as its loop shards a batch; its float32 ids as int32
    d = get_fake_data_bert(GPUS, bs)   # (this tinygrad turns the embedding's arange compare into a gather: an index)
    return [(d[k].cast(dtypes.int32) if k not in ("input_mask", "masked_lm_weights") else d[k]).realize() for k in order]
  for _ in range(2):   # both steps take the same batch order; e0139fa's train step takes it by key, with GPUS
    if sharded: args, kw = [*on_gpus(s.batch_size)], {}
    else: args, kw = [GPUS, 1], {f"{k}0": v for k, v in batch(s.batch_size).items()}
    with Context(TRAINING=1): train_step(model, optimizer, scheduler, loss_scaler, *args, **kw)
  for _ in range(2):
    e = on_gpus(s.eval.batch_size) if sharded else [*map(batch(s.eval.batch_size).get, order), GPUS]
    with Context(TRAINING=0): model_train.eval_step_bert(model, *e)
  return _side([Device.canonicalize(g) for g in GPUS], train_step, model_train.eval_step_bert, calls)


def placement(programs: dict[str, list], first_device: str) -> dict[str, str]:
  """Where each program runs: "all devices" (one program, launched on every device), "per device" (a kernel compiled
  once for each device it runs on, its AST differing by the device's part: the ring all-reduce's chunks), "first
  device only" (a kernel on the first device alone whose shape no other device runs: slices of the batch cut there)
  or "CPU" (on the host: tinygrad's step slices its batch there)."""
  alone = [v for v in programs.values() if len(v[2]) == 1]
  elsewhere = {v[0] for v in alone if v[2][0] != first_device}
  out = {}
  for k, (name, _, devs, _) in programs.items():
    out[k] = "CPU" if all(d.startswith("CPU") for d in devs) else "all devices" if len(devs) > 1 else \
             "per device" if devs[0] != first_device or name in elsewhere else "first device only"
  return out


def classify(project: dict[str, list], tinygrad: dict[str, list], first_device: str) -> dict[str, Any]:
  """Program by program: for each side, its programs by placement (`placement`) and, of each placement, how many the
  other side launches too (the same key: the same kernel, compiled the same), with the names of those it does not."""
  out: dict[str, Any] = {"common": len(set(project) & set(tinygrad))}
  for side, mine, other in (("project", project, tinygrad), ("tinygrad", tinygrad, project)):
    where = placement(mine, first_device)
    rows: dict[str, Any] = {}
    for k in sorted(mine):
      r = rows.setdefault(where[k], {"count": 0, "common": 0, "own": []})
      r["count"] += 1
      if k in other: r["common"] += 1
      else: r["own"].append(mine[k][0])
    out[side] = dict(sorted(rows.items()))
  return out


def run_side(checkout: Path, side: str, platform: str, layers: int, sets: list[str]) -> dict[str, Any]:
  """One side's steps in a child process ("project" or "tinygrad"; "project-calls", "tinygrad-calls": with their
  calls), tinygrad's with the checkout's examples/ and extra/ first on its path; exits naming the side when it fails."""
  for sub in ("examples/mlperf/model_train.py", "extra"):
    if not (checkout / sub).exists(): sys.exit(f"{checkout}: no {sub}; expected a tinygrad work tree (git archive of a commit)")
  with tempfile.TemporaryDirectory(prefix="census-") as tmp:
    for sub in ("examples", "extra"): os.symlink((checkout / sub).resolve(), Path(tmp) / sub)
    env = {k: v for k, v in os.environ.items() if k not in ("DEV", "BEAM", "DEBUG", "USE_ATOMICS", "NOOPT")}
    mine = side.startswith("project")
    env["PYTHONPATH"] = str(REPO) if mine else f"{tmp}{os.pathsep}{REPO}"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, __file__, "--child", side, platform, str(layers), json.dumps(sets)],
                       cwd=REPO if mine else tmp, env=env, capture_output=True, text=True)
  line = [l for l in p.stdout.splitlines() if l.startswith("CENSUS ")]
  if p.returncode or not line: sys.exit(f"the {side} side failed:\n{p.stderr[-4000:]}")
  out = json.loads(line[0][7:])
  print(f"{side}, {layers} layers: {len(out['train'])} train / {len(out['eval'])} eval programs "
        f"({time.monotonic() - t0:.0f} s)", file=sys.stderr)
  return out


def _settings(s) -> dict[str, Any]:
  return {"GPUS": s.gpus, "BS": s.batch_size, "EVAL_BS": s.eval.batch_size, "DEFAULT_FLOAT": s.float_type}


def _earlier_side(path: Path, a, devices: list[str]) -> dict[str, Any]:
  """tinygrad's side of an earlier record; exits naming what differs when it was censused otherwise."""
  r = json.loads(path.read_text())
  setup = _setup(a.platform, a.layers, a.set)
  want = {"tinygrad_commit": a.commit, "platform": a.platform, "layers": a.layers, "target": setup.target,
          "settings": _settings(setup.settings)}
  if (got := {k: r.get(k) for k in want}) != want:
    sys.exit(f"{path}: censused {got}, not {want}; run tinygrad's side again (leave out --tinygrad-from)")
  return {"devices": devices, **r["programs"]["tinygrad"]}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (git archive of the commit); its examples/ and extra/")
  ap.add_argument("--commit", required=True, help="the checkout's commit (recorded)")
  ap.add_argument("--platform", default="tinybox_green", help="platforms/NAME/platform.yaml")
  ap.add_argument("--layers", type=int, default=2, help="the depth of both steps (default 2)")
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override platform keys, both sides")
  ap.add_argument("--tinygrad-from", type=Path, metavar="RECORD",
                  help="take tinygrad's side from an earlier census record of the same commit, platform, settings "
                       "and depth instead of running it again (it does not change with this project's code)")
  ap.add_argument("--reclassify", action="store_true",
                  help="only sort the programs of the record at --out into classes again (classify) and rewrite it")
  ap.add_argument("--out", type=Path, required=True)
  a = ap.parse_args()
  if a.reclassify:
    record = json.loads(a.out.read_text())
    devices = max((v[2] for v in record["programs"]["project"]["train"].values()), key=len)   # an all-device program's
    return _write(a.out, {**record, "devices": devices, "diff": _diff(record["programs"], devices[0])})
  sides = {"project": run_side(a.checkout, "project", a.platform, a.layers, a.set)}
  sides["tinygrad"] = _earlier_side(a.tinygrad_from, a, sides["project"]["devices"]) if a.tinygrad_from else \
                      run_side(a.checkout, "tinygrad", a.platform, a.layers, a.set)
  from importlib.metadata import version
  setup = _setup(a.platform, a.layers, a.set)
  s = setup.settings
  programs = {side: {step: sides[side][step] for step in ("train", "eval")} for side in sides}
  devices = sides["project"]["devices"]
  return _write(a.out, {"tinygrad_commit": a.commit, "tinygrad": version("tinygrad"), "platform": a.platform,
                        "target": setup.target, "layers": a.layers, "settings": _settings(s), "devices": devices,
                        "counts": {side: {step: len(programs[side][step]) for step in programs[side]} for side in programs},
                        "diff": _diff(programs, devices[0]), "programs": programs})


def _diff(programs: dict, first_device: str) -> dict[str, Any]:
  return {step: classify(programs["project"][step], programs["tinygrad"][step], first_device) for step in ("train", "eval")}


def _write(out: Path, record: dict) -> int:
  """The record written atomically (its programs' digest added), its classes printed."""
  record["sha256_of_programs"] = hashlib.sha256(json.dumps(record["programs"], sort_keys=True).encode()).hexdigest()
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp_out = out.with_name(out.name + ".tmp")
  tmp_out.write_text(json.dumps(record, indent=1) + "\n")
  tmp_out.replace(out)
  for step, d in record["diff"].items():
    print(f"{step}: {d['common']} in common; " + "; ".join(
      side + " " + ", ".join(f"{c} {v['count']} ({v['common']} common)" for c, v in d[side].items())
      for side in ("project", "tinygrad")), file=sys.stderr)
  return 0


if __name__ == "__main__":
  if sys.argv[1:2] == ["--child"]:
    side, platform, layers, sets = sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
    sys.path.insert(0, str(REPO))
    res = (child_project if side.startswith("project") else child_tinygrad)(platform, layers, sets,
                                                                             calls=side.endswith("-calls"))
    print("CENSUS " + json.dumps(res), flush=True)
  else: sys.exit(main())

"""Training step time on the CPU, side by side: this project's jitted train step vs tinygrad's own
`train_step_bert` (examples/mlperf/model_train.py of a tinygrad checkout), same device, same small BERT (the demo's:
2 layers, hidden 128, 2 heads, intermediate 512, the 30,522-token vocab), same batch (BS 8, seq 128, 20 predictions),
fp32, dropout on, the same random batches, the same tinygrad environment (the cpu platform's: USE_ATOMICS=1 ...).

  git -C <tinygrad mirror> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
  .venv/bin/python bench/bench_step_vs_tinygrad.py /tmp/tg --commit e0139fa [--steps 10] [--gpus 1] [--venv-tinygrad]

The checkout must have a module-level `train_step_bert(model, optimizer, scheduler, loss_scaler, GPUS, grad_acc,
**kwargs)` (tinygrad commits of 2025, e.g. e0139fa; later ones nest it inside train_bert). Its model is
`get_mlperf_bert_model()` with BERT_SIZE=tiny (the same shape), LAMB groups and PolynomialDecayWithWarmup set up as
train_bert does. tinygrad's side runs with the checkout's own tinygrad library (its examples need it: those of
e0139fa import tinygrad.device.is_dtype_supported, gone in 0.14, and no commit with a module-level train_step_bert
matches 0.14's API); this project's side runs with this virtualenv's tinygrad (0.14.0). --venv-tinygrad tries
tinygrad's side on the venv's library instead.
Each side runs in its own process, one after the other: 2 warm-up steps (compile, JIT capture), then --steps timed
steps; printed: median wall ms and CPU ms (user+sys of the process, all threads) per step, and the ratios
(this project / tinygrad: below 1.0 means this project's step is faster). This project's side runs twice: with the
cpu platform's CPU_THREADS (tinygrad 0.14's per-core kernel slices on all cores) and with it off (one core).
"""
import argparse, json, os, statistics, subprocess, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHAPE = {"BS": 8, "SEQ": 128, "PRED": 20, "VOCAB": 30522, "LAYERS": 2, "HIDDEN": 128, "HEADS": 2, "INTER": 512}

COMMON = r'''
import json, os, sys, time
import numpy as np
S = json.loads(sys.argv[1])
def batches(n):
  rng = np.random.default_rng(1234)
  for _ in range(n):
    B, L, P = S["BS"], S["SEQ"], S["PRED"]
    lens = rng.integers(L // 2, L + 1, B)
    mask = (np.arange(L)[None, :] < lens[:, None]).astype(np.int32)
    pos = np.sort(np.stack([rng.choice(np.arange(1, l - 1), P, replace=False) for l in lens]), axis=1).astype(np.int32)
    yield {"input_ids": (rng.integers(1000, S["VOCAB"], (B, L)) * mask).astype(np.int32), "input_mask": mask,
           "segment_ids": ((np.arange(L)[None, :] > lens[:, None] // 2) * mask).astype(np.int32),
           "masked_lm_positions": pos, "masked_lm_ids": rng.integers(1000, S["VOCAB"], (B, P)).astype(np.int32),
           "masked_lm_weights": np.ones((B, P), np.float32), "next_sentence_labels": rng.integers(0, 2, (B, 1)).astype(np.int32)}
def timed(step, n):
  wall, cpu = [], []
  for i, b in enumerate(batches(n + 2)):
    t, c = time.perf_counter(), time.process_time()
    loss = step(b)
    wall.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
    assert np.isfinite(loss), loss
  print("RESULT " + json.dumps({"first_step_s": wall[0], "wall_ms": [w * 1e3 for w in wall[2:]], "cpu_ms": [c * 1e3 for c in cpu[2:]],
                                "tinygrad": __import__("tinygrad").__file__}), flush=True)
'''

OURS = COMMON + r'''
sys.path.insert(0, S["REPO"])
from mlperf_bert.constants import platform_path
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.trainer import ModelTrainer, devices_for
from mlperf_bert.train.model import BertConfig
from tinygrad import Tensor
hp = resolve(load_platform(platform_path(S["REPO"], "cpu")), {"GPUS": S["GPUS"], "BS": S["BS"], "CPU_THREADS": S["CPU_THREADS"]})
cfg = BertConfig(vocab_size=S["VOCAB"], hidden_size=S["HIDDEN"], num_hidden_layers=S["LAYERS"], num_attention_heads=S["HEADS"],
                 intermediate_size=S["INTER"])
Tensor.manual_seed(0)
steps = ModelTrainer(cfg, hp, devices_for("CPU", S["GPUS"]), seed=0)
timed(lambda b: steps.train(b)[0].item(), S["STEPS"])
'''

THEIRS = COMMON + r'''
sys.path = [p for p in sys.path if p not in ("", ".", S["CHECKOUT"])]
if not S["OWN"]: sys.path.append(S["CHECKOUT"])   # examples/ and extra/ from the checkout, tinygrad from the venv
else: sys.path.insert(0, S["CHECKOUT"])
from tinygrad import Tensor, Device
from tinygrad.nn.state import get_state_dict, get_parameters
from tinygrad.nn.optim import LAMB, OptimizerGroup
from extra.lr_scheduler import LRSchedulerGroup
from examples.mlperf.model_train import train_step_bert
from examples.mlperf.helpers import get_mlperf_bert_model
from examples.mlperf.lr_schedulers import PolynomialDecayWithWarmup
Tensor.manual_seed(0)
model = get_mlperf_bert_model()
GPUS = tuple(f"CPU:{i}" for i in range(S["GPUS"])) if S["GPUS"] > 1 else (Device.DEFAULT,)
if len(GPUS) > 1:
  for p in get_parameters(model): p.to_(GPUS)
no_wd = [v for k, v in get_state_dict(model).items() if "bias" in k or "LayerNorm" in k]
wd = [x for x in get_parameters(model) if x not in set(no_wd)]
lr, steps_total, warm = 0.01, 300, 20   # the demo's LR schedule (cost does not depend on the values)
o1 = LAMB(wd, lr=lr, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.01, adam=False)
o2 = LAMB(no_wd, lr=lr, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False)
opt = OptimizerGroup(o1, o2)
sch = LRSchedulerGroup(PolynomialDecayWithWarmup(o1, lr, 0, steps_total, warm, power=1.0),
                       PolynomialDecayWithWarmup(o2, lr, 0, steps_total, warm, power=1.0))
Tensor.training = True
def step(b):
  data = {f"{k}0": Tensor(v) for k, v in b.items()}
  loss, _, _ = train_step_bert(model, opt, sch, 1.0, GPUS, 1, **data)
  return loss.item()
timed(step, S["STEPS"])
'''


def run_side(name: str, code: str, settings: dict, env: dict, cwd: Path) -> dict:
  p = subprocess.run([sys.executable, "-c", code, json.dumps(settings)], env=env, cwd=cwd, capture_output=True, text=True, check=False)
  res = next((json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
  if p.returncode != 0 or res is None:
    sys.exit(f"bench_step_vs_tinygrad.py: the {name} side failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
  return res


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (git archive of a commit such as e0139fa)")
  ap.add_argument("--steps", type=int, default=10, help="timed steps per side (after 2 warm-up steps)")
  ap.add_argument("--gpus", type=int, default=1, help="CPU devices (data parallel) for both sides")
  ap.add_argument("--venv-tinygrad", action="store_true",
                  help="tinygrad's side imports this venv's tinygrad (default: the checkout's own, which its examples match)")
  ap.add_argument("--commit", help="the tinygrad commit the checkout was made from (printed; default: git rev-parse)")
  ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
  a = ap.parse_args()
  co = a.checkout.resolve()
  if not (co / "examples" / "mlperf" / "model_train.py").is_file():
    sys.exit(f"bench_step_vs_tinygrad.py: {co}: no examples/mlperf/model_train.py; pass a tinygrad work tree "
             f"(git -C <mirror> archive <commit> | tar -x -C DIR)")
  sys.path.insert(0, str(REPO))
  from mlperf_bert.constants import platform_path
  from mlperf_bert.train.environment import tinygrad_env
  from mlperf_bert.train.hparams import load_platform, resolve
  sys.path.insert(0, str(REPO / "bench"))
  from machine import describe, machine
  tg_env = tinygrad_env(resolve(load_platform(platform_path(REPO, "cpu")), {}))
  tg_env.pop("DEBUG", None)
  env = dict(os.environ, **tg_env, BERT_SIZE="tiny", BERT_LAYERS=str(SHAPE["LAYERS"]), PYTHONPATH="")
  s = dict(SHAPE, STEPS=a.steps, GPUS=a.gpus, REPO=str(REPO), CHECKOUT=str(co), OWN=not a.venv_tinygrad)
  m = machine()
  print(f"machine: {describe(m)}")
  print(f"shape: BS {s['BS']}, seq {s['SEQ']}, {s['PRED']} predictions, {s['LAYERS']} layers, hidden {s['HIDDEN']}, "
        f"{s['HEADS']} heads, intermediate {s['INTER']}, vocab {s['VOCAB']}, fp32, dropout on, {a.gpus} CPU device(s); "
        f"env {' '.join(f'{k}={v}' for k, v in sorted(tg_env.items()))}")
  rev = a.commit or subprocess.run(["git", "-C", str(co), "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip() \
    or "(unknown: not a git work tree; pass --commit)"
  print(f"tinygrad checkout {co} at {rev}")
  # this project's side twice: as the cpu platform runs it (CPU_THREADS on: tinygrad 0.14's per-core kernel slices
  # on all cores) and with CPU_THREADS off (one core, as tinygrad's own runtime runs every kernel)
  ours = {on: run_side("mlperf-bert", OURS, dict(s, CPU_THREADS=on), env, REPO) for on in (True, False)}
  theirs = run_side("tinygrad", THEIRS, s, env, REPO)  # not cwd=checkout: `python -c` would import its tinygrad first
  out = {"machine": m, "settings": s, "tinygrad_checkout_rev": rev, "ours": ours[True], "ours_one_core": ours[False],
         "tinygrad": theirs}
  sides = (("mlperf-bert (CPU_THREADS on)", ours[True]), ("mlperf-bert (CPU_THREADS off)", ours[False]),
           (f"tinygrad train_step_bert ({co.name})", theirs))
  for name, r in sides:
    r["median_wall_ms"], r["median_cpu_ms"] = statistics.median(r["wall_ms"]), statistics.median(r["cpu_ms"])
    print(f"{name:<45} first step {r['first_step_s']:6.1f} s; median step {r['median_wall_ms']:8.1f} ms wall, "
          f"{r['median_cpu_ms']:8.1f} ms CPU  (tinygrad library {Path(r['tinygrad']).parent})")
  for key, r in (("", ours[True]), ("_one_core", ours[False])):
    out["ratio_wall" + key] = r["median_wall_ms"] / theirs["median_wall_ms"]
    out["ratio_cpu" + key] = r["median_cpu_ms"] / theirs["median_cpu_ms"]
    print(f"ratio (mlperf-bert, CPU_THREADS {'off' if key else 'on'} / tinygrad): wall {out['ratio_wall' + key]:.2f}, "
          f"CPU {out['ratio_cpu' + key]:.2f}  (<= 1.0: ours is no slower)")
  if a.json: a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
  main()

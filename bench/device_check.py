"""The device check, one command for the day an accelerator is lent: this project's trainer and tinygrad's own
examples/mlperf/model_train.py, one after the other on the same device with the same shapes, and their step times.

  git -C <tinygrad mirror> archive e0139fafc15d9dd945eb7b6b7d97e43ca6e2f178 | tar -x -C /tmp/tg
  .venv/bin/python bench/device_check.py /tmp/tg                      # dev_1gpu: BERT-large, HALF, BS 11, 20 steps
  .venv/bin/python bench/device_check.py /tmp/tg --steps 4 --set DEV=CPU BEAM=0 BS=2 EVAL_BS=2 BERT_LAYERS=1 \\
      BERT_HIDDEN_SIZE=128 BERT_NUM_HEADS=2 BERT_INTERMEDIATE_SIZE=512 CACHE_CLEAR=false     # the CPU smoke run

Three processes, each with the platform's tinygrad settings (platforms/dev_1gpu/platform.yaml and --set) in its
environment:
  1. `python -m mlperf_bert train --phase init`: the platform's INIT phase (a throw-away INIT_BERT_LAYERS model
     compiles the train and eval steps for INIT_BENCHMARK_STEPS steps); its wall time is printed.
  2. `python -m mlperf_bert train --benchmark N`: N steps of the full model (BERT-large unless --set shrinks it).
  3. tinygrad's `MODEL=bert BENCHMARK=N python examples/mlperf/model_train.py` in the checkout, with the checkout's own
     tinygrad (its examples need it), the same DEV, GPUS, BS, float type and BEAM, and its BERT_SIZE (large, or tiny
     for hidden 128 / 2 heads / intermediate 512) with BERT_LAYERS: train_bert's fake-data path (no RUNMLPERF), which
     trains N steps on Tensor.empty batches of 512 tokens and 76 predictions and returns after one short eval.
The data of 2. are synthetic shards of the same shapes (random tokens; the step time does not depend on them),
written to a temporary folder, unless --shards and --eval name real ones (max_seq_length 512, 76 predictions).
Printed: the machine (bench/machine.py, and the GPUs nvidia-smi or rocm-smi list), the INIT phase's seconds, each
side's step times and their medians over the steps after the first two (compile and JIT capture), and the ratio
this project / tinygrad (below 1.0: this project's step is faster). --json writes the figures.
With --dress F.json (the answer of `python -m mlperf_bert dress --platform P --json F.json` for the same platform and
--set), the dress's prediction is printed beside what was measured: the predicted train step (the step-time model's,
answer["cost"]["step"], or else the roofline floor) against this project's median step, the predicted INIT phase
(answer["cost"]["init"]) against the INIT phase's wall time, each with measured / predicted; a dress of other settings
(platform, GPUS, BS) is named in a warning line. Without --dress nothing of it is printed.

With --rates, instead of the trainers: the step-time model's unknowns of the platform's card, measured by
bench/device_rates.py with the checkout's tinygrad and the platform's settings (BEAM ...) on the default device, each
beside the constant hardware.py gives the DRESS_TARGET's box: a gemm's share of the matrix peak (tc_achievable), the
same gemm with TC=0 over the vector peak (the model runs non-tensor-core kernels at tc_achievable of it), a gemv's share
of the bandwidth (mem_achievable) and the gap a kernel costs in a captured graph (launch_us). On a lent MI300X with the
v5.0 code (git archive of branch mlperf_training_v5.0, --platform-file platforms/tinybox_8xMI300X/platform.yaml) it
settles what docs/benchmarks.md names as the MI300X's missing terms.
"""
from __future__ import annotations
import argparse, json, os, re, statistics, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from machine import describe, machine  # noqa: E402
from mlperf_bert.constants import platform_path  # noqa: E402
from mlperf_bert.train.environment import tinygrad_env  # noqa: E402
from mlperf_bert.train.hparams import load_platform, resolve  # noqa: E402

SEQ, PRED = 512, 76   # the shapes of train_bert's fake data (examples/mlperf/helpers.py get_fake_data_bert)
STEP_LINE = re.compile(r"^\s*(\d+)\s+([\d.]+) ms run,", re.M)   # the step line both trainers print
# BERT_SIZE of tinygrad's get_mlperf_bert_config: (hidden, heads, intermediate); BERT_LAYERS sets the layers
TINYGRAD_SIZES = {"large": (1024, 16, 4096), "tiny": (128, 2, 512)}
# the hyperparameters train_bert reads from the environment (besides tinygrad's own settings)
TRAIN_BERT_KEYS = ("GPUS", "BS", "EVAL_BS", "OPT_BASE_LEARNING_RATE", "OPT_LAMB_BETA_1", "OPT_LAMB_BETA_2",
                   "TRAIN_STEPS", "NUM_WARMUP_STEPS", "LOSS_SCALER", "DECAY", "EPSILON", "POLY_POWER",
                   "DISABLE_DROPOUT", "TRAIN_BEAM", "EVAL_BEAM", "FREE_INTERMEDIATE", "BERT_LAYERS")


def gpus_listed() -> str:
  """The accelerators nvidia-smi or rocm-smi list (one line), or 'none listed'."""
  for cmd in (["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
              ["rocm-smi", "--showproductname"]):
    try: out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired): continue
    if out: return "; ".join(l.strip() for l in out.splitlines() if l.strip())
  return "none listed"


def tinygrad_size(hp: dict) -> str:
  dims = (hp.get("BERT_HIDDEN_SIZE") or 1024, hp.get("BERT_NUM_HEADS") or 16, hp.get("BERT_INTERMEDIATE_SIZE") or 4096)
  for name, d in TINYGRAD_SIZES.items():
    if d == dims: return name
  sys.exit(f"device_check.py: hidden/heads/intermediate {dims}: tinygrad's model_train.py has only BERT_SIZE "
           f"large {TINYGRAD_SIZES['large']} or tiny {TINYGRAD_SIZES['tiny']}; set BERT_HIDDEN_SIZE, BERT_NUM_HEADS and "
           f"BERT_INTERMEDIATE_SIZE to one of them")


def synthetic_data(folder: Path, rows: int, eval_rows: int, vocab: int) -> tuple[Path, Path]:
  """A training shard and an eval set of random full-length rows of SEQ tokens and PRED predictions."""
  import numpy as np
  from mlperf_bert.data.shards import write_shard
  rng = np.random.default_rng(0)

  def instances(n):
    for _ in range(n):
      la = int(rng.integers(SEQ // 4, SEQ // 2))
      ids = rng.integers(1000, vocab, SEQ)
      ids[0], ids[la - 1], ids[-1] = 101, 102, 102
      pos = np.sort(rng.choice(np.arange(1, SEQ - 1), PRED, replace=False))
      labels = ids[pos].copy()
      ids[pos] = 103
      yield {"input_ids": ids, "segment_ids": [0] * la + [1] * (SEQ - la), "masked_lm_positions": pos,
             "masked_lm_ids": labels, "next_sentence_label": int(rng.integers(0, 2))}

  train, ev = folder / "part-00000-of-00001.shard", folder / "eval.shard"
  write_shard(train, instances(rows), max_seq_length=SEQ, max_predictions_per_seq=PRED)
  write_shard(ev, instances(eval_rows), max_seq_length=SEQ, max_predictions_per_seq=PRED, eval_set=True)
  return train, ev


def run(name: str, cmd: list[str], env: dict, cwd: Path, timeout: int) -> tuple[str, float]:
  """Run one side to its end; (its output, wall seconds). A failure ends the check with the side's last lines."""
  print(f"== {name}: {' '.join(cmd)}", flush=True)
  st = time.perf_counter()
  try: p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
  except subprocess.TimeoutExpired: sys.exit(f"device_check.py: {name} ran past --timeout {timeout} s")
  secs = time.perf_counter() - st
  out = p.stdout + p.stderr
  if p.returncode != 0: sys.exit(f"device_check.py: {name} failed (exit {p.returncode}):\n{out[-4000:]}")
  return out, secs


def step_ms(out: str, name: str, steps: int) -> list[float]:
  ms = [float(m.group(2)) for m in STEP_LINE.finditer(out)]
  if len(ms) != steps: sys.exit(f"device_check.py: {name} printed {len(ms)} step lines, expected {steps}:\n{out[-3000:]}")
  return ms


def read_dress(path: Path) -> dict:
  """The dress answer's prediction (platform, devices, BS, target, train step ms with its source, INIT minutes)."""
  try: r = json.loads(path.read_text())
  except (OSError, ValueError) as e: sys.exit(f"device_check.py: --dress {path}: not a dress answer JSON ({e}); write one "
                                              f"with python -m mlperf_bert dress --platform P --json {path}")
  if not isinstance(r, dict) or "batch_size" not in r:
    sys.exit(f"device_check.py: --dress {path}: no batch_size; not a dress answer (python -m mlperf_bert dress --json)")
  cost = r.get("cost") or {}
  step = (cost.get("step") or {}).get("ms")
  return {"platform": r.get("platform"), "devices": r.get("devices"), "batch_size": r.get("batch_size"),
          "target": r.get("target"), "step_ms": step if step is not None else r.get("roofline_ms"),
          "step_source": "the step-time model" if step is not None else "the roofline floor (no step-time model)",
          "step_low_ms": (cost.get("step") or {}).get("low_ms"), "step_high_ms": (cost.get("step") or {}).get("high_ms"),
          "init_min": (cost.get("init") or {}).get("minutes")}


def prediction_lines(pred: dict, hp: dict, median_ms: float, init_s: float) -> list[str]:
  """The dress's prediction beside the measured step and INIT phase (and a warning when the settings differ)."""
  out = []
  if (pred["devices"], pred["batch_size"]) != (hp["GPUS"], hp["BS"]):
    out.append(f"warning: the dress is of {pred['platform']} with GPUS {pred['devices']}, BS {pred['batch_size']}; this "
               f"check ran GPUS {hp['GPUS']}, BS {hp['BS']}: the figures below are of different steps")
  if pred["step_ms"]:
    band = (f" (band {pred['step_low_ms']}-{pred['step_high_ms']})" if pred["step_low_ms"] is not None else "")
    out.append(f"predicted train step ({pred['step_source']}, {pred['target']}): {pred['step_ms']:.1f} ms{band}; "
               f"measured {median_ms:.2f} ms: measured / predicted {median_ms / pred['step_ms']:.3f}")
  else: out.append("the dress answer predicts no train step (no card known for its target)")
  if pred["init_min"] is not None:
    out.append(f"predicted INIT phase: {pred['init_min']:.1f} min; measured {init_s / 60:.1f} min: measured / predicted "
               f"{init_s / 60 / pred['init_min']:.3f}")
  return out


# bench/device_rates.py's sizes for --rates-small (a smoke run on the CPU); default: its own (gemm 8192, gemv 16384,
# 256 kernels)
SMALL_RATES = {"gemm": 256, "vector": 256, "gemv": 1024, "launch": 32}


def rates(co: Path, hp: dict, knobs: dict, env: dict, timeout: int, small: bool = False) -> dict:
  """bench/device_rates.py's figures with the checkout's tinygrad, each beside the model's constant (printed)."""
  from mlperf_bert.train.cost.hardware import BOXES
  box = BOXES.get(knobs.get("DRESS_TARGET"))
  if box is None: sys.exit(f"device_check.py: --rates: the platform's DRESS_TARGET {knobs.get('DRESS_TARGET')} has no "
                           f"box in mlperf_bert/train/cost/hardware.py BOXES ({', '.join(BOXES)})")
  card, half = box.card, str(hp.get("SUM_DTYPE") or "").lower() == "half"
  env = {**env, "PYTHONPATH": str(co), str(hp["DEV"]): "1"}   # tinygrad of 2025 picks its device by AMD=1 / NV=1
  out = {}
  for what, extra in (("gemm", {}), ("vector", {"TC": "0"}), ("gemv", {}), ("launch", {})):
    text, _ = run(f"device_rates.py {what}", [sys.executable, str(REPO / "bench" / "device_rates.py"),
                                              "gemm" if what == "vector" else what,
                                              *(["--n", str(SMALL_RATES[what])] if small else [])], {**env, **extra}, co,
                    timeout)
    out[what] = float(text.split()[text.split().index("gemm" if what == "vector" else what) + 1])
  peak = card.tc_tflops_f16acc if half else card.tc_tflops
  print(f"{card.name}: gemm {out['gemm']:.1f} TFLOPS = {out['gemm'] / peak:.3f} of {peak}; the model's tc_achievable "
        f"{card.tc_achievable:.3f}")
  print(f"{card.name}: gemm on the vector units (TC=0) {out['vector']:.1f} TFLOPS = {out['vector'] / card.vector_tflops:.3f}"
        f" of {card.vector_tflops}; the model runs non-tensor-core kernels at {card.tc_achievable:.3f} of it")
  print(f"{card.name}: gemv {out['gemv']:.0f} GB/s = {out['gemv'] / card.gbps:.3f} of {card.gbps:.0f}; the model's "
        f"mem_achievable {card.mem_achievable:.3f}")
  print(f"{card.name}: a kernel in a captured graph {out['launch']:.2f} us; the model's launch gap {box.launch_us:.2f} us")
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("checkout", type=Path, help="a tinygrad work tree (e.g. git archive of e0139fa)")
  ap.add_argument("--platform-file", type=Path, default=platform_path(REPO, "dev_1gpu"))
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override platform keys (both sides)")
  ap.add_argument("--steps", type=int, default=20, help="train steps per side (BENCHMARK); at least 3")
  ap.add_argument("--shards", nargs="+", help="real training shards (512 / 76); default: synthetic ones")
  ap.add_argument("--eval", help="the eval set for --shards")
  ap.add_argument("--bert-config", type=Path, default=REPO / "resources" / "demo" / "bert_config.json")
  ap.add_argument("--timeout", type=int, default=3600, help="seconds each side may run")
  ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
  ap.add_argument("--dress", type=Path, help="a dress answer (python -m mlperf_bert dress --json F.json): print its "
                  "prediction beside what this check measures")
  ap.add_argument("--rates", action="store_true", help="only the model's card rates (bench/device_rates.py with the "
                  "checkout's tinygrad) beside hardware.py's constants; no trainers")
  ap.add_argument("--rates-small", action="store_true", help="--rates at small sizes (a smoke run on the CPU)")
  a = ap.parse_args()
  co = a.checkout.resolve()
  if not (co / "examples" / "mlperf" / "model_train.py").is_file():
    sys.exit(f"device_check.py: {co}: no examples/mlperf/model_train.py; pass a tinygrad work tree (see --help)")
  if a.steps < 3: sys.exit("device_check.py: --steps must be at least 3 (the first two compile and capture)")
  if bool(a.shards) != bool(a.eval): sys.exit("device_check.py: --shards and --eval go together")
  pred = read_dress(a.dress) if a.dress else None   # before anything runs: a bad file ends the check here
  import yaml
  over = {k.strip(): yaml.safe_load(v) for k, v in (s.split("=", 1) for s in a.set)}
  settings = resolve(load_platform(a.platform_file), over, seed=0, eval_examples=10000)
  hp = settings.as_dict()
  size = tinygrad_size(hp)  # before anything runs: a size tinygrad's side cannot build ends the check here
  info = machine()
  print(f"machine: {describe(info)}; accelerators: {gpus_listed()}")
  print(f"platform {a.platform_file.name} of {a.platform_file.parent.name} with {over or 'no overrides'}: DEV={hp['DEV']} "
        f"GPUS={hp['GPUS']} BS={hp['BS']} {hp['FLOAT']} BEAM={hp.get('BEAM')}; {a.steps} steps; seq {SEQ}, {PRED} predictions")
  base_env = {k: v for k, v in os.environ.items() if k not in ("BENCHMARK", "PYTHONPATH")}
  env = {**base_env, **tinygrad_env(settings), "PYTHONPATH": str(REPO)}
  if a.rates:
    res = {"machine": info, "accelerators": gpus_listed(), "platform_file": str(a.platform_file), "overrides": over,
           "rates": rates(co, hp, load_platform(a.platform_file), env, a.timeout, a.rates_small),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if a.json: a.json.write_text(json.dumps(res, indent=1) + "\n")
    return
  with tempfile.TemporaryDirectory(prefix="device_check_") as tmp:
    tmp = Path(tmp)
    if a.shards: shards, ev = a.shards, a.eval
    else:
      from mlperf_bert.train.model import BertConfig
      train, ev = synthetic_data(tmp, hp["BS"] * (a.steps + 4), max(hp["EVAL_BS"], 8),
                                 BertConfig.from_json(a.bert_config).vocab_size)
      shards = [str(train)]
    ours = [sys.executable, "-m", "mlperf_bert", "train", "--platform-file", str(a.platform_file.resolve()),
            "--set", *a.set, "--shards", *map(str, shards), "--eval", str(ev), "--bert-config", str(a.bert_config.resolve()),
            "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED), "--out", str(tmp / "r.log"),
            "--ckpt-dir", str(tmp / "ck")]
    _, init_s = run("this project, INIT phase", ours + ["--phase", "init"], env, REPO, a.timeout)
    out, ours_s = run(f"this project, {a.steps} steps", ours + ["--benchmark", str(a.steps)], env, REPO, a.timeout)
    ours_ms = step_ms(out, "this project", a.steps)
    tg_env = {**base_env, **tinygrad_env(settings), "PYTHONPATH": str(co), "MODEL": "bert", "BENCHMARK": str(a.steps),
              "BERT_SIZE": size, "BERT_LAYERS": str(hp.get("BERT_LAYERS") or 24)}
    tg_env.update({k: str(int(hp[k]) if isinstance(hp[k], bool) else hp[k]) for k in TRAIN_BERT_KEYS
                   if hp.get(k) is not None})
    out, tg_s = run(f"tinygrad's model_train.py, BENCHMARK={a.steps}", [sys.executable, "examples/mlperf/model_train.py"],
                    tg_env, co, a.timeout)
    tg_ms = step_ms(out, "tinygrad's model_train.py", a.steps)
  med_ours, med_tg = statistics.median(ours_ms[2:]), statistics.median(tg_ms[2:])
  res = {"machine": info, "accelerators": gpus_listed(), "platform_file": str(a.platform_file), "overrides": over,
         "steps": a.steps, "seq": SEQ, "pred": PRED, "init_phase_s": init_s, "ours_step_ms": ours_ms,
         "tinygrad_step_ms": tg_ms, "ours_median_ms": med_ours, "tinygrad_median_ms": med_tg,
         "ratio": med_ours / med_tg, "ours_process_s": ours_s, "tinygrad_process_s": tg_s,
         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
  print(f"INIT phase (this project): {init_s:.1f} s")
  print(f"this project: median step {med_ours:.2f} ms over steps 2..{a.steps - 1} (first {ours_ms[0]:.0f} ms)")
  print(f"tinygrad model_train.py: median step {med_tg:.2f} ms over steps 2..{a.steps - 1} (first {tg_ms[0]:.0f} ms)")
  print(f"ratio this project / tinygrad: {res['ratio']:.3f}")
  if pred is not None:
    res["prediction"] = pred
    for line in prediction_lines(pred, hp, med_ours, init_s): print(line)
  if a.json: a.json.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
  main()

"""Where a data-parallel train step's time goes on CPU devices: one device, two devices, one device under HALF.

  .venv/bin/python bench/bench_multidevice.py [--steps 6] [--only 1dev-fp32 2dev-fp32 1dev-half] [--save F] [--load F]

Each configuration runs in its own process (tinygrad reads DEFAULT_FLOAT, SUM_DTYPE, ... at import), side by side
in one invocation, so the ratios between them hold on a loaded machine even where the absolute times do not. Each
builds this project's train step (mlperf_bert.train.run.Steps: the cpu platform's model, 1 layer, hidden 128,
2 heads, intermediate 512, the real 30,522-token vocabulary, seq 128, 20 predictions, global batch 8) with
CPU_THREADS, DECODER_BLOCK and LAST_LAYER_ROWS off, on random batches (run.fake_batch):
  1dev-fp32  DEV=CPU, GPUS=1, fp32
  2dev-fp32  GPUS=2 on the CPU devices ("CPU", "CPU:1"): each gets 4 rows of the batch; parameters replicated
  1dev-half  DEFAULT_FLOAT=HALF SUM_DTYPE=HALF, LOSS_SCALER 2048
It prints the median of steps 3..N (wall and CPU seconds; the first two compile and capture the JIT), and one more
jitted step by kernel category, from tinygrad's DEBUG=2 per-kernel lines (engine/realize.py track_stats: each
kernel synchronously timed, one line per kernel and device) matched to the JIT's captured calls, which say what
each kernel reads and writes. --save keeps the raw results (JSON); --load re-prints a report from them.
"""
from __future__ import annotations
import argparse, contextlib, io, json, os, re, statistics, subprocess, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from machine import describe, machine  # noqa: E402
from mlperf_bert.constants import platform_path  # noqa: E402
from mlperf_bert.train.environment import export_tinygrad_env  # noqa: E402
from mlperf_bert.train.hparams import load_platform, resolve  # noqa: E402

COMMON = {"BS": 8, "CPU_THREADS": False, "DECODER_BLOCK": 0, "LAST_LAYER_ROWS": False}
CONFIGS = {"1dev-fp32": {"GPUS": 1}, "2dev-fp32": {"GPUS": 2},
           "1dev-half": {"DEFAULT_FLOAT": "HALF", "SUM_DTYPE": "HALF", "LOSS_SCALER": 2048.0}}
SEQ, PRED = 128, 20
CATEGORIES = ("fwd/bwd vocab-wide (decoder, its softmax, the table's gradient)", "fwd/bwd matmuls",
              "fwd/bwd other kernels", "gradient all-reduce: adds", "cross-device copies",
              "optimizer: the vocab-wide params (30522x128 table, decoder bias)", "optimizer: the other params")
LINE = re.compile(r"^\*\*\* (\S+)\s+\d+ (.*?)\s+arg\s+\d+ mem\s+[\d.]+ GB tm\s+([\d.]+)(us|ms|s)\s*/")
UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
MATMUL_FLOP_PER_BYTE = 4.0  # a reduce kernel doing this many ops per byte of unique memory is a matmul (sums: < 1)


def hparams(name: str, over: dict | None = None):
  return resolve(load_platform(platform_path(REPO, "cpu")), {**COMMON, **CONFIGS[name], **(over or {})},
                 seed=0, where="--set")


# ---------------------------------------------------------------------------------------------- child process
def describe_call(call, vocab: int) -> dict:
  """What one captured call is: its kind, name, devices, and the element counts of what it writes and reads."""
  from tinygrad.engine.realize import get_call_arg_uops, get_call_kernels, get_call_outs_ins
  from tinygrad.helpers import ansistrip, prod
  from tinygrad.uop.ops import Ops
  ast, args = call.src[0], get_call_arg_uops(call)
  outs, ins = get_call_outs_ins(call)
  numel = [int(prod(a.max_shape)) for a in args]
  d = {"kind": ast.op.name, "lines": len(get_call_kernels(call)), "vocab": any(n % vocab == 0 for n in numel),
       "out_numel": [numel[i] for i in outs], "mstack_ins": sum(1 for i in ins if args[i].op is Ops.MSTACK)}
  if ast.op is Ops.PROGRAM:
    est = ast.src[0].arg.estimates
    d.update(name=ansistrip(ast.arg.name), ops=int(est.ops), mem=int(est.mem))
  elif ast.op is Ops.COPY:
    d.update(name="copy", bytes=numel[0] * args[0].dtype.itemsize)
  else:
    d.update(name=str(ast.arg))
  return d


def parse_debug_lines(text: str) -> list[tuple[str, str, float]]:
  """(device, kernel name, seconds) of each of tinygrad's DEBUG=2 per-kernel lines."""
  from tinygrad.helpers import ansistrip
  out = []
  for line in text.splitlines():
    if (m := LINE.match(ansistrip(line))):
      out.append((m.group(1), m.group(2).strip(), float(m.group(3)) * UNIT[m.group(4)]))
  return out


def child(name: str, n_steps: int, over: dict) -> dict:
  hp = hparams(name, over)
  export_tinygrad_env(hp, os.environ)  # before tinygrad is imported
  import numpy as np
  from tinygrad.helpers import Context
  from tinygrad.uop.ops import Ops
  from mlperf_bert.train.trainer import ModelTrainer, devices_for, fake_batch, model_config, step_inputs
  cfg = model_config(REPO / "resources" / "demo" / "bert_config.json", hp.model)
  steps = ModelTrainer(cfg, hp, devices_for(hp.tinygrad.dev, hp.gpus), seed=0)
  segments: list[int] = []  # calls of each schedule the JIT captured (realize of loss+grads, ..., the update)
  add_linear = steps.train_step.add_linear
  steps.train_step.add_linear = lambda lin, vv: (segments.append(len(lin.src)), add_linear(lin, vv))[1]
  rng = np.random.default_rng(0)
  times, cpu, main_cpu, losses = [], [], [], []
  for _ in range(n_steps):
    b = fake_batch(hp.batch_size, SEQ, PRED, cfg.vocab_size, rng)
    st, sc, sm = time.perf_counter(), time.process_time(), time.thread_time()
    loss, _, _ = steps.train(b)
    losses.append(loss.item())
    times.append(time.perf_counter() - st)
    cpu.append(time.process_time() - sc)        # CPU seconds of all threads: less sensitive to the machine's load
    main_cpu.append(time.thread_time() - sm)    # of the calling thread alone
  # one more step with every kernel timed: tinygrad's DEBUG=2 lines (inputs realized first: only the step prints)
  b = fake_batch(hp.batch_size, SEQ, PRED, cfg.vocab_size, rng)
  xs = step_inputs(b, steps.devices)
  buf = io.StringIO()
  st = time.perf_counter()
  with contextlib.redirect_stdout(buf), Context(DEBUG=2): loss, _, _ = steps.train_step(*xs)
  loss.item()
  debug_wall = time.perf_counter() - st
  linear = steps.train_step.captured.linear
  calls = [describe_call(c, cfg.vocab_size) for c in linear.src]
  graphed = sum(1 for c in linear.src if c.src[0].op is Ops.CUSTOM_FUNCTION and c.src[0].arg == "graph")
  return {"config": name, "set": over, "devices": list(devices_for(hp.tinygrad.dev, hp.gpus)), "float": hp.float_type,
          "times": times, "cpu": cpu, "main_cpu": main_cpu, "losses": losses, "segments": segments, "calls": calls,
          "graph_batches": graphed, "lines": parse_debug_lines(buf.getvalue()), "debug_wall": debug_wall}


# ---------------------------------------------------------------------------------------------- the report
def category(call: dict, in_update: bool) -> str:
  if call["kind"] == "COPY": return CATEGORIES[4]
  if in_update: return CATEGORIES[5] if call["vocab"] else CATEGORIES[6]
  if call["mstack_ins"] >= 2 and call["name"].startswith("E"): return CATEGORIES[3]  # naive all-reduce: a + b
  if call["vocab"]: return CATEGORIES[0]
  if call["name"].startswith("r") and call.get("ops", 0) >= MATMUL_FLOP_PER_BYTE * max(call.get("mem", 1), 1):
    return CATEGORIES[1]
  return CATEGORIES[2]


def breakdown(r: dict) -> dict:
  """{category: {device: [kernel lines, seconds]}} of the timed step, plus how well lines and calls matched."""
  calls, lines = r["calls"], r["lines"]
  need = sum(c["lines"] for c in calls)
  step_lines = lines[len(lines) - need:] if len(lines) >= need else []
  update_from = sum(r["segments"][:-1]) if sum(r["segments"]) == len(calls) else len(calls)
  out: dict = {c: {} for c in CATEGORIES}
  i, mismatched = 0, 0
  for k, call in enumerate(calls):
    cat = category(call, k >= update_from)
    for dev, name, secs in step_lines[i:i + call["lines"]]:
      if call["kind"] == "PROGRAM" and name != call["name"]: mismatched += 1
      cell = out[cat].setdefault(dev, [0, 0.0])
      cell[0] += 1; cell[1] += secs
    i += call["lines"]
  return {"categories": out, "matched": len(step_lines) == need and mismatched == 0, "lines": need,
          "unmatched_lines": len(lines) - need, "mismatched": mismatched}


def report(results: list[dict], info: dict, load_end) -> str:
  ref = next((r for r in results if r["config"] == "1dev-fp32"), results[0])  # the ratios' denominator
  out = [f"machine: {describe(info)}; load average at end {load_end}",
         f"model: cpu platform (1 layer, hidden 128, 2 heads, intermediate 512, vocab 30522), BS 8, seq {SEQ}, "
         f"pred {PRED}; CPU_THREADS, DECODER_BLOCK, LAST_LAYER_ROWS off; --set {results[0].get('set') or {}}", ""]
  base, base_cpu = statistics.median(ref["times"][2:]), statistics.median(ref["cpu"][2:])
  out.append(f"| config | devices | median step 3..N: wall s (vs {ref['config']}) | CPU s (vs {ref['config']}) | of it the calling "
             "thread | steps, wall s | timed step: kernels s | its wall s | calls captured | kernel launches | "
             "graph batches |")
  out.append("|---|---|---|---|---|---|---|---|---|---|---|")
  bds = {}
  for r in results:
    bd = bds[r["config"]] = breakdown(r)
    med, mcpu = statistics.median(r["times"][2:]), statistics.median(r["cpu"][2:])
    main = statistics.median(r["main_cpu"][2:])
    ksum = sum(s for c in bd["categories"].values() for _, s in c.values())
    out.append(f"| {r['config']} | {', '.join(r['devices'])} | {med:.2f} ({med / base:.2f}) | "
               f"{mcpu:.2f} ({mcpu / base_cpu:.2f}) | {main / mcpu:.0%} | {' '.join(f'{t:.2f}' for t in r['times'])} | "
               f"{ksum:.2f} | {r['debug_wall']:.2f} | {len(r['calls'])} | {bd['lines']} | {r['graph_batches']} |")
  out += ["", "timed step by kernel category: seconds (kernel launches), per device"]
  cols = [(r["config"], d) for r in results for d in r["devices"]]
  out.append("| category | " + " | ".join(f"{c} {d}" for c, d in cols) + " |")
  out.append("|---|" + "---|" * len(cols))
  for cat in CATEGORIES:
    cells = [bds[c]["categories"][cat].get(d, [0, 0.0]) for c, d in cols]
    out.append(f"| {cat} | " + " | ".join(f"{s:.3f} ({n})" for n, s in cells) + " |")
  totals = [[sum(v.get(d, [0, 0.0])[i] for v in bds[c]["categories"].values()) for i in (0, 1)] for c, d in cols]
  out.append("| all kernels | " + " | ".join(f"{s:.3f} ({n})" for n, s in totals) + " |")
  for r in results:
    bd = bds[r["config"]]
    copies = [c for c in r["calls"] if c["kind"] == "COPY"]
    out.append(f"{r['config']}: losses {' '.join(f'{x:.3f}' for x in r['losses'])}; JIT segments {r['segments']}; "
               f"{len(copies)} copies, {sum(c['bytes'] for c in copies) / 2**20:.1f} MiB a step; DEBUG lines matched "
               f"the captured calls: {bd['matched']} ({bd['unmatched_lines']} lines before the step, "
               f"{bd['mismatched']} name mismatches)")
  return "\n".join(out)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--steps", type=int, default=6, help="timed steps per configuration (the median is of steps 3..N)")
  ap.add_argument("--only", nargs="*", choices=list(CONFIGS), default=list(CONFIGS))
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="more settings for every configuration")
  ap.add_argument("--save", type=Path, help="write the raw results (JSON) here")
  ap.add_argument("--load", type=Path, help="print the report of results saved with --save; run nothing")
  ap.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
  a = ap.parse_args()
  import yaml
  over = {k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in a.set)}
  if a.child:
    print("RESULT " + json.dumps(child(a.child, a.steps, over)))
    return
  if a.load:
    saved = json.loads(a.load.read_text())
    print(report(saved["results"], saved["machine"], saved["load_end"]))
    return
  if a.steps < 3: ap.error("--steps must be at least 3 (the median is of steps 3..N)")
  info, results = machine(), []
  print(f"machine: {describe(info)}", flush=True)
  for name in a.only:
    st = time.perf_counter()
    cmd = [sys.executable, __file__, "--child", name, "--steps", str(a.steps), "--set", *a.set]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    found = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not found:
      sys.exit(f"{name}: the benchmark process failed (rc {p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    results.append(json.loads(found[-1][len("RESULT "):]))
    print(f"{name}: done in {time.perf_counter() - st:.0f} s", flush=True)
  load_end = os.getloadavg()
  if a.save: a.save.write_text(json.dumps({"machine": info, "load_end": load_end, "results": results}))
  print(report(results, info, load_end))


if __name__ == "__main__":
  main()

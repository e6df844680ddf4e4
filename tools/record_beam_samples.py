#!/usr/bin/env python3
"""What one BEAM search's candidates cost on this machine, sampled by kernel kind: tinygrad 0.14's own action list
(tinygrad/codegen/opt/search.py `get_kernel_actions`) applied to BERT-large kernels of a platform's per-device shapes
for its DRESS_TARGET (the real renderer), and a sample of those candidates compiled as a BEAM worker compiles them
(search.py `_try_compile`: get_optimized_ast + to_program, the target's real compiler: nvrtc for CUDA:sm_89, LLVM 19
for AMDLLVM targets). mlperf_bert/train/cost/init.py prices every search from the record.

    python tools/record_beam_samples.py --platform tinybox_green --out resources/beam-samples/tinybox_green.json
    python tools/record_beam_samples.py --platform tinybox_green --set BS=66 BEAM=4 BEAM_UPCAST_MAX=64 \
        BEAM_LOCAL_MAX=512 BEAM_UOPS_MAX=2000 BEAM_MIN_PROGRESS=0.01 --out resources/beam-samples/v4.1/tinybox_green.json

A kernel of a kind (all-reduce: the ring's chunk add; matmul: the layers' and the attention's gemms; other: layernorm,
softmax, GELU, an optimizer update) records: its round-1 candidates (the actions that apply to the unoptimized kernel,
as beam_search's first round builds them), its round-2 candidates (the actions of BEAM=8 of those, drawn at random: the
search keeps its 8 fastest, which this machine cannot time), the seconds get_kernel_actions took a parent (serial, in
the search's own process), and the CPU seconds a sampled candidate's compile took (and of candidates down a random chain of rounds 3 to 6) (a worker's; failures included, as a
worker spends them; CPU seconds, not wall: the machine is shared), what the search's own process spends a candidate
on the pool's serialization and on a candidate's three timed runs' host side (on NULL, where a run takes no time), and a
pool worker's start (a fresh interpreter's imports). Nothing is timed on a GPU.
"""
from __future__ import annotations
from multiprocessing.reduction import ForkingPickler
import argparse, json, os, platform as pyplatform, random, resource, statistics, subprocess, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kernels(rows: int, hidden: int = 1024, ffn: int = 4096, heads: int = 16, seq: int = 512, gpus: int = 6):
  """(kind, label, builder) of BERT-large kernels at `rows` sequences a device; a builder realizes one op."""
  from tinygrad import Tensor, dtypes
  h, f = dtypes.half, dtypes.float
  tok = rows * seq
  e = lambda *s, dt=h: Tensor.empty(*s, dtype=dt)
  chunk = lambda n: (lambda: (e(n) + e(n)).realize())
  return [
    ("all-reduce", "chunk add, word embedding / gpus", chunk(30522 * 1024 // gpus)),
    ("all-reduce", "chunk add, ffn weight / gpus", chunk(ffn * hidden // gpus)),
    ("all-reduce", "chunk add, a bias / gpus", chunk(-(-ffn // gpus))),
    ("matmul", "ffn up", lambda: (e(tok, hidden) @ e(hidden, ffn)).realize()),
    ("matmul", "ffn weight gradient", lambda: (e(hidden, tok) @ e(tok, ffn)).realize()),
    ("matmul", "attention scores", lambda: (e(rows * heads, seq, hidden // heads) @ e(rows * heads, hidden // heads, seq)).realize()),
    ("other", "layernorm's variance", lambda: (e(tok, hidden) - e(tok, 1)).square().mean(-1).realize()),
    ("other", "softmax's sum", lambda: (e(rows * heads, seq, seq) - e(rows * heads, seq, 1)).exp().sum(-1).realize()),
    ("other", "gelu", lambda: e(tok, ffn).gelu().realize()),
    ("other", "LAMB update", lambda: (e(ffn, hidden, dt=f) - 0.1 * (e(ffn, hidden, dt=f) / (e(ffn, hidden, dt=f).sqrt() + 1e-6)
                                                                    + 0.01 * e(ffn, hidden, dt=f))).realize()),
  ]


DEEPEST = 6


def record_kernel_asts(cg) -> list:
  """The (AST, renderer) of every kernel tinygrad optimizes from now on in this process, in order: tinygrad's
  codegen.apply_opts wrapped (a kernel's AST is untagged; the list is cleared by its caller between kernels)."""
  seen: list = []
  orig = cg.apply_opts
  def hook(sink, ren, beam=0):
    if sink.tag is None: seen.append((sink, ren))
    return orig(sink, ren, beam)
  cg.apply_opts = hook
  return seen


def sample(target: str, rows: int, gpus: int, per_kernel: int, seed: int, deep: int = 2) -> dict:
  from tinygrad.helpers import Context
  import tinygrad.codegen as cg
  from tinygrad.codegen.opt.postrange import Scheduler, args_from_ast
  from tinygrad.codegen.opt import search
  seen = record_kernel_asts(cg)
  rng = random.Random(seed)
  out = []
  for kind, label, build in kernels(rows, gpus=gpus):
    seen.clear()
    with Context(BEAM=0): build()
    for j, (ast, ren) in enumerate(seen):
      k = Scheduler(ast, ren)
      k.convert_loop_to_global()
      t = time.process_time()
      r1 = list(search.get_kernel_actions(k, include_0=False).values())
      act_s = time.process_time() - t
      parents = rng.sample(r1, min(8, len(r1)))
      t = time.process_time()
      r2 = [c for p in parents for c in search.get_kernel_actions(p, include_0=False).values()]
      act2_s = (time.process_time() - t) / max(1, len(parents))
      pool = r1 + r2
      comp, ipc, host, ok = [], [], [], 0
      for c in rng.sample(pool, min(per_kernel, len(pool))):
        t = time.process_time()   # this process's CPU seconds: the machine is shared, its wall is not the work
        _, res = search._try_compile((0, c))
        comp.append(round(time.process_time() - t, 4))
        ok += res is not None
        # what the search's own process does a candidate for the pool: multiprocessing serializes the task there and
        # reads the result back there, with its own ForkingPickler (in memory, as the pool's pipes carry it; nothing
        # is written)
        t = time.process_time()
        ForkingPickler.dumps((0, c))
        if res is not None: ForkingPickler.loads(ForkingPickler.dumps(res))
        ipc.append(round(time.process_time() - t, 4))
        # the timed runs' host side (search.py _time_program, 3 runs: the call built, linked and launched), on NULL
        # where a program "runs" in no time: the search's own process, serial
        if res is not None:
          rawbufs, var_vals = args_from_ast(c.ast, c.ren.target.device)
          t = time.process_time()
          search._time_program(res[0], var_vals, rawbufs, cnt=3)
          host.append(round(time.process_time() - t, 4))
      # deeper rounds: a random chain down from a round-2 candidate, `deep` candidates compiled a depth (3 to
      # DEEPEST): their opts pile up (UPCAST/UNROLL up to BEAM_UPCAST_MAX), their code and its compile grow
      deep_s: dict[str, list[float]] = {}
      node = rng.choice(r2) if r2 else None
      for depth in range(3, DEEPEST + 1):
        kids = list(search.get_kernel_actions(node, include_0=False).values()) if node is not None else []
        if not kids: break
        for c in rng.sample(kids, min(deep, len(kids))):
          t = time.process_time()
          search._try_compile((0, c))
          deep_s.setdefault(str(depth), []).append(round(time.process_time() - t, 4))
        node = rng.choice(kids)
      out.append({"kind": kind, "label": f"{label} ({j + 1}/{len(seen)})" if len(seen) > 1 else label,
                  "shape": [int(x) for x in k.full_shape], "round1_candidates": len(r1),
                  "round2_candidates": len(r2), "round2_parents": len(parents),
                  "actions_s_per_parent": round((act_s + act2_s * len(parents)) / (1 + len(parents)), 4),
                  "compile_s": comp, "ipc_s": ipc, "timing_host_s": host, "compiled_ok": ok,
                  "deep_compile_s": deep_s})
      print(f"{target} {kind:10s} {out[-1]['label']:40s} r1 {len(r1):4d} r2 {len(r2):5d} "
            f"compile {statistics.mean(comp) if comp else 0:.3f} s (n={len(comp)}), deeper "
            f"{ {d: round(statistics.mean(v), 3) for d, v in deep_s.items()} }", file=sys.stderr, flush=True)
  return {"kernels": out}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--platform", default="tinybox_green", help="platforms/NAME/platform.yaml (its DRESS_TARGET, GPUS, BS)")
  ap.add_argument("--per-kernel", type=int, default=8, help="candidates compiled a kernel (default 8)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                  help="override the platform's keys (BS, BEAM, BEAM_UPCAST_MAX, ...): another round's settings")
  ap.add_argument("--out", type=Path, required=True)
  a = ap.parse_args()
  sys.path.insert(0, str(REPO))
  import yaml
  from mlperf_bert.train.dress.compilers import find_compiler, parse_target
  p = yaml.safe_load((REPO / "platforms" / a.platform / "platform.yaml").read_text())
  p.update({k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in a.set)})
  target = p["DRESS_TARGET"]
  ren, _ = parse_target(target, a.platform)
  comp = find_compiler(ren, target, os.environ)
  os.environ.update(comp.env)
  # CACHELEVEL 0: no compile comes from tinygrad's disk cache (a rerun would time cache hits); the INIT phase clears it
  os.environ.update(DEV=f"NULL:{target}", DEFAULT_FLOAT="HALF", BEAM="0", CACHELEVEL="0")
  for k in ("BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX", "BEAM_UOPS_MAX"):
    if k in p: os.environ[k] = str(p[k])
  gpus, bs = int(p["GPUS"]), int(p["BS"])
  t0 = time.monotonic()
  rec = sample(target, bs // gpus, gpus, a.per_kernel, a.seed)
  # a pool worker's start (tinygrad's pool is a spawn context with BEAM_MAX_TASKS_PER_CHILD=16, engine/worker.py: a
  # worker is replaced every 16 candidates): a fresh interpreter importing what _try_compile needs, CPU seconds
  spawn = []
  for _ in range(3):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import tinygrad.codegen.opt.search, tinygrad.engine.realize"], check=True,
                   env=os.environ)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawn.append(round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 3))
  rec["worker_spawn_s"] = spawn
  from importlib.metadata import version
  rec = {"schema": "mlperf-bert/beam-samples/1", "recorded_by": "tools/record_beam_samples.py", "platform": a.platform,
         "target": target, "compiler": comp.describe, "tinygrad_version": version("tinygrad"), "rows_a_device": bs // gpus,
         "beam_settings": {k: p.get(k) for k in ("BEAM", "BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX", "BEAM_UOPS_MAX", "BEAM_MIN_PROGRESS")},
         "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "python": pyplatform.python_version()},
         "date": time.strftime("%Y-%m-%d"), "wall_s": round(time.monotonic() - t0, 1), **rec}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  from mlperf_bert.fileio import atomic_path  # a killed run leaves no half-written record
  with atomic_path(a.out) as tmp: tmp.write_text(json.dumps(rec, indent=1) + "\n")
  return 0


def _cpu() -> str:
  try: return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
  except (OSError, StopIteration): return pyplatform.processor()


if __name__ == "__main__":
  sys.exit(main())

#!/usr/bin/env python3
"""What tinygrad 0.14's real `beam_search` (tinygrad/codegen/opt/search.py) spends a candidate outside the target's
compiler and the GPU's runs, measured on this machine: the search runs as the INIT phase runs it (its own worker pool of
PARALLEL spawn workers, BEAM_MAX_TASKS_PER_CHILD=16, CACHELEVEL=0) on BERT-large kernels of a platform's shapes
(tools/record_beam_samples.py's), on the platform's NULL target with its real compiler (nvrtc / LLVM 19).

    nice -n 5 python tools/measure_beam_host.py --platform tinybox_green --out resources/beam-host/tinybox_green.json

Each stage is timed where it runs (monkeypatched wrappers, CPU seconds: the machine is shared):
- the search's main thread: get_kernel_actions (a parent's actions applied to copies), _time_program (the candidate's
  call built, linked, its runner and buffers, 3 runs; NULL runs take no time), the loop's own work (seen_libs, the
  compute filter, the sort);
- the search process's other threads (multiprocessing's task and result handlers: pickling each candidate's
  Scheduler to a worker and unpickling each compiled program, whose UOps are new to this process);
- the workers (RUSAGE_CHILDREN once the pool is ended): a fresh interpreter every 16 tasks, its imports and its first
  lowering's warm-up, and every candidate's full lowering and compile.
`--device CPU` runs the search on a device that loads and runs its programs (a probe: the platform gives only the
shapes; the wrapper subtracts the runs' own times from _time_program's wall). NULL's runs take no time, so a wrapper
returns a synthetic time, 4 ** -depth ms (a quarter a round), to make
the search go 3-4 rounds as on a GPU; the times never choose anything measured.
"""
from __future__ import annotations
import argparse, json, os, random, resource, statistics, sys, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
from record_beam_samples import kernels, record_kernel_asts, _cpu  # noqa: E402

PICK = ("chunk add, ffn weight / gpus", "ffn up", "layernorm's variance", "gelu")


def children_cpu() -> float:
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime


def measure(target: str, rows: int, gpus: int, width: int, seed: int, warm_n: int = 12, pick: tuple[str, ...] | None = None) -> list[dict]:
  from tinygrad.helpers import Context
  import tinygrad.codegen as cg
  from tinygrad.codegen.opt import search
  from tinygrad.codegen.opt.postrange import Scheduler, args_from_ast
  from tinygrad.engine.worker import terminate_worker_pool
  seen = record_kernel_asts(cg)
  rng = random.Random(seed)
  pick = pick or PICK
  tried: list = []
  stage = {"actions": 0.0, "time_program": 0.0, "candidates": 0, "timed": 0, "time_program_wall_beside_runs": 0.0}
  real_actions, real_time = search.get_kernel_actions, search._time_program
  def actions(s, include_0=True, max_up=None):
    t = time.thread_time()
    out = real_actions(s, include_0, max_up)
    stage["actions"] += time.thread_time() - t
    if not include_0:
      stage["candidates"] += len(out)
      tried.extend(out.values())
    return out
  def timed(prg, var_vals, rawbufs, early_stop=None, **kw):
    t, w = time.thread_time(), time.perf_counter()
    tms = real_time(prg, var_vals, rawbufs, early_stop=early_stop, **kw)
    stage["time_program"] += time.thread_time() - t
    # a runnable device (--device CPU): the wall beside the runs themselves (tms are scaled to the full launch)
    gs = getattr(prg.arg, "global_size", None)
    factor = search.get_test_global_size(gs, 65536, var_vals)[1] if gs else 1
    stage["time_program_wall_beside_runs"] += time.perf_counter() - w - sum(x for x in tms if x < float("inf")) / factor
    stage["timed"] += 1
    depth = len(getattr(prg.src[0].arg, "applied_opts", ()) or ())
    return [1e-3 * 4.0 ** -depth * (1 + 0.2 * rng.random())] * 3     # synthetic (module docstring)
  search.get_kernel_actions, search._time_program = actions, timed
  out = []
  for kind, label, build in kernels(rows, gpus=gpus):
    if label not in pick: continue
    seen.clear()
    with Context(BEAM=0): build()
    ast, ren = max(seen, key=lambda x: len(x[0].toposort()))     # the op's main kernel
    k = Scheduler(ast, ren)
    k.convert_loop_to_global()
    rawbufs, var_vals = args_from_ast(ast, ren.target.device)
    for key in stage: stage[key] = 0
    tried.clear()
    c0, p0, m0, w0 = children_cpu(), time.process_time(), time.thread_time(), time.monotonic()
    search.beam_search(k, rawbufs, var_vals, width, disable_cache=True)
    main, proc, wall = time.thread_time() - m0, time.process_time() - p0, time.monotonic() - w0
    terminate_worker_pool()          # its workers reaped: their CPU seconds counted
    workers = children_cpu() - c0
    n, nt = stage["candidates"], max(1, stage["timed"])
    # the same search's candidates compiled again here, in this warm process (as tools/record_beam_samples.py samples
    # them): the workers' seconds beyond these are a fresh worker's start and first lowering, a 16 tasks
    warm = []
    for c in rng.sample(tried, min(warm_n, len(tried))):
      t = time.process_time()
      search._try_compile((0, c))
      warm.append(time.process_time() - t)
    row = {"kind": kind, "label": label, "candidates": n, "timed": stage["timed"], "wall_s": round(wall, 2),
           "main_thread_cpu_s": round(main, 3), "actions_cpu_s": round(stage["actions"], 3),
           "time_program_cpu_s": round(stage["time_program"], 3),
           "loop_cpu_s": round(main - stage["actions"] - stage["time_program"], 3),
           "pool_threads_cpu_s": round(proc - main, 3), "workers_cpu_s": round(workers, 3),
           "warm_compile_s": [round(x, 4) for x in warm],
           "per_candidate_ms": {"main_thread": round(1e3 * main / n, 2), "pool_threads": round(1e3 * (proc - main) / n, 2),
                                "search_process": round(1e3 * proc / n, 2), "workers": round(1e3 * workers / n, 2),
                                "serial_beside_actions": round(1e3 * (proc - stage["actions"]) / n, 2),
                                "warm_compile": round(1e3 * statistics.mean(warm), 2),
                                "time_program_a_timed": round(1e3 * stage["time_program"] / nt, 2),
                                "time_program_wall_beside_runs_a_timed": round(1e3 * stage["time_program_wall_beside_runs"] / nt, 2)}}
    print(f"{target} {kind:10s} {label:30s} {json.dumps(row['per_candidate_ms'])} n={n} wall {wall:.1f}s",
          file=sys.stderr, flush=True)
    out.append(row)
  return out


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--platform", default="tinybox_green")
  ap.add_argument("--width", type=int, default=4, help="BEAM width of the measured searches (default 4)")
  ap.add_argument("--parallel", type=int, default=2, help="the pool's workers (PARALLEL; default 2, this machine's cores)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--device", default=None, help="a runnable device instead of the platform's NULL target (CPU: its "
                  "programs really loaded and run; the platform gives only the shapes)")
  ap.add_argument("--pick", nargs="*", default=None, help="kernel labels (default: the four of PICK)")
  ap.add_argument("--out", type=Path, required=True)
  a = ap.parse_args()
  sys.path.insert(0, str(REPO))
  import yaml
  from mlperf_bert.train.dress.compilers import find_compiler, parse_target
  p = yaml.safe_load((REPO / "platforms" / a.platform / "platform.yaml").read_text())
  target = p["DRESS_TARGET"] if a.device is None else a.device
  if a.device is None:
    ren, _ = parse_target(target, a.platform)
    comp = find_compiler(ren, target, os.environ)
    os.environ.update(comp.env)
    describe = comp.describe
  else: describe = f"tinygrad's own for {a.device}"
  os.environ.update(DEV=f"NULL:{target}" if a.device is None else a.device, DEFAULT_FLOAT="HALF", BEAM="0", CACHELEVEL="0", PARALLEL=str(a.parallel))
  # the synthetic times (4 ** -depth ms) end the search in its 3rd or 4th round at BEAM_MIN_PROGRESS 5 us
  os.environ["BEAM_MIN_PROGRESS"] = "5"
  for k in ("BEAM_UPCAST_MAX", "BEAM_LOCAL_MAX", "BEAM_UOPS_MAX"):
    if k in p: os.environ[k] = str(p[k])
  gpus, bs = int(p["GPUS"]), int(p["BS"])
  t0 = time.monotonic()
  rows = measure(target, bs // gpus, gpus, a.width, a.seed, pick=tuple(a.pick) if a.pick else None)
  n = sum(r["candidates"] for r in rows)
  from importlib.metadata import version
  per = lambda key: round(statistics.mean(r["per_candidate_ms"][key] for r in rows), 2)   # a kernel's mean
  rec = {"schema": "mlperf-bert/beam-host/1", "recorded_by": "tools/measure_beam_host.py", "platform": a.platform,
         "target": target, "compiler": describe, "tinygrad_version": version("tinygrad"), "width": a.width,
         "parallel": a.parallel, "machine": {"cpu": _cpu(), "cores": os.cpu_count()}, "date": time.strftime("%Y-%m-%d"),
         "wall_s": round(time.monotonic() - t0, 1), "candidates": n,
         # means over the kernels (each kernel's seconds over its candidates)
         "search_process_ms": per("search_process"), "serial_beside_actions_ms": per("serial_beside_actions"),
         "workers_ms": per("workers"), "warm_compile_ms": per("warm_compile"),
         "cold_worker_extra_ms": round(per("workers") - per("warm_compile"), 2), "kernels": rows}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  from mlperf_bert.fileio import atomic_path  # a killed run leaves no half-written record
  with atomic_path(a.out) as tmp: tmp.write_text(json.dumps(rec, indent=1) + "\n")
  print(json.dumps({k: v for k, v in rec.items() if k != "kernels"}), file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())

"""The INIT phase's time (mlperf_bert/train/cost/) from the BEAM searches tinygrad will run in it, against MLPerf's
limit (closed: init < 30 min; constants.INIT_LIMIT_MIN). Every term and its source is in this file.

    beam = beam_settings(platform_yaml)                      # BEAM, BEAM_MIN_PROGRESS of the platform
    init = predict_init(train_calls, eval_calls, "CUDA:sm_89", beam, outside_s=52.7)

- **The searches**: one a distinct program of the INIT phase's steps (train + eval, at INIT_BERT_LAYERS), as the
  tinygrad that runs them keys a search (search.py `beam_search`: the AST's key): tinygrad 0.14's AST carries each
  buffer's device (`ParamArg.device`), so a kernel compiled once a device (the ring all-reduce's chunk adds) is a search
  a device, all timed on the first GPU one after another; at e0139fa (0.11) the AST had no device and one search
  served every device (`keyed_by_device`; a tinygrad version not in KEYED_BY_DEVICE is taken as the pinned one). A
  program is a call record's kernel (train/dress/measure.py call_records) by its AST key (`ast`, and `ast_any_device`
  for the key without devices; by name, devices, FLOPs, bytes and launch where a record has none); its kind:
  all-reduce (one device of several), matmul (tensor cores), other.
- **A search** (tinygrad/codegen/opt/search.py, the same loop at e0139fa and 0.14): round 1 compiles and times the
  actions that apply to the unoptimized kernel; each later round those of the BEAM best; it stops when the best is
  under BEAM_MIN_PROGRESS or gains less than it. A round costs its parents' action expansion (serial, the search's
  process), its candidates' compiles (a worker pool of PARALLEL = the host's CPU threads, imap_unordered) and their
  timed runs and the pool's pickles (serial, overlapping the compiles: RUNS runs a candidate at the test size, each at
  the step-time model's time plus RUN_OVERHEAD_US on the GPU).
  Candidates a round, a parent's expansion and a compile's CPU seconds (rounds 1-2, and rounds 3-6 down random
  chains: a deeper candidate's piled-up opts make more code) are SAMPLED by kind on this machine with the
  target's real compiler (tools/record_beam_samples.py, resources/beam-samples/<platform>.json); their standard
  errors make the band.
- **The search's own process, a candidate** (serial): MEASURED in tinygrad 0.14's real `beam_search` on this machine
  (tools/measure_beam_host.py, resources/beam-host/<platform>.json: its own spawn pool, CACHELEVEL=0, the target's
  compiler, NULL runs): the process's CPU seconds beside get_kernel_actions (priced a parent above), i.e. the pool's
  task and result handler threads (each candidate's Scheduler pickled, each compiled program's new UOps unpickled,
  a replacement worker spawned every 16 tasks) and the main thread's _time_program host side (call built, linked,
  runner, buffers, 3 runs) and loop. (The same record holds the workers' CPU seconds a candidate, within the noise of
  the same candidates compiled in a warm process: the sampled compiles are kept.) A target without that record takes
  the sample tool's pickles + timed runs' host (smaller: there the program's UOps were already in the process).
- **Rounds**: the step-time model gives the kernel's unoptimized time (one thread a block, no tensor cores: where the
  search starts) and its BEAM'd time; each round closes the gap by ROUND_GAIN (the median amount of tinygrad's action
  list), until the platform's BEAM_MIN_PROGRESS stops it.
- **Outside the searches**: the INIT process's Python (model build, the steps' schedules and first compiles): the
  seconds this machine took to build and capture the same steps (`outside_s`: the dress's three calls of each step,
  or the census's CPU seconds), times CPU_FACTOR. No weights are loaded (model_train.py at e0139fa: "for init, zero out all weights").
Nothing here is taken from tinycorp's INIT phases (docs/benchmarks.md holds the prediction against them).
"""
from __future__ import annotations
import json, math, statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from mlperf_bert.constants import INIT_LIMIT_MIN
from mlperf_bert.errors import UserError
from mlperf_bert.train.cost.hardware import BOXES
from mlperf_bert.train.cost.kernel import kernel_time

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "resources" / "beam-samples"
# tools/measure_beam_host.py's records: the real beam_search's serial and cold-worker seconds a candidate (docstring)
HOST_DIR = Path(__file__).resolve().parents[3] / "resources" / "beam-host"
# tools/record_init_searches.py's records: tinygrad's own e0139fa step priced by this model beside tinycorp's v5.0 INIT
RECORDS = Path(__file__).resolve().parents[3] / "resources" / "predicted" / "init-e0139fa-{platform}.json"
SEARCH_KINDS = ("all-reduce", "matmul", "other")
# tinygrad search.py (e0139fa and 0.14): getenv("BEAM_MIN_PROGRESS", 0.01) microseconds; _time_program(cnt=3,
# max_global_size=65536): three timed runs a candidate, a launch over 65,536 blocks timed shrunk and scaled back
DEFAULT_MIN_PROGRESS_US, RUNS, TEST_GLOBAL_MAX = 0.01, 3, 65536
# the median amount (arg) of tinygrad's action list, search.py `actions` (157 sized actions: UPCAST 2-7, UNROLL 4-7,
# LOCAL 2-32, GROUPTOP 13-256, GROUP 4-16, THREAD 2-64): one action a round splits one axis by it
ROUND_GAIN = 7.0
# a timed run's cost beside the kernel: a synchronous launch and wait plus the L2 flush (ops_nv/ops_amd
# invalidate_caches, an ioctl) before each run; an estimate (no GPU measured here), a few times a graph launch's 3.4 us
RUN_OVERHEAD_US = 20.0
# the box's host CPUs: tinycorp's v5.0 system descriptions (examples/mlperf/training_submission_v5.0/tinycorp/systems/
# <system>.json at e0139fa): green and red one AMD EPYC 7532 (32 cores, 64 threads), the MI300X box two EPYC 9354
# (32 cores, 64 threads each). tinygrad's pool has PARALLEL = the threads (helpers.py NUM_CPU_THREADS); its compile
# throughput is taken as one a physical core (two threads share a core's units)
# (dev_1gpu's H200 host has no system description: taken as green's)
HOST_CORES = {"CUDA:sm_89": 32, "AMDLLVM:gfx1100": 32, "AMDLLVM:gfx942": 64, "CUDA:sm_90": 32}
# the box's core against this machine's (the samples' CPU seconds): no published single-thread comparison of a Zen 2
# EPYC 7532 core (3.3 GHz boost) and this KVM guest's Xeon vCPU is at hand; taken as equal (an estimate, not in the band)
CPU_FACTOR = 1.0
# tinygrad versions and how they key a search (the AST's key with or without each buffer's device)
# (0.9.2: v4.1's b5546912, its kernel AST's buffers DEFINE_GLOBALs by index, no device; search.py's key the same)
KEYED_BY_DEVICE = {"0.9.2": False, "0.11.0": False, "0.14.0": True}
# tinygrad's pool replaces a worker every BEAM_MAX_TASKS_PER_CHILD=16 tasks (search.py at e0139fa, engine/worker.py at
# 0.14; a spawn context): a fresh interpreter's imports (sampled) a 16 candidates
TASKS_PER_WORKER = 16
PINNED_TINYGRAD = "0.14.0"


@dataclass(frozen=True)
class BeamSettings:
  width: int                 # BEAM
  min_progress_us: float     # BEAM_MIN_PROGRESS


def beam_settings(platform: dict[str, Any]) -> BeamSettings:
  """A platform's (or its dress's overrides') BEAM and BEAM_MIN_PROGRESS, tinygrad's default where unset."""
  return BeamSettings(int(platform.get("BEAM") or 0), float(platform.get("BEAM_MIN_PROGRESS") or DEFAULT_MIN_PROGRESS_US))


@dataclass(frozen=True)
class Program:
  kind: str
  name: str
  devices: tuple[str, ...]
  flops: int
  nbytes: int
  global_size: tuple[int, ...]
  local_size: tuple[int, ...] | None
  tc: str | None
  ast: str = ""                # its AST's key as tinygrad 0.14 keys it (devices in it); "" where not recorded
  ast_any_device: str = ""     # the same AST's key with each device index dropped (e0139fa's key)


def programs_from_calls(calls: Iterable[dict[str, Any]]) -> list[Program]:
  """The distinct programs of a captured step's call records (kernels only: a copy is no search), each with its kind;
  distinct by AST key where recorded, else by name, devices, FLOPs, bytes and launch."""
  seen: dict[tuple, Program] = {}
  records = [c for c in calls if c.get("k") == "kernel"]
  multi = len({d for c in records for d in c["devices"]}) > 1
  for c in records:
    devs = tuple(c["devices"])
    kind = "matmul" if c.get("tc") else "all-reduce" if multi and len(devs) == 1 and not devs[0].startswith("CPU") else "other"
    p = Program(kind, c["name"], devs, int(c["flops"]), int(c["bytes"]), tuple(c["global"]),
                tuple(c["local"]) if c.get("local") else None, c.get("tc"), c.get("ast", ""), c.get("ast_any_device", ""))
    seen.setdefault((p.ast,) if p.ast else (p.name, p.devices, p.flops, p.nbytes, p.global_size, p.local_size, p.tc), p)
  return list(seen.values())


def searches(programs: Iterable[Program], keyed_by_device: bool = True) -> list[Program]:
  """The BEAM searches of `programs`: one a program where the AST carries the device (0.14), else one for the programs
  that differ only by their device (e0139fa: one search a kernel for all devices); a second step's program that the
  first already searched is a cache hit (beam_search's diskcache key)."""
  out: dict[tuple, Program] = {}
  for p in programs:
    if p.ast: key = (p.ast if keyed_by_device else p.ast_any_device,)
    else: key = (p.name, p.devices if keyed_by_device else tuple(sorted({d.split(":")[0] for d in p.devices})),
                 p.flops, p.nbytes, p.global_size, p.local_size, p.tc)
    out.setdefault(key, p)
  return list(out.values())


@dataclass(frozen=True)
class KindCost:
  round1: float          # candidates of round 1
  per_parent: float      # candidates a parent of a later round
  actions_s: float       # CPU s to expand one parent (serial)
  compile_s: float       # CPU s a candidate's compile (a worker's), with its share of a worker's start
  compile_se: float      # its standard error
  ipc_s: float           # CPU s the search's own process spends a candidate (serial): the pool's pickles and
                         # the host side of its timed runs
  round1_se: float
  per_parent_se: float
  n: int                 # compiles sampled
  deeper_s: tuple[float, ...] = ()   # CPU s a candidate's compile in rounds 3, 4, ... (sampled down random chains)


def load_samples(target: str, path: Path | None = None) -> tuple[dict[str, KindCost], dict[str, Any]]:
  """The per-kind costs of a target's sample record (tools/record_beam_samples.py)."""
  files = [path] if path else sorted(SAMPLES_DIR.glob("*.json"))
  measured = measured_host(target)
  se = lambda xs: statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0   # a mean's standard error
  for f in files:
    rec = json.loads(Path(f).read_text())
    if rec["target"] != target: continue
    spawn = statistics.median(rec.get("worker_spawn_s") or [0.0]) / TASKS_PER_WORKER
    out = {}
    for kind in SEARCH_KINDS:
      ks = [k for k in rec["kernels"] if k["kind"] == kind]
      comp = [x for k in ks for x in k["compile_s"]]
      ipc = [x for k in ks for x in k.get("ipc_s", [])]
      host = [x for k in ks for x in k.get("timing_host_s", [])]
      r1 = [k["round1_candidates"] for k in ks]
      pp = [k["round2_candidates"] / k["round2_parents"] for k in ks if k["round2_parents"]]
      serial = measured if measured is not None else \
        (statistics.mean(ipc) if ipc else 0.0) + (statistics.mean(host) if host else 0.0)
      depths = sorted({int(d) for k in ks for d in k.get("deep_compile_s", {})})
      deeper = tuple(statistics.mean(x for k in ks for x in k["deep_compile_s"].get(str(d), [])) + spawn for d in depths)
      out[kind] = KindCost(statistics.mean(r1), statistics.mean(pp) if pp else 0.0,
                           statistics.mean(k["actions_s_per_parent"] for k in ks), statistics.mean(comp) + spawn,
                           se(comp), serial,
                           se(r1), se(pp), len(comp), deeper)
    return out, rec
  raise UserError(f"{SAMPLES_DIR}: no BEAM sample record of {target}; run tools/record_beam_samples.py "
                          f"--platform <platform of {target}> --out {SAMPLES_DIR}/<platform>.json")


def measured_host(target: str, folder: Path = HOST_DIR) -> float | None:
  """tools/measure_beam_host.py's record of `target`: the real search's serial CPU s a candidate beside its parents'
  actions (its kernels' mean); None where not recorded."""
  for f in sorted(folder.glob("*.json")):
    rec = json.loads(f.read_text())
    if rec["target"] == target: return rec["serial_beside_actions_ms"] / 1e3
  return None


def search_seconds(p: Program, cost: KindCost, target: str, beam: BeamSettings) -> tuple[float, int, float]:
  """One search's seconds on the box, its rounds and its candidates (module docstring: rounds, candidates, compiles,
  timed runs)."""
  card = BOXES[target].card
  best = kernel_time(card, p.flops, p.nbytes, p.global_size, p.local_size, p.tc).ms * 1e3            # us, BEAM'd
  threads = math.prod(p.global_size) * (math.prod(p.local_size) if p.local_size else 1)
  start = kernel_time(card, p.flops, p.nbytes, (threads,), None, None, beam=False).ms * 1e3          # us, unoptimized
  blocks = max(1, math.prod(p.global_size))
  shrink = min(1.0, TEST_GLOBAL_MAX / blocks)       # the test launch's share of the kernel (timed, then scaled)
  workers = HOST_CORES[target]                                   # the box's cores (CPU_FACTOR scales the seconds once, below)
  total, rounds, now, parents, tried = 0.0, 0, start, 1.0, 0.0
  while True:
    rounds += 1
    n = cost.round1 if rounds == 1 else parents * cost.per_parent
    if n <= 0: break
    tried += n
    after = best + (start - best) / ROUND_GAIN ** rounds
    timed = n * (RUNS * (now * shrink + RUN_OVERHEAD_US)) / 1e6
    serial = n * cost.ipc_s * CPU_FACTOR + timed
    # a candidate of round 3 on compiles as that round's sampled chains did (the deepest sampled beyond them)
    each = cost.compile_s if rounds <= 2 or not cost.deeper_s else cost.deeper_s[min(rounds - 3, len(cost.deeper_s) - 1)]
    compile_wall = max(n * each / workers, each) * CPU_FACTOR       # a round waits for at least one compile
    total += parents * cost.actions_s * CPU_FACTOR + max(compile_wall, serial)
    if after < beam.min_progress_us or (rounds > 1 and now - after < beam.min_progress_us): break
    now, parents = after, min(float(beam.width), n)
  return total, rounds, tried


def predict_init(train_calls: list[dict[str, Any]], eval_calls: list[dict[str, Any]], target: str, beam: BeamSettings,
                 outside_s: float = 0.0, tinygrad: str = PINNED_TINYGRAD, samples: Path | None = None,
                 division: str = "closed") -> dict[str, Any]:
  """The INIT phase of the steps whose call records (at the INIT depth) are given, on `target`'s box with the
  platform's BEAM settings: minutes, by kind, searches, rounds, the band (the samples' ±2 standard errors) and the
  verdict against the division's limit. `outside_s`: this machine's CPU seconds to build and capture the steps."""
  keyed = KEYED_BY_DEVICE.get(tinygrad, True)
  progs = programs_from_calls(train_calls) + programs_from_calls(eval_calls)
  found = searches(progs, keyed)
  costs, rec = load_samples(target, samples)
  out = {}
  for sign, name in ((0, "minutes"), (-2, "low_minutes"), (2, "high_minutes")):
    by = {k: 0.0 for k in SEARCH_KINDS}
    rounds = {k: [] for k in SEARCH_KINDS}
    tried = 0.0
    for p in found:
      c = costs[p.kind]
      f = max(0.0, 1 + sign * c.compile_se / c.compile_s) if c.compile_s else 1.0   # the sample's relative error
      c = replace(c, round1=max(0.0, c.round1 + sign * c.round1_se), per_parent=max(0.0, c.per_parent + sign * c.per_parent_se),
                  compile_s=c.compile_s * f, deeper_s=tuple(x * f for x in c.deeper_s))
      s, r, t = search_seconds(p, c, target, beam) if beam.width else (0.0, 0, 0.0)
      by[p.kind] += s
      rounds[p.kind].append(r)
      tried += t
    minutes = (sum(by.values()) + outside_s * CPU_FACTOR) / 60
    out[name] = round(minutes, 1)
    if sign == 0:
      out["by_kind_min"] = {k: round(v / 60, 1) for k, v in by.items()}
      out["mean_rounds"] = {k: round(statistics.mean(v), 1) if v else 0 for k, v in rounds.items()}
      out["candidates"] = round(tried)
  limit = INIT_LIMIT_MIN[division]
  n_by = {k: sum(p.kind == k for p in found) for k in SEARCH_KINDS}
  return {**out, "searches": len(found), "searches_by_kind": n_by, "programs": len(progs),
          "keyed_by_device": keyed, "tinygrad": tinygrad, "outside_min": round(outside_s * CPU_FACTOR / 60, 1),
          "beam": beam.width, "beam_min_progress_us": beam.min_progress_us, "division": division, "limit_min": limit,
          "within_limit": out["minutes"] < limit, "samples": f"{rec['recorded_by']} on {rec['machine']['cpu']} "
          f"({rec['date']}, {rec['compiler']})", "sources": "mlperf_bert/train/cost/init.py"}


def held_against_tinycorp(platform: str, path: Path | None = None) -> dict[str, Any] | None:
  """The platform's record (RECORDS): tinygrad's own e0139fa step, its searches keyed as e0139fa's tinygrad keys them,
  predicted by this model, against tinycorp's v5.0 INIT median; None without a record or a published INIT."""
  f = Path(path or str(RECORDS).format(platform=platform))
  if not f.is_file(): return None
  rec = json.loads(f.read_text())
  measured = rec.get("measured_init_min")
  pred = rec["sides"]["tinygrad"]["init"].get("0.11.0")
  if not measured or not pred: return None
  return {"predicted_min": pred["minutes"], "measured_min": measured, "candidates": pred["candidates"],
          "error_pct": round(100 * (pred["minutes"] / measured - 1), 1),
          "missing_min": round(measured - pred["minutes"], 1), "record": str(f.relative_to(f.parents[2]))}

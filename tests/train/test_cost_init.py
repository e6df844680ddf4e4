"""mlperf_bert/train/cost/init.py: the INIT phase from the BEAM searches tinygrad runs (keyed by device or not), each
priced from tinygrad's own candidate list (tools/record_beam_samples.py) and the search's rounds; the recorded
prediction of tinygrad's e0139fa step against tinycorp's v5.0 INIT phases (tools/record_init_searches.py)."""
from __future__ import annotations
import importlib.util, json, os, subprocess, sys
from pathlib import Path

import pytest

from mlperf_bert.constants import INIT_LIMIT_MIN
from mlperf_bert.train.cost.init import (HOST_CORES, BeamSettings, KindCost, Program, beam_settings, load_samples,
                                         predict_init, programs_from_calls, search_seconds, searches,
                                         held_against_tinycorp)
from mlperf_bert.train.hparams import load_platform

REPO = Path(__file__).resolve().parents[2]
GREEN = BeamSettings(8, 5.0)


def _kernel(name, devices, flops=0, nbytes=2 ** 20, gs=(256,), ls=(128,), tc=None) -> dict:
  return {"k": "kernel", "name": name, "devices": list(devices), "flops": flops, "bytes": nbytes, "global": list(gs),
          "local": list(ls), "tc": tc}


SIX = [f"NV:{i}" if i else "NV" for i in range(6)]


def test_a_kernel_a_device_is_a_search_a_device_on_0_14_and_one_search_at_e0139fa():
  calls = [_kernel("E_40696_32_4", [d]) for d in SIX] + [_kernel("r_96_16", SIX, flops=10 ** 9, tc="float"),
                                                          {"k": "copy", "bytes": 100}]
  progs = programs_from_calls(calls)
  assert sorted(p.kind for p in progs) == ["all-reduce"] * 6 + ["matmul"]
  assert len(searches(progs, keyed_by_device=True)) == 7 and len(searches(progs, keyed_by_device=False)) == 2
  # on one device nothing is an all-reduce
  assert {p.kind for p in programs_from_calls([_kernel("E_1", ["NV"])])} == {"other"}


def test_a_search_stops_by_beam_min_progress_and_a_slow_kernel_runs_more_rounds():
  c = KindCost(round1=20, per_parent=10, actions_s=0.0, compile_s=1.0, compile_se=0, ipc_s=0.0, round1_se=0,
               per_parent_se=0, n=1)
  tiny = Program("other", "E_4", ("NV",), 0, 4096, (4,), (32,), None)
  big = Program("matmul", "r_big", ("NV",), 2 * 7680 * 1024 * 4096, 7680 * 4096 * 2, (60, 32), (128,), "float")
  s_tiny, r_tiny, n_tiny = search_seconds(tiny, c, "CUDA:sm_89", GREEN)
  s_big, r_big, n_big = search_seconds(big, c, "CUDA:sm_89", GREEN)
  # a kernel the search makes faster than BEAM_MIN_PROGRESS in its first round: one round, its 20 candidates'
  # compiles spread over the box's 32 cores, the round waiting for at least one compile
  cores = HOST_CORES["CUDA:sm_89"]
  assert r_tiny == 1 and n_tiny == 20 and s_tiny == pytest.approx(max(20 / cores, 1.0))
  # a gemm of a millisecond: round 1, then BEAM=8 parents x 10 candidates a round until a round gains < 5 us
  assert r_big > 3 and n_big == 20 + 80 * (r_big - 1)
  assert s_big == pytest.approx(max(20 / cores, 1.0) + (r_big - 1) * max(80 / cores, 1.0))
  assert search_seconds(big, c, "CUDA:sm_89", BeamSettings(8, 0.01))[1] > r_big   # tinygrad's default goes on longer


def test_the_platforms_beam_settings_are_read():
  assert beam_settings(load_platform(REPO / "platforms/tinybox_green/platform.yaml")) == BeamSettings(8, 5.0)
  assert beam_settings(load_platform(REPO / "platforms/tinybox_8xMI300X/platform.yaml")) == BeamSettings(3, 5.0)
  assert beam_settings({}) == BeamSettings(0, 0.01)


def _nvrtc_or_skip():
  """sm_89's compiler (PyPI's nvrtc), or the test skips naming what is missing."""
  from mlperf_bert.train.dress.compilers import find_compiler
  try: return find_compiler("CUDA", "CUDA:sm_89", os.environ)
  except Exception as e: pytest.skip(f"no nvrtc: {e}")


def test_the_search_pricing_counts_tinygrads_own_candidates_for_a_small_kernel():
  """A 64 x 64 half matmul and an add for sm_89 (nvrtc): the sample tool's round-1 count is len(get_kernel_actions),
  tinygrad's own list, and a compiled candidate's CPU seconds are recorded (seconds; a subprocess: DEV at import)."""
  comp = _nvrtc_or_skip()
  code = (
    "import json, sys; sys.path.insert(0, 'tools'); import record_beam_samples as r\n"
    "from tinygrad import Tensor, dtypes\n"
    "from tinygrad.codegen.opt import search\n"
    "ks = [('matmul', 'mm', lambda: (Tensor.empty(64, 64, dtype=dtypes.half) @ Tensor.empty(64, 64, dtype=dtypes.half)).realize()),\n"
    "      ('all-reduce', 'add', lambda: (Tensor.empty(4096, dtype=dtypes.half) + Tensor.empty(4096, dtype=dtypes.half)).realize())]\n"
    "r.kernels = lambda *a, **k: ks\n"
    "got = []\n"
    "orig = search.get_kernel_actions\n"
    "search.get_kernel_actions = lambda s, include_0=True, **k: (got.append(len(v := orig(s, include_0, **k))), v)[1]\n"
    "print(json.dumps({**r.sample('CUDA:sm_89', 1, 1, 2, 0), 'lens': got}))\n")
  env = {**os.environ, **comp.env, "DEV": "NULL:CUDA:sm_89", "CACHELEVEL": "0", "PYTHONPATH": str(REPO)}
  p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  rec = json.loads(p.stdout.strip().splitlines()[-1])
  mm = next(k for k in rec["kernels"] if k["kind"] == "matmul")
  assert mm["round1_candidates"] > 0 and mm["round1_candidates"] in rec["lens"]   # tinygrad's list, as the search builds it
  assert mm["round2_candidates"] == sum(rec["lens"][1:1 + mm["round2_parents"]])
  assert len(mm["compile_s"]) == 2 and all(s > 0 for s in mm["compile_s"])




@pytest.mark.parametrize("platform", ["tinybox_green", "tinybox_red", "tinybox_8xMI300X"])
def test_the_recorded_init_of_tinygrads_e0139fa_step_is_what_the_model_gives(platform):
  """The fixture's programs priced again give its figures (the code and the record agree); the figure against
  tinycorp's v5.0 median is in docs/benchmarks.md."""
  f = REPO / f"resources/predicted/init-e0139fa-{platform}.json"
  if not f.exists(): pytest.skip(f"{f} not recorded")
  r = json.loads(f.read_text())
  beam = BeamSettings(r["beam"]["width"], r["beam"]["min_progress_us"])
  side = r["sides"]["tinygrad"]
  calls = {st: [{"k": "kernel", "name": p[1], "devices": p[2], "flops": p[3], "bytes": p[4], "global": p[5],
                 "local": p[6], "tc": p[7], "ast": p[8], "ast_any_device": p[9]} for p in side["programs"][st]]
           for st in ("train", "eval")}
  for version, want in side["init"].items():
    got = predict_init(calls["train"], calls["eval"], r["target"], beam, outside_s=side["capture_cpu_s"], tinygrad=version)
    assert got["minutes"] == want["minutes"] and got["searches"] == want["searches"]
  old, new = side["init"]["0.11.0"], side["init"]["0.14.0"]
  assert old["searches"] < new["searches"] and new["searches_by_kind"]["all-reduce"] > old["searches_by_kind"]["all-reduce"]
  assert new["limit_min"] == INIT_LIMIT_MIN["closed"]
  held = held_against_tinycorp(platform)
  assert held["predicted_min"] == old["minutes"] and held["measured_min"] == r["measured_init_min"]


def test_the_searchs_serial_seconds_a_candidate_come_from_the_real_search_where_measured(tmp_path):
  """A target with a tools/measure_beam_host.py record prices a candidate's serial seconds (the search's own process,
  beside the parents' actions) from it; a target without one keeps the sample tool's pickles + timed runs' host."""
  from mlperf_bert.train.cost.init import HOST_DIR, measured_host
  rec = json.loads((HOST_DIR / "tinybox_green.json").read_text())
  assert measured_host("CUDA:sm_89") == rec["serial_beside_actions_ms"] / 1e3 > 0
  costs, _ = load_samples("CUDA:sm_89")
  assert {k: c.ipc_s for k, c in costs.items()} == {k: rec["serial_beside_actions_ms"] / 1e3 for k in costs}
  assert measured_host("CUDA:sm_89", folder=tmp_path) is None
  sampled, _ = load_samples("CUDA:sm_90")     # dev_1gpu: no record of the real search
  assert all(0 < c.ipc_s < rec["serial_beside_actions_ms"] / 1e3 for c in sampled.values())


@pytest.mark.slow
def test_the_real_beam_search_is_measured_stage_by_stage():
  """tools/measure_beam_host.py runs tinygrad's own beam_search (its spawn pool, nvrtc) on an add for sm_89 and
  splits the search process's CPU seconds: every candidate tinygrad built is counted, each timed one went through
  _time_program, the workers' seconds are counted (seconds; a subprocess: DEV at import)."""
  comp = _nvrtc_or_skip()
  code = (
    "import json, sys; sys.path.insert(0, 'tools'); import measure_beam_host as m\n"
    "from tinygrad import Tensor, dtypes\n"
    "m.kernels = lambda *a, **k: [('all-reduce', 'add', lambda: (Tensor.empty(4096, dtype=dtypes.half) + Tensor.empty(4096, dtype=dtypes.half)).realize())]\n"
    "m.PICK = ('add',)\n"
    "print(json.dumps(m.measure('CUDA:sm_89', 1, 1, 2, 0, warm_n=2)))\n")
  env = {**os.environ, **comp.env, "DEV": "NULL:CUDA:sm_89", "CACHELEVEL": "0", "PARALLEL": "2", "BEAM_MIN_PROGRESS": "5",
         "DEFAULT_FLOAT": "HALF", "PYTHONPATH": str(REPO)}
  p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  (row,) = json.loads(p.stdout.strip().splitlines()[-1])
  assert row["candidates"] > 0 and 0 < row["timed"] <= row["candidates"]
  assert row["main_thread_cpu_s"] >= row["actions_cpu_s"] + row["time_program_cpu_s"] > 0
  assert row["workers_cpu_s"] > 0 and row["pool_threads_cpu_s"] > 0 and len(row["warm_compile_s"]) == 2

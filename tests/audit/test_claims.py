"""What a train record claims, checked without a workflow run (the forgeries on a tree the workflow built:
tests/workflow/forged_claims.py): device names as tinygrad reads them, a re-executed segment judged on every tensor of
its state (bit-exact on the CPU while the record names a GPU proves the record false; an honest GPU record lies in the
band), the record's machine against its provenance's, a NaN in the final weights, the config of another run of the
same basedir, and a GPU record's re-execution on this machine's CPU devices."""
import json, os, subprocess, sys

import numpy as np
import pytest

from mlperf_bert.audit.claims import Confirmed, _finite_rows, _machine_rows
from mlperf_bert.audit.runs import run_config
from mlperf_bert.audit.segments import SEGMENT_BAND, Segment, judge
from mlperf_bert.machine import device_kind
from mlperf_bert.train.resume import on_kind
from mlperf_bert.train.segment import compare_states

HERE = {"host": "box", "cpu": "AMD EPYC", "flags": "avx2", "cores": 2, "cpus": 2}


def seg(dev="CPU", gpus=1, beam=0) -> Segment:
  return Segment(None, "results/cpu/result_bert_0.log", None, 0, 20, (0.0, 1e4), dict(HERE),
                 {"DEV": dev, "GPUS": gpus, "BEAM": beam, "BS": 8, "SEED": 0})


def state(scale=1.0) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(0)
  return {"model/w": rng.standard_normal(50).astype(np.float32) * scale,
          "optim/opt0.m.0": rng.standard_normal(50).astype(np.float32) * 1e-3 * scale,
          "optim/opt0.v.0": rng.random(50).astype(np.float32) * 1e-6 * scale,
          "optim/opt0.lr": np.array([1e-2], np.float32), "optim/schedule.step": np.array([20], np.int32),
          "rng/NV": np.array([7, 0], np.uint32)}


def test_device_names_are_read_as_tinygrad_reads_them():
  assert [device_kind(d) for d in ("cpu", "CPU:1", "NV:0", "nv", "NULL:CUDA:sm_89", None)] == \
    ["CPU", "CPU", "NV", "NV", "NULL", ""]
  assert on_kind("NV|NV:1", "CPU") == "CPU|CPU:1" and on_kind("NV", "CPU") == "CPU" and on_kind("NV:2", None) == "NV:2"


def test_every_tensor_of_a_state_is_compared():
  """On another device kind: the RNG counters renamed to this kind's and compared, the LAMB moments in the band, the
  schedule step and RNG counters equal; a NaN anywhere named."""
  want = state()
  got = {("rng/CPU" if k == "rng/NV" else k): v.copy() for k, v in want.items()}
  same = compare_states(got, want, rng_kind="CPU")
  assert same["differ"] == 0 and same["tensors"] == 6 and same["n_exact"] == 0
  got["rng/CPU"] = np.array([12345, 0], np.uint32)
  got["optim/opt0.m.0"] = got["optim/opt0.m.0"] * 1.01
  d = compare_states(got, want, rng_kind="CPU")
  assert d["exact"] == ["rng/CPU"] and d["moments_rel_l2"]["m"] == pytest.approx(0.01, rel=1e-3)
  assert d["weights_rel_l2"] == 0.0 and d["moments_rel_l2"]["v"] == 0.0
  got["optim/opt0.v.0"] = np.full(50, np.nan, np.float32)
  assert compare_states(got, want, rng_kind="CPU")["nonfinite"] == ["optim/opt0.v.0"]


def _cmp(**over) -> dict:
  base = {"position": 160, "want_position": 160, "differ": 0, "tensors": 98, "n_missing": 0, "missing": [],
          "worst": None, "weights_rel_l2": 0.0, "moments_rel_l2": {"m": 0.0, "v": 0.0}, "scalars_rel": 0.0,
          "exact": [], "n_exact": 0, "nonfinite": [], "n_nonfinite": 0}
  return {**base, **over}


def test_judging_a_segment_of_a_gpu_record_on_the_cpu():
  """An honest GPU record: its weights and moments a little off on the CPU, in the band: PASS. The same segment
  bit-exact on the CPU: the record's device is false. Moments out of the band, a count that differs, a NaN: FAIL."""
  honest = _cmp(differ=90, worst={"name": "model/x", "rel": 1e-6}, weights_rel_l2=2.3e-8,
                moments_rel_l2={"m": 9.2e-8, "v": 8.4e-8})
  status, why = judge(seg("NV"), {"device": "CPU", "devices": 1}, honest)
  assert status == "PASS" and why.startswith("every tensor within the band: the weights 2.3e-08, the LAMB moments "
                                             "9.2e-08 and 8.4e-08"), why
  status, why = judge(seg("nv:0"), {"device": "CPU", "devices": 1}, _cmp())
  assert status == "FAIL" and "bit-exact (98 of 98 tensors) on CPU, while the train record says the run trained on " \
    "1 NV device(s)" in why and why.endswith("the record's device is false"), why
  assert judge(seg("cpu"), {"device": "CPU", "devices": 1}, _cmp()) == ("PASS", "bit-exact")  # "cpu" is the CPU
  status, why = judge(seg("NV"), {"device": "CPU"}, dict(honest, moments_rel_l2={"m": 10 * SEGMENT_BAND, "v": 0.0}))
  assert status == "FAIL" and why.startswith("the LAMB first moments are 0.01 of their size away"), why
  status, why = judge(seg("NV"), {"device": "CPU"}, dict(honest, n_exact=1, exact=["rng/CPU"]))
  assert status == "FAIL" and "1 tensor(s) that every device computes alike differ" in why, why
  status, why = judge(seg("NV"), {"device": "CPU"}, dict(honest, n_nonfinite=1, nonfinite=["optim/opt0.m.0"]))
  assert status == "FAIL" and "hold a NaN or an infinity (optim/opt0.m.0)" in why


def test_the_records_machine_against_its_provenance():
  """The record names its provenance's host: its cores are held to that host's CPUs (a claim of more FAILs, and the
  time floor uses the host's); another host than the provenance's and this one's: taken on trust, said so."""
  prov = {"host": {"hostname": "box", "cpu": "AMD EPYC", "cpu_flags": "avx2", "cpu_count": 2}}
  conf = Confirmed()
  rows = _machine_rows({"machine": dict(HERE, cores=64)}, prov, dict(HERE, host="auditor"), conf)
  assert [s for s, _ in rows] == ["FAIL"] and "says 64 cores on host box; its provenance, written on box, says it has " \
    "2 CPUs: the CPU time floor divides by 2, not 64" in rows[0][1] and conf.cores == 2
  rows = _machine_rows({"machine": dict(HERE, cpu="Intel Xeon")}, prov, dict(HERE, host="auditor"), Confirmed())
  assert [s for s, _ in rows] == ["FAIL"] and "CPU 'Intel Xeon'" in rows[0][1]
  assert _machine_rows({"machine": HERE}, prov, dict(HERE, host="auditor"), Confirmed()) == []
  conf = Confirmed()
  rows = _machine_rows({"machine": dict(HERE, host="elsewhere")}, prov, dict(HERE, host="auditor"), conf)
  assert [s for s, _ in rows] == ["WARN"] and "taken on trust" in rows[0][1] and conf.trust


def test_nan_in_the_final_weights_fails(tmp_path):
  from safetensors.numpy import save_file
  w = tmp_path / "result_bert_0.final.safetensors"
  save_file({"a": np.ones(3, np.float32), "b": np.array([1.0, np.inf], np.float32)}, str(w))
  rec = {"final_weights": {"path": w.name, "bytes": w.stat().st_size}}
  rows = _finite_rows(tmp_path / "result_bert_0.train.json", rec)
  assert len(rows) == 1 and "hold a NaN or an infinity (b)" in rows[0][1]
  rec["final_weights"]["bytes"] += 1  # another size: not read (the re-execution's rows name it)
  assert _finite_rows(tmp_path / "result_bert_0.train.json", rec) == []


def test_another_runs_config(tmp_path):
  """The configured run is compared with the config as given; another run's platform and rehearse come from its
  folder and its own keys (train, seeds, ...) from its provenance record, the rest from the config."""
  now = {"platform": "cpu", "train": {"TRAIN_STEPS": 40}, "seeds": [0, 1], "preprocessing": {"dupe_factor": 10}}
  log = tmp_path / "results/tinybox_green-rehearsal/result_bert_0.log"
  log.parent.mkdir(parents=True)
  log.with_name("result_bert_0.provenance.json").write_text(json.dumps({"config": {
    "platform": "tinybox_green", "rehearse": True, "train": {"EVAL_STEP_FREQ": 4}, "seeds": [0],
    "preprocessing": {"dupe_factor": 99}}}))
  assert run_config(now, log, other=False) == (now, "")
  cfg, note = run_config(now, log, other=True)
  assert cfg == {"platform": "tinybox_green", "rehearse": True, "train": {"EVAL_STEP_FREQ": 4}, "seeds": [0],
                 "preprocessing": {"dupe_factor": 10}}
  assert "its own keys from its provenance record, taken on trust (train {'EVAL_STEP_FREQ': 4}, seeds [0])" in note


def test_a_gpu_record_opens_cpu_devices_of_its_count():
  """The audit's worker of a record with DEV NV on a machine without one: the exported DEV=NV no longer holds the
  tensors made without a device; it opens the record's count of CPU devices (tinygrad makes CPU:0..n-1 anywhere)."""
  code = ("import os; os.environ['DEV'] = 'NV'\n"
          "from mlperf_bert.train.evidence import open_devices\n"
          "from tinygrad import Tensor, Device\n"
          "devs = open_devices('NV', 2)\n"
          "print(devs, Device.DEFAULT, (Tensor([1, 2]) + 1).tolist())\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "DEV": "NV"})
  assert out.returncode == 0, out.stderr
  assert out.stdout.split("\n")[0] == "('CPU', 'CPU:1') CPU [2, 3]", out.stdout

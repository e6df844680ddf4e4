"""mlperf_bert/train/cost/: the time to train (totrain.py), the INIT phase (init.py), the picture of a step's queues
(picture.py), their place in the dress's answer (answer.py) and bench/device_check.py's prediction lines. Reads JSON,
mlperf-logging's RCP files and tinycorp's published logs (the v4.1 fixture); seconds."""
from __future__ import annotations
import importlib.util, json, math, statistics, sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from mlperf_bert.train.cost import totrain
from mlperf_bert.train.cost.answer import add_time_to_train, cost_lines
from mlperf_bert.train.cost.events import Event
from mlperf_bert.constants import INIT_LIMIT_MIN
from mlperf_bert.train.cost.init import BeamSettings
from mlperf_bert.train.cost.picture import answer_svg, draw_events
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.constants import platform_path

REPO = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
# what tinycorp's v5.0 logs measured (resources/published/, docs/dress.md): the train step medians and an eval's wall
# over its batches (eval_s / ceil(10,000 / 96) batches), plugged in where the step-time model's prediction goes
MEASURED = {"tinybox_green": (380.6, 9.52 / 105 * 1e3), "tinybox_red": (547.0, 16.55 / 105 * 1e3),
            "tinybox_8xMI300X": (1916.7, 4.63 / 10 * 1e3)}


def _rcp_record(bs: int) -> dict:
  from mlperf_logging.rcp_checker import rcp_checker
  path = Path(rcp_checker.__file__).parent / "training_5.0.0" / "rcps_bert.json"
  return next(r for r in json.loads(path.read_text()).values() if r["BS"] == bs)


def _olympic(xs) -> float:
  return float(np.mean(sorted(xs)[1:-1]))


def test_rcp_at_a_batch_below_the_smallest_is_the_smallest_pruned_record():
  # BS 96: no RCP below it; the rcp_checker (pruned RCPs) takes its smallest record, BS 448 (256 is pruned: 448
  # converges in fewer samples, and the pruning drops every record of a smaller batch than the fastest)
  mean, sd, how = totrain.rcp_samples(96)
  rec = _rcp_record(448)["Epochs to converge"]
  assert mean == pytest.approx(_olympic(rec)) and sd == pytest.approx(np.std(rec)) and "BS 448" in how


def test_rcp_between_two_records_is_on_their_line():
  mean, _, how = totrain.rcp_samples(1024)
  lo, hi = _olympic(_rcp_record(448)["Epochs to converge"]), _olympic(_rcp_record(4608)["Epochs to converge"])
  assert mean == pytest.approx(np.interp(1024, [448, 4608], [lo, hi])) and "interpolated" in how


def test_steps_are_the_rcp_times_the_other_systems_convergence_and_never_below_it():
  pub = json.loads(totrain.STEPS_FILE.read_text())["systems"]
  samples = lambda n: [r["steps_to_target"] * pub[n]["global_batch_size"] for r in pub[n]["runs"] if r["steps_to_target"]]
  rcp96 = _olympic(_rcp_record(448)["Epochs to converge"])
  rcp1024 = float(np.interp(1024, [448, 4608], [rcp96, _olympic(_rcp_record(4608)["Epochs to converge"])]))
  red, mi, green = _olympic(samples("tinybox_red")) / rcp96, _olympic(samples("tinybox_8xMI300X")) / rcp1024, \
    _olympic(samples("tinybox_green")) / rcp96
  st = totrain.steps_to_target("tinybox_green", 96, 1562)
  assert st.steps == pytest.approx((red + mi) / 2 * rcp96 / 96)         # red's and MI300X's runs, never green's own
  assert st.own_steps == pub["tinybox_green"]["steps_to_target"]
  assert st.rcp_steps == 17 * 1562 and st.steps > st.rcp_steps and st.low < st.steps < st.high
  m = totrain.steps_to_target("tinybox_8xMI300X", 1024, 146)             # another batch: green's and red's factors
  assert m.steps == pytest.approx((green + red) / 2 * rcp1024 / 1024) and m.rcp_steps % 146 == 0
  assert totrain.convergence_factors("none").keys() == pub.keys()
  assert all(1.2 < f < 1.4 for f, _ in totrain.convergence_factors("none").values())   # slower than the reference


def test_time_to_train_adds_steps_evals_and_warm_up():
  t = totrain.time_to_train(100.0, 50.0, 1200, eval_step_freq=600, eval_batches=10, warmup_s=60.0)
  assert t["steps_min"] == pytest.approx(2.0) and t["evals"] == 2 and t["evals_min"] == pytest.approx(2 * 10 * 0.05 / 60)
  assert t["minutes"] == pytest.approx(2.0 + 1.0 + 1 / 60)
  assert totrain.batches_an_eval(96) == 105 and totrain.batches_an_eval(1024) == 10


def test_warm_up_is_the_other_systems_median():
  oh = json.loads(totrain.OVERHEADS_FILE.read_text())["systems"]
  w = totrain.warmup("tinybox_green")
  assert w.seconds == pytest.approx(statistics.median([oh["tinybox_red"]["warmup_s"], oh["tinybox_8xMI300X"]["warmup_s"]]))
  assert totrain.warmup("dev_1gpu").seconds == pytest.approx(statistics.median(v["warmup_s"] for v in oh.values()))


@pytest.mark.parametrize("platform", ["tinybox_green", "tinybox_red", "tinybox_8xMI300X"])
def test_measured_steps_give_the_official_v50_score_within_15_percent(platform):
  """What the time-to-train part adds on its own: tinycorp's measured steps plugged in for the prediction."""
  gbs = 1024 if platform == "tinybox_8xMI300X" else 96
  freq = resolve(load_platform(platform_path(REPO, platform)), {"BS": gbs, "EVAL_BS": gbs}).eval.step_freq
  step, ev = MEASURED[platform]
  r = totrain.predict(platform, gbs, gbs, freq, (step, step, step), (ev, ev, ev))
  assert abs(r["error_vs_official"]) < 0.15, r
  # the band holds the seeds, not how the batch moves the convergence: MI300X's factor at BS 1024 (1.325) is above
  # green's and red's at 96 (1.250, 1.258), and its score lies 0.8 min above the band (docs/dress.md)
  if gbs == 96: assert r["low_minutes"] < r["official_v50_min"] < r["high_minutes"], r
  assert r["minutes"] == pytest.approx(sum(r["parts_min"].values()), abs=0.2)


def _answer(step: bool) -> dict:
  a = {"platform": "tinybox_red", "devices": 6, "target": "AMDLLVM:gfx1100", "batch_size": 96, "eval_batch_size": 96,
       "train": {"programs": 490}, "eval": {"programs": 52}, "cost": {},
       # the INIT depth's call records: a gemm on all six devices and the ring's add once a device
       "measurements": [{"layers": 2, "devices": [f"NV:{i}" for i in range(6)],
                         "train": {"seconds": [30.0, 1.0, 1.0], "calls": [
                           {"k": "kernel", "name": "r_96_16", "devices": [f"NV:{i}" for i in range(6)], "flops": 10 ** 11,
                            "bytes": 10 ** 8, "global": [60, 32], "local": [128], "tc": "float"}] + [
                           {"k": "kernel", "name": "E_40696_32_4", "devices": [f"NV:{i}"], "flops": 0, "bytes": 3 * 10 ** 7,
                            "global": [40696], "local": [32], "tc": None} for i in range(6)]},
                         "eval": {"seconds": [10.0, 1.0, 1.0], "calls": []}}]}
  if step:
    a["cost"] = {"step": {"ms": 547.0, "low_ms": 500.0, "high_ms": 600.0, "critical_path": "compute",
                          "breakdown_ms": {"matmul": 300.0, "other": 150.0, "copies": 40.0, "allreduce": 40.0, "launch_host": 17.0}},
                 "eval_step": {"ms": 157.6, "low_ms": 150.0, "high_ms": 170.0},
                 "events": [{"device": "0", "queue": "compute", "start_ms": 0.0, "end_ms": 2.0, "kind": "matmul", "name": "r_1"}]}
  return a


def test_the_answer_gets_time_to_train_and_init_only_with_a_predicted_step():
  bare = _answer(False)
  assert add_time_to_train(bare, 1562, beam=BeamSettings(5, 5.0)) is False and bare["cost"] == {} and cost_lines(bare) == []
  a = _answer(True)
  assert add_time_to_train(a, 1562, beam=BeamSettings(5, 5.0)) is True
  t, i = a["cost"]["time_to_train"], a["cost"]["init"]
  assert t["official_v50_min"] == 300.51 and t["low_minutes"] < t["minutes"] < t["high_minutes"]
  # 0.14 keys a search by device: the gemm once, the ring's add six times
  assert i["searches"] == 7 and i["searches_by_kind"] == {"all-reduce": 6, "matmul": 1, "other": 0} and i["layers"] == 2
  assert i["within_limit"] is True and i["low_minutes"] <= i["minutes"] <= i["high_minutes"]
  assert i["outside_min"] == pytest.approx(44 / 60, abs=0.05)
  text = "\n".join(cost_lines(a))
  assert "official v5.0 score 300.51 min" in text and "7 BEAM 5 searches" in text and "within MLPerf's 30-min limit" in text
  assert "300.0" not in text and "critical" not in text   # the step and its breakdown are the dress table's own lines


def test_the_picture_draws_each_device_s_two_queues():
  ev = [Event(str(d), "compute", 0.1 * k, 0.1 * k + 0.09, "matmul" if k % 2 else "other", f"k{k}") for d in range(2) for k in range(4)]
  ev += [Event("0", "copy", 0.2, 0.3, "allreduce", "ring"), Event("host", "host", 0.0, 0.05, "host", "python")]
  root = ET.fromstring(draw_events(ev, title="two devices"))
  labels = [t.text for t in root.iter(f"{SVG}text")]
  assert {"device 0 compute", "device 0 copy", "device 1 compute", "device 1 copy", "host"} <= set(labels)
  bars = [r for r in root.iter(f"{SVG}rect") if r.get("class")]
  assert len(bars) == len(ev) and {b.get("class") for b in bars} == {"matmul", "other", "allreduce", "host"}
  # a thousand kernels of one kind a microsecond apart on a 100 ms step are one bar, its tooltip counts them
  many = [Event("0", "compute", i * 0.001, i * 0.001 + 0.0005, "other", f"k{i}") for i in range(1000)]
  root = ET.fromstring(draw_events(many + [Event("0", "compute", 99.0, 100.0, "matmul", "last")]))
  bars = [r for r in root.iter(f"{SVG}rect") if r.get("class")]
  assert len(bars) == 2 and "999 more, mostly other" in bars[0].find(f"{SVG}title").text
  # kernels of alternating kinds, each narrower than a pixel, are one bar a pixel at most, of the kind that ran longest
  mixed = [Event("0", "compute", i * 0.01, i * 0.01 + (0.009 if i % 3 else 0.001), "matmul" if i % 3 else "other", f"m{i}")
           for i in range(10000)]
  bars = [r for r in ET.fromstring(draw_events(mixed)).iter(f"{SVG}rect") if r.get("class")]
  assert len(bars) <= 1000 and {b.get("class") for b in bars} == {"matmul"}
  with pytest.raises(ValueError, match="kind"):
    draw_events([Event("0", "compute", 0, 1, "gemm", "x")])


def test_the_answer_s_picture_or_its_note():
  a = _answer(True)
  a["cost"]["events_layers"] = 4
  root = ET.fromstring(answer_svg(a))
  assert "at 4 layers" in next(root.iter(f"{SVG}text")).text and any(r.get("class") == "matmul" for r in root.iter(f"{SVG}rect"))
  assert "holds no step timeline" in answer_svg(_answer(False))


def test_the_recorder_reads_init_warm_up_and_evals_from_a_published_log():
  spec = importlib.util.spec_from_file_location("rpo", REPO / "tools" / "record_published_overheads.py")
  rpo = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(rpo)
  log = REPO / "tests/fixtures/tinycorp-v4.1/results/tinybox_green/bert/result_0.txt"
  ev = rpo.events(log)
  t = lambda k: next(e["time_ms"] for e in ev if e["key"] == k)
  r = rpo.run_figures(log)
  assert r["init_s"] == pytest.approx((t("init_stop") - t("init_start")) / 1e3, abs=0.1)
  assert 0 < r["warmup_s"] < (next(e["time_ms"] for e in ev if e["key"] == "eval_start") - t("run_start")) / 1e3 + 60
  assert r["eval_s"] > 0 and r["evals"] == sum(e["key"] == "eval_start" for e in ev)


def _device_check():
  spec = importlib.util.spec_from_file_location("device_check", REPO / "bench" / "device_check.py")
  dc = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(dc)
  return dc


def test_device_check_prints_the_dress_prediction_beside_the_measurement(tmp_path):
  dc = _device_check()
  f = tmp_path / "d.json"
  a = _answer(True)
  add_time_to_train(a, 1562, beam=BeamSettings(5, 5.0))
  f.write_text(json.dumps({**a, "roofline_ms": 170.0}))
  pred = dc.read_dress(f)
  assert pred["step_ms"] == 547.0 and pred["step_source"] == "the step-time model"
  lines = dc.prediction_lines(pred, {"GPUS": 6, "BS": 96}, 560.0, 60.0 * 40)
  assert any("measured / predicted 1.024" in l for l in lines) and any("INIT phase" in l for l in lines)
  assert not any(l.startswith("warning") for l in lines)
  assert dc.prediction_lines(pred, {"GPUS": 1, "BS": 11}, 560.0, 1.0)[0].startswith("warning")
  f.write_text(json.dumps({**_answer(False), "roofline_ms": 170.0}))   # no step model: the roofline floor
  assert dc.read_dress(f)["step_source"].startswith("the roofline floor")

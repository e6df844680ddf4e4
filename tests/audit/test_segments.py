"""audit/segments.py and audit/times.py without training: which eval states a run keeps, how a re-executed segment's
comparison is judged (bit-exact on the run's devices, a band on another kind), and the time floors: a record's CPU
seconds below what a step takes here, runs on one host whose logged windows hold more CPU seconds than its cores
give, the roofline of a GPU card, and what is said to be taken on trust. (Segments trained again, and forged trees:
tests/workflow/test_end_to_end.py.)"""
import json

import numpy as np
import pytest
from tiny_shards import tiny_instances

from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.segments import SEGMENT_BAND, Segment, judge, kept_wanted, steady_cpu
from mlperf_bert.audit.times import TIME_BAND, check_times, windows
from mlperf_bert.train.segment import compare_states
from mlperf_bert.train.record import FIRST_RECORD_SCHEMA, RECORD_SCHEMA

HERE = {"host": "box", "cpu": "AMD EPYC", "flags": "avx2", "cores": 2}
HP = {"DEV": "CPU", "GPUS": 1, "BS": 8, "SEED": 0}


def seg(log="results/cpu/result_bert_0.log", start=0, end=20, t=(0.0, 10_000.0), machine=HERE, hp=HP,
        recorded=0.4, here=None) -> Segment:
  return Segment(None, log, None, start, end, t, dict(machine), dict(hp), recorded, here)


def rows(segments, here=HERE):
  a = Audit("base", "basedir", "5.0.0")
  check_times(a, None, segments, here)
  return {r.subject: (r.status, r.reason) for r in a.rows}


def test_kept_states_are_every_nth_eval_and_the_last():
  assert kept_wanted([20, 40, 60, 80, 100], 1) == [20, 40, 60, 80, 100]
  assert kept_wanted([20, 40, 60, 80, 100], 2) == [40, 80, 100]
  assert kept_wanted([20, 40, 45], 5) == [45]
  assert kept_wanted([20, 40], 0) == [] and kept_wanted([], 1) == []


def test_steady_cpu_is_the_least_step_after_the_first_two():
  steps = [{"cpu_s": 9.0}, {"cpu_s": 4.0}, {"cpu_s": 0.5}, {"cpu_s": 0.37}, {"cpu_s": 0.41}]
  assert steady_cpu(steps) == 0.37 and steady_cpu(steps[:2]) is None


def test_state_comparison_names_the_worst_tensor():
  want = {"model/a": np.ones(4, np.float32), "optim/m": np.zeros(2, np.float32), "rng/CPU": np.array([5, 0], np.uint32)}
  got = {k: v.copy() for k, v in want.items()}
  same = compare_states(got, want, rng=True)
  assert same["differ"] == 0 and same["weights_rel_l2"] == 0.0 and same["tensors"] == 3
  got["model/a"][1] = 1.5
  got["rng/CPU"][0] = 6
  d = compare_states(got, want, rng=True)
  assert d["differ"] == 2 and d["worst_weight"]["name"] == "model/a"
  assert d["weights_rel_l2"] == pytest.approx(0.25)  # |(0, .5, 0, 0)| / |(1, 1, 1, 1)|
  assert compare_states(got, want, rng=False)["differ"] == 1  # another device: its RNG counters are not compared


def test_judging_a_re_executed_segment():
  cmp = {"position": 160, "want_position": 160, "differ": 0, "tensors": 98, "n_missing": 0, "missing": [],
         "worst": None, "weights_rel_l2": 0.0}
  s = seg()
  assert judge(s, {"device": "CPU"}, cmp) == ("PASS", "bit-exact")
  bad = dict(cmp, differ=90, worst={"name": "model/x", "rel": 0.3}, weights_rel_l2=0.1)
  status, why = judge(s, {"device": "CPU"}, bad)
  assert status == "FAIL" and "90 of 98 tensors differ from the kept state of step 20" in why
  status, why = judge(s, {"device": "CPU"}, dict(cmp, position=320))
  assert status == "FAIL" and "at sample 320, the kept state says 160" in why
  # several devices, a segment after an eval: bit-exact too (the steps are captured on their first call), so a drift
  # of a thousandth fails there as on one device
  drift = dict(bad, weights_rel_l2=1.2e-3)
  assert judge(seg(start=8, end=12, hp=dict(HP, GPUS=2)), {"device": "CPU"}, drift)[0] == "FAIL"
  assert judge(seg(start=8, end=12), {"device": "CPU"}, drift)[0] == "FAIL"
  # another device kind (the same count): a band on the weights' distance
  assert judge(s, {"device": "NV"}, dict(bad, weights_rel_l2=SEGMENT_BAND / 2))[0] == "PASS"
  assert judge(s, {"device": "NV"}, bad)[0] == "FAIL"


def test_windows_hold_every_segment_inside_them():
  items = [(0, 10, 3.0, "a"), (5, 12, 4.0, "b"), (20, 30, 1.0, "c")]
  got = {(a, b): (f, sorted(i[3] for i in inside)) for a, b, f, inside in windows(items)}
  assert got[(0, 12)] == (7.0, ["a", "b"]) and got[(0, 10)] == (3.0, ["a"]) and got[(20, 30)] == (1.0, ["c"])
  assert got[(0, 30)] == (8.0, ["a", "b", "c"]) and (12, 10) not in got


def test_runs_logged_at_once_on_one_host_share_its_cores():
  """Two runs' steps 0-20 logged in the same 5 s on one 2-core host: each alone fits (20 x 0.4 CPU s over 2 cores is
  4 s), both together need 8 s: FAIL for both, naming the window. 10 s apart, both PASS."""
  a = seg(t=(0.0, 5000.0), here=0.37)
  b = seg("results/cpu/result_bert_1.log", t=(100.0, 5100.0))
  r = rows([a, b])
  assert [v[0] for v in r.values()] == ["FAIL", "FAIL"], r
  assert "result_bert_0.log steps 0-20, result_bert_1.log steps 0-20 logged in 5.1 s on box: their steps take 16.0 CPU " \
         "s, which 2 cores give in no less than 8.0 s: the log trains faster than its hardware can" in r[a.rel][1]
  b.claimed = (10_000.0, 15_000.0)
  r = rows([a, b])
  assert [v[0] for v in r.values()] == ["PASS", "PASS"], r
  assert "the tightest: result_bert_0.log steps 0-20 logged in 5.0 s on box: their steps take 8.0 CPU s" in r[a.rel][1]


def test_recorded_cpu_seconds_below_what_a_step_takes_here_fail():
  """A record whose CPU seconds were scaled down with its times: re-executed here a step takes at least 0.37 CPU s;
  0.4 x 0.37 is below 0.37 / TIME_BAND. A record of another machine kind is not checked so: taken on trust."""
  forged = seg(recorded=0.4 * 0.37, t=(0.0, 60_000.0), here=0.37)
  r = rows([forged])
  assert r[forged.rel][0] == "FAIL" and "the train record says they took 3.0 CPU s (0.148 a step); re-executed on " \
    "this machine, of the run's kind, a step takes at least 0.370 CPU s" in r[forged.rel][1], r
  assert 0.37 / TIME_BAND > 0.4 * 0.37 * 1.5  # the forged figure is far below the band, not at its edge
  other = dict(HERE, cpu="Intel Xeon")
  r = rows([seg(recorded=0.4 * 0.37, t=(0.0, 60_000.0), machine=other, here=None), seg("x.log", here=0.37)])
  assert r["results/cpu/result_bert_0.log"][0] == "PASS"
  assert "the CPU seconds it recorded are taken on trust (Intel Xeon, 2 cores (box) is not of this machine's kind" \
    in r["results/cpu/result_bert_0.log"][1]


def test_nothing_to_bound_the_time_is_said():
  r = rows([seg(recorded=None)])
  assert r["results/cpu/result_bert_0.log"] == ("WARN", "time taken on trust: no floor bounds its steps' time (no CPU "
                                                "seconds on record, no GPU card with published peaks for None)")


def test_a_gpu_run_faster_than_its_roofline_fails(tmp_path):
  """A tinybox_green-like run (6 RTX 4090, BERT-large width, BS 90, sequence 128, 20 predictions): its steps'
  matmuls at the card's peak bound each segment's logged time from below, on any machine."""
  from mlperf_bert.data.shards import write_shard
  from mlperf_bert.train.dress.report import CARDS, step_flops
  write_shard(tmp_path / "eval.shard", tiny_instances(4, 1, np.random.default_rng(0)), max_seq_length=128,
              max_predictions_per_seq=20, eval_set=True)
  (tmp_path / "bert_config.json").write_text(json.dumps({"hidden_size": 1024, "intermediate_size": 4096,
                                                         "num_hidden_layers": 24, "vocab_size": 30522}))
  rec = tmp_path / "result_bert_0.train.json"
  rec.write_text(json.dumps({"bert_config": {"path": "bert_config.json"}, "eval_set": {"path": "eval.shard"}}))
  hp = {"DEV": "NV", "GPUS": 6, "BS": 90, "SEED": 0}
  m = dict(HERE, gpu_target="CUDA:sm_89")
  cfg = type("C", (), {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "vocab_size": 30522})
  floor = 1000 * 1000 * step_flops(cfg, 90, 128, 20) / (6 * CARDS["CUDA:sm_89"].tflops * 1e12)  # ms, 1000 steps
  s = seg(start=0, end=1000, t=(0.0, 0.5 * floor), machine=m, hp=hp, recorded=None)
  s.record = rec
  r = rows([s])
  assert r[s.rel][0] == "FAIL" and "at RTX 4090's published peak (6 of them) those 1000 steps' matmuls alone take" \
    in r[s.rel][1], r
  s.claimed = (0.0, 2 * floor)
  r = rows([s])
  assert r[s.rel][0] == "PASS" and "above the roofline its step time is taken on trust" in r[s.rel][1], r


def _tree(tmp_path, evals=(20, 40), kept=(20, 40), every=1, first_form=False):
  """A basedir with a log of evals at `evals`, its train record keeping states of `kept` and final weights equal to
  the last state's model (tiny tensors: nothing here trains); `first_form`: the record as trees trained before
  2026-12-03 hold it (schema /1, the settings under `hparams`)."""
  import hashlib
  from safetensors.numpy import save_file
  res = tmp_path / "base/results/cpu"
  (res / "result_bert_0.states").mkdir(parents=True)
  ev = [{"key": "run_start", "time_ms": 1000, "metadata": {}}]
  for s in evals:
    ev += [{"key": "eval_start", "time_ms": 1000 + 1000 * s, "metadata": {"step_num": s}},
           {"key": "eval_stop", "time_ms": 1500 + 1000 * s, "metadata": {"step_num": s}}]
  (res / "result_bert_0.log").write_text("".join(
    f':::MLLOG {json.dumps(dict(namespace="", event_type="POINT_IN_TIME", value=None, **e))}\n' for e in ev))
  states = []
  for s in kept:
    f = res / "result_bert_0.states" / f"state_{s:08d}.safetensors"
    save_file({"model/w": np.full(3, s, np.float32), "optim/m": np.zeros(3, np.float32)}, str(f),
              metadata={"step": str(s), "position": str(8 * s)})
    states.append({"step": s, "position": 8 * s, "file": f.name, "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
                   "cpu_s": 0.4 * 20, "cpu_steps": 20})
  save_file({"w": np.full(3, kept[-1] if kept else 0, np.float32)}, str(res / "result_bert_0.final.safetensors"))
  (res / "result_bert_0.train.json").write_text(json.dumps({
    **({"schema": FIRST_RECORD_SCHEMA, "hparams": HP} if first_form else {"schema": RECORD_SCHEMA, "settings": HP}), "machine": HERE,
    "final_weights": {"path": "result_bert_0.final.safetensors"},
    "kept_states": {"path": "result_bert_0.states", "every": every, "states": states}}))
  return tmp_path / "base", res / "result_bert_0.log"


def _plan(base, log):
  from mlperf_bert.audit.provenance import hashes
  from mlperf_bert.audit.segments import plan_log
  a = Audit(str(base), "basedir", "5.0.0")
  return plan_log(a, base, log, hashes), [(r.status, r.reason) for r in a.rows]


def test_a_record_of_the_first_form_is_read_as_the_current_one(tmp_path):
  """A tree trained before the record named its settings `settings` (schema /1, `hparams`) is audited as one trained
  after: the same segments, with the same settings."""
  new, old = _plan(*_tree(tmp_path / "new")), _plan(*_tree(tmp_path / "old", first_form=True))
  assert old[1] == new[1] == [] and [s.settings for s in old[0]] == [s.settings for s in new[0]] == [HP, HP]
  assert [(s.start, s.end) for s in old[0]] == [(0, 20), (20, 40)]


def test_kept_states_are_checked_before_anything_is_trained(tmp_path):
  """The segments of a tree whose states agree with its log and records; then what fails without training: an eval
  whose state is missing from the record (a state dropped), a state file rewritten, final weights that are not the
  last state's, states named outside the tree."""
  base, log = _tree(tmp_path / "ok")
  segs, rows_ = _plan(base, log)
  assert rows_ == [] and [(s.start, s.end, s.claimed, s.cpu_recorded) for s in segs] == \
    [(0, 20, (1000, 21000), 0.4), (20, 40, (21500, 41000), 0.4)]
  _, rows_ = _plan(*_tree(tmp_path / "dropped", kept=(40,)))
  assert rows_[0][0] == "FAIL" and "the log's evals at steps [20, 40] keep the states of steps [20, 40] " \
    "(EVIDENCE_STATE_FREQ 1), result_bert_0.train.json has [40]" in rows_[0][1], rows_
  assert _plan(*_tree(tmp_path / "every2", kept=(40,), every=2))[1] == []
  base, log = _tree(tmp_path / "rewritten")
  f = log.with_name("result_bert_0.states") / "state_00000020.safetensors"
  f.write_bytes(f.read_bytes()[:-1] + bytes([f.read_bytes()[-1] ^ 1]))
  _, rows_ = _plan(base, log)
  assert rows_[0][0] == "FAIL" and "state_00000020.safetensors: sha256 is not the one the train process wrote" \
    in rows_[0][1], rows_
  base, log = _tree(tmp_path / "final")
  from safetensors.numpy import save_file
  save_file({"w": np.full(3, 99, np.float32)}, str(log.with_name("result_bert_0.final.safetensors")))
  _, rows_ = _plan(base, log)
  assert rows_[0][0] == "FAIL" and "are not the kept state of step 40, the last eval's: w differs" in rows_[0][1]
  base, log = _tree(tmp_path / "outside")
  rp = log.with_name("result_bert_0.train.json")
  rec = json.loads(rp.read_text())
  rec["kept_states"]["path"] = "../../../../etc"
  rp.write_text(json.dumps(rec))
  _, rows_ = _plan(base, log)
  assert rows_[0][0] == "FAIL" and "its kept states are named outside the tree" in rows_[0][1], rows_
  rec["kept_states"] = {"path": "x", "every": 0, "states": []}
  rp.write_text(json.dumps(rec))
  assert _plan(base, log)[1] == [("WARN", "no training states kept (EVIDENCE_STATE_FREQ 0): steps and time taken on "
                                           "trust")]

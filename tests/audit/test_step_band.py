"""GPU step times against the cost model's predicted band (train/cost/band.py): a workflow tree's GPU segments
(audit/times.py predicted_bound) and a received submission's logs when its system.json names tinycorp's boxes
(audit/step_band.py), on records and logs of each GPU platform: tinybox_green, tinybox_red, tinybox_8xMI300X.

Two kinds of band file: one written here (its numbers are this test's, so the checks' logic is tested whatever the
model predicts), and the repository's resources/predicted/steps.json, against which tinycorp's published logs must
PASS (MLCommons accepted them) and their times scaled by 0.5 must FAIL."""
import json, re, shutil

import numpy as np
import pytest
from tiny_shards import tiny_instances

from mlperf_bert.audit.claims import gpu_platform
from mlperf_bert.audit.logs import read_log
from mlperf_bert.audit.org import audit_submission
from mlperf_bert.audit.rows import Audit
from mlperf_bert.audit.segments import Segment
from mlperf_bert.audit.step_band import check_step_band, known_platform, log_step_ms
from mlperf_bert.audit.times import check_times
from mlperf_bert.constants import REPO, system_path
from mlperf_bert.errors import UserError
from mlperf_bert.train.cost.band import PREDICTED, step_band
from conftest import FIXTURES

V41, V50, V50_MORE = FIXTURES / "tinycorp-v4.1", FIXTURES / "mlcommons" / "v5.0" / "tinycorp", FIXTURES / "tinycorp-v5.0"
# (platform, GPU target, GPUs, the published logs of it: (org folder, system, global batch))
PLATFORMS = {"tinybox_green": ("CUDA:sm_89", 6, [(V41, 66), (V50, 96)]),
             "tinybox_red": ("AMDLLVM:gfx1100", 6, [(V41, 66), (V50_MORE, 96)]),
             "tinybox_8xMI300X": ("AMDLLVM:gfx942", 8, [(V50_MORE, 1024)])}
# this test's own band file: (platform, BS) -> (step, low, high) ms
TEST_BANDS = {("tinybox_green", 66): (300.0, 255.0, 360.0), ("tinybox_green", 96): (372.0, 316.0, 446.0),
              ("tinybox_red", 66): (420.0, 357.0, 504.0), ("tinybox_red", 96): (540.0, 459.0, 648.0),
              ("tinybox_8xMI300X", 1024): (1900.0, 1615.0, 2280.0)}
HERE = {"host": "box", "cpu": "AMD EPYC", "flags": "avx2", "cores": 2}


def write_bands(path, bands=TEST_BANDS, **top):
  preds = [{"platform": p, "target": PLATFORMS[p][0], "gpus": PLATFORMS[p][1], "global_bs": bs, "step_ms": s,
            "low_ms": lo, "high_ms": hi, "eval_bs": bs, "eval_step_ms": s / 3} for (p, bs), (s, lo, hi) in bands.items()]
  doc = {"schema": "mlperf-bert/step-predictions/1", "recorded_by": "tests/audit/test_step_band.py",
         "tinygrad": "0.14.0", "project_commit": "test", "band": {"low": 0.85, "high": 1.2, "why": "this test's"},
         "predictions": preds, **top}
  path.write_text(json.dumps(doc))
  return path


@pytest.fixture
def bands(tmp_path):
  return write_bands(tmp_path / "steps.json")


def test_step_band_reads_the_file_and_names_a_malformed_one(tmp_path, bands):
  b = step_band("tinybox_green", 96, bands)
  assert (b.platform, b.global_bs, b.step_ms, b.low_ms, b.high_ms) == ("tinybox_green", 96, 372.0, 316.0, 446.0)
  assert b.describe() == f"tinybox_green at BS 96 is predicted 372 ms (band 316-446 ms, {bands})"
  assert step_band("tinybox_green", 90, bands) is None and step_band("cpu", 8, bands) is None
  assert step_band("tinybox_green", 96, tmp_path / "none.json") is None
  bad = {"not JSON": "{", "no predictions": json.dumps({"schema": "mlperf-bert/step-predictions/1"})}
  for what, text in bad.items():
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(UserError) as e: step_band("tinybox_green", 96, tmp_path / "bad.json")
    assert str(tmp_path / "bad.json") in str(e.value) and "\n" not in str(e.value), what
  write_bands(tmp_path / "bad.json", {("tinybox_green", 96): (372.0, 400.0, 446.0)})
  with pytest.raises(UserError, match=r"predictions/0 \(tinybox_green at BS 96\): its band 400.0-446.0 ms does not hold"):
    step_band("tinybox_green", 96, tmp_path / "bad.json")
  doc = json.loads(bands.read_text()); doc["predictions"][0]["low_ms"] = "316"
  (tmp_path / "bad.json").write_text(json.dumps(doc))
  with pytest.raises(UserError, match=r"bad.json: not a step-predictions file .* at predictions/0/low_ms: '316' is not"):
    step_band("tinybox_green", 96, tmp_path / "bad.json")


# ------------------------------------------------------------------------------------------------ workflow trees
def gpu_segment(tmp_path, platform: str, bs: int, ms_a_step: float, steps: int = 1000) -> Segment:
  """A segment of a GPU train record of `platform` (BERT-large, sequence 128, 20 predictions; the record names its
  config and eval set, as the roofline reads them), `steps` steps logged at `ms_a_step`."""
  from mlperf_bert.data.shards import write_shard
  target, gpus, _ = PLATFORMS[platform]
  if not (tmp_path / "eval.shard").exists():
    write_shard(tmp_path / "eval.shard", tiny_instances(4, 1, np.random.default_rng(0)), max_seq_length=128,
                max_predictions_per_seq=20, eval_set=True)
    (tmp_path / "bert_config.json").write_text(json.dumps({"hidden_size": 1024, "intermediate_size": 4096,
                                                           "num_hidden_layers": 24, "vocab_size": 30522}))
    (tmp_path / "result_bert_0.train.json").write_text(json.dumps({"bert_config": {"path": "bert_config.json"},
                                                                   "eval_set": {"path": "eval.shard"}}))
  return Segment(None, f"results/{platform}/result_bert_0.log", tmp_path / "result_bert_0.train.json", 0, steps,
                 (0.0, steps * ms_a_step), dict(HERE, gpu_target=target),
                 {"DEV": "NV" if target.startswith("CUDA") else "AMD", "GPUS": gpus, "BS": bs, "SEED": 0},
                 platform=platform)


def time_row(seg, predicted) -> tuple[str, str]:
  a = Audit("base", "basedir", "5.0.0")
  check_times(a, None, [seg], HERE, predicted)
  [r] = a.rows
  return r.status, r.reason


@pytest.mark.parametrize("platform,bs", [("tinybox_green", 96), ("tinybox_red", 96), ("tinybox_8xMI300X", 1024)])
def test_a_gpu_segment_below_its_band_fails_inside_passes(tmp_path, bands, platform, bs):
  step, low, high = TEST_BANDS[(platform, bs)]
  status, why = time_row(gpu_segment(tmp_path, platform, bs, 0.95 * low), bands)   # above the roofline, below the band
  assert status == "FAIL", why
  assert re.search(rf"steps 0-1000 logged in [\d.]+ s, {0.95 * low:.1f} ms a step; {platform} at BS {bs} is predicted "
                   rf"{step:.0f} ms \(band {low:.0f}-{high:.0f} ms, {re.escape(str(bands))}\), so those 1000 steps no "
                   rf"less than {low:.1f} s: the log trains faster than its hardware can", why), why
  for ms in (1.01 * low, step, 3 * high):   # the high edge is no ceiling: a slow run is slow, not forged
    status, why = time_row(gpu_segment(tmp_path, platform, bs, ms), bands)
    assert status == "PASS" and f"held to the low edge of its predicted band ({platform} at BS {bs}" in why, why


def test_a_gpu_segment_without_a_prediction_is_held_to_the_roofline_only(tmp_path, bands):
  status, why = time_row(gpu_segment(tmp_path, "tinybox_green", 90, 200.0), bands)
  assert status == "PASS" and "steps.json holds no prediction for tinybox_green at BS 90: its step is held to the " \
    "roofline only" in why, why
  seg = gpu_segment(tmp_path, "tinybox_green", 96, 200.0)
  seg.platform = None   # claims.py did not confirm the platform
  status, why = time_row(seg, bands)
  assert status == "PASS" and "its platform is not confirmed" in why and "roofline only" in why, why
  status, why = time_row(gpu_segment(tmp_path, "tinybox_green", 96, 10.0), bands)   # under the roofline: it still FAILs
  assert status == "FAIL" and "(the roofline)" in why, why


def test_claims_confirm_a_gpu_records_platform():
  knobs, exp = {"DRESS_TARGET": "CUDA:sm_89"}, {"DEV": "NV", "GPUS": 6}
  rec = {"settings": {"DEV": "NV", "GPUS": 6}, "machine": {"gpu_target": "CUDA:sm_89"}}
  assert gpu_platform(rec, exp, knobs, "tinybox_green") == "tinybox_green"
  for edit in ({"settings": {"DEV": "NV", "GPUS": 2}}, {"settings": {"DEV": "CPU", "GPUS": 6}},
               {"machine": {"gpu_target": "AMDLLVM:gfx1100"}}, {"machine": {}}):
    assert gpu_platform({**rec, **edit}, exp, knobs, "tinybox_green") is None, edit
  assert gpu_platform({"settings": {"DEV": "CPU", "GPUS": 2}, "machine": {"gpu_target": "CUDA:sm_89"}},
                      {"DEV": "CPU", "GPUS": 2}, knobs, "tinybox_green") is None   # a rehearsal on the CPU


# ------------------------------------------------------------------------------------------------ received submissions
def published(platform: str) -> list[tuple]:
  """(org folder, system, its logs, global batch) of tinycorp's published logs of `platform` held here."""
  return [(org, platform, sorted((org / "results" / platform / "bert").glob("result_*.txt")), bs)
          for org, bs in PLATFORMS[platform][2]]


def scaled(org, system, logs, out, factor=0.5):
  """A copy of the logs with every time_ms moved to t0 + factor (t - t0), t0 the log's first; the system.json kept."""
  (out / "systems").mkdir(parents=True, exist_ok=True)
  shutil.copy(org / "systems" / f"{system}.json", out / "systems")
  (out / "results" / system / "bert").mkdir(parents=True, exist_ok=True)
  for p in logs:
    lines, t0 = [], None
    for line in p.read_text().splitlines(keepends=True):
      if ":::MLLOG " in line:
        head, body = line.split(":::MLLOG ", 1)
        rec = json.loads(body)
        t0 = rec["time_ms"] if t0 is None else t0
        rec["time_ms"] = round(t0 + factor * (rec["time_ms"] - t0))
        line = f"{head}:::MLLOG {json.dumps(rec)}\n"
      lines.append(line)
    (out / "results" / system / "bert" / p.name).write_text("".join(lines))
  return out, sorted((out / "results" / system / "bert").glob("result_*.txt"))


def band_rows(org, system, logs, predicted):
  a = Audit(str(org), "org", "5.0.0")
  check_step_band(a, org, system, [read_log(p) for p in logs], predicted=predicted)
  return [(r.status, r.subject, r.reason) for r in a.rows]


def test_the_cards_of_tinycorps_boxes_are_known_and_no_others():
  for org, system in ((V41, "tinybox_green"), (V41, "tinybox_red"), (V50, "tinybox_green"),
                      (V50_MORE, "tinybox_red"), (V50_MORE, "tinybox_8xMI300X")):
    assert known_platform(json.loads((org / "systems" / f"{system}.json").read_text())) == system
  dell = FIXTURES / "mlcommons/v5.0/Dell/systems/1xXE9712x4GB200.json"
  assert known_platform(json.loads(dell.read_text())) is None
  green = json.loads(system_path(REPO, "tinybox_green").read_text())
  assert known_platform({**green, "accelerators_per_node": "8"}) is None and known_platform({**green, "accelerators_"
    "per_node": 6}) == "tinybox_green" and known_platform([]) is None


def test_the_step_times_are_read_as_the_published_figures_are():
  """audit/step_band.py reads a log's step as tools/record_published_steps.py recorded the v5.0 figures."""
  want = json.loads((REPO / "resources/published/tinycorp-v5.0-bert.json").read_text())["systems"]
  for org, system, logs, _ in published("tinybox_green")[1:] + published("tinybox_red")[1:] + published("tinybox_8xMI300X"):
    runs = {r["log"]: r for r in want[system]["runs"]}
    for p in logs:
      ms, k = log_step_ms(read_log(p))
      assert round(ms, 2) == runs[p.name]["step_ms"] and k == runs[p.name]["intervals"], (system, p.name)


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_received_logs_pass_inside_the_band_and_fail_scaled_by_half(tmp_path, bands, platform):
  for i, (org, system, logs, bs) in enumerate(published(platform)):
    [(status, subject, why)] = band_rows(org, system, logs, bands)
    assert status == "PASS" and subject == system and f"{len(logs)} log(s)' step times" in why, why
    assert f"{system} at BS {bs} is predicted" in why and f"systems/{system}.json" in why, why
    half, half_logs = scaled(org, system, logs, tmp_path / f"{i}" / "tinycorp")
    rows = band_rows(half, system, half_logs, bands)
    assert [r[0] for r in rows] == ["FAIL"] * len(logs), rows
    step, low, high = TEST_BANDS[(platform, bs)]
    assert re.fullmatch(rf"[\d.]+ ms a step logged \(the median of its \d+ eval intervals, an eval_stop to the next "
                        rf"eval_start\); {system} at BS {bs} is predicted {step:.0f} ms \(band {low:.0f}-{high:.0f} "
                        rf"ms, {re.escape(str(bands))}\) for its \d x [^:]+ in systems/{system}.json: the log trains "
                        r"faster than its hardware can", rows[0][2]), rows[0][2]


def test_unknown_cards_or_batches_are_not_held(tmp_path, bands):
  dell = FIXTURES / "mlcommons/v5.0/Dell"
  assert band_rows(dell, "1xXE9712x4GB200", sorted(dell.glob("results/*/bert/result_*.txt")), bands) == []
  org, system, logs, _ = published("tinybox_red")[0]
  write_bands(tmp_path / "other.json", {("tinybox_red", 96): TEST_BANDS[("tinybox_red", 96)]})
  [(status, subject, why)] = band_rows(org, system, logs, tmp_path / "other.json")
  assert status == "SKIP" and "holds no prediction for tinybox_red at BS 66" in why, why


# ------------------------------------------------------------------------------------------------ the repository's band
# The model predicts 1,610 ms for the MI300X box's measured 1,917 (docs/benchmarks.md): its logs at half their times
# (~950 ms) fall below the band's low edge (1,369 ms), as green's and red's do below theirs.
HALF_CAUGHT = [(p, 0.5) for p in PLATFORMS]


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_the_repository_band_passes_every_published_log(platform):
  """resources/predicted/steps.json (the cost model's): tinycorp's logs of each platform PASS (the fixtures hold every
  v4.1 log, every v5.0 green log and the fastest v5.0 red and MI300X runs: a slower log's median is further above the
  edge; every v5.0 log of the three passes too, checked on MLCommons' repository)."""
  assert PREDICTED.is_file(), f"{PREDICTED} is missing: tools/record_step_predictions.py records it"
  for org, system, logs, bs in published(platform):
    assert step_band(platform, bs, PREDICTED) is not None, f"{PREDICTED.name} has no {platform} at BS {bs}"
    assert [r[0] for r in band_rows(org, system, logs, PREDICTED)] == ["PASS"], (platform, bs)


@pytest.mark.parametrize("platform,factor", HALF_CAUGHT + [("tinybox_8xMI300X", 0.65)])
def test_the_repository_band_fails_published_logs_scaled_down(tmp_path, platform, factor):
  """The same logs with every time scaled by `factor`: each FAILs against resources/predicted/steps.json."""
  for i, (org, system, logs, bs) in enumerate(published(platform)):
    fast, fast_logs = scaled(org, system, logs, tmp_path / f"{i}" / "tinycorp", factor)
    assert [r[0] for r in band_rows(fast, system, fast_logs, PREDICTED)] == ["FAIL"] * len(logs), (platform, bs)


def test_red_v41_at_half_speed_fails_the_audit_with_its_score_halved(tmp_path):
  """The whole audit of tinycorp's v4.1 tinybox_red, every time scaled by 0.5: its score halves (397.33 -> 198.66 min,
  which every other check accepts) and the time rows FAIL it."""
  org, system, logs, _ = published("tinybox_red")[0]
  half, _ = scaled(org, system, logs, tmp_path / "tinycorp")
  audit = audit_submission(half, "4.1.0")
  assert round(audit.scores[f"tinycorp/{system}"]["score"], 2) == 198.66
  fails = [r for r in audit.rows if r.status == "FAIL"]
  assert fails and {r.check for r in fails} == {"time"}, fails
  assert len(fails) == 10 and "tinybox_red at BS 66 is predicted" in fails[0].reason

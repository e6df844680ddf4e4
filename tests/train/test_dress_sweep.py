"""The batch planner (`dress --sweep`, mlperf_bert/train/dress/sweep.py and batchplan.py): the grid and its settings,
the recommendation on hand-built rows (seconds), and a two-point sweep end to end (a 1-layer model of the cpu
platform's size compiled for sm_89 on the NULL device)."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from mlperf_bert.constants import platform_path
from mlperf_bert.errors import UserError
from mlperf_bert.train.dress import batchplan, sweep
from mlperf_bert.train.dress.batchplan import format_sweep, recommend
from mlperf_bert.train.dress.report import CARDS

REPO = Path(__file__).resolve().parents[2]
GB = 10 ** 9
USABLE = CARDS["CUDA:sm_89"].usable


def _row(bs: int, worst_gb: float, ttt: float, band: float = 2.0, init_min: float = 20.0, fi: int = 1,
         peak_at: str = "train step") -> dict:
  worst = int(worst_gb * GB)
  return {"setting": {"BS": bs, "EVAL_BS": bs, "FREE_INTERMEDIATE": fi}, "batch_size": bs, "eval_batch_size": bs,
          "free_intermediate": fi, "fits": worst <= USABLE, "worst_bytes": worst, "peak_at": peak_at,
          "usable_bytes": USABLE, "margin_bytes": CARDS["CUDA:sm_89"].margin, "spare_bytes": USABLE - worst,
          "programs": 500, "step": {"ms": 300.0, "low_ms": 280.0, "high_ms": 320.0},
          "eval_step": {"ms": 90.0, "low_ms": 80.0, "high_ms": 100.0},
          "steps_to_target": {"steps": 30000, "low": 29000, "high": 31000, "how": "hand-built"},
          "time_to_train": {"minutes": ttt, "low_minutes": ttt - band, "high_minutes": ttt + band},
          "init": {"minutes": init_min, "within_limit": init_min < 30, "limit_min": 30, "division": "closed"}}


def test_the_pick_is_the_fastest_setting_that_fits_and_each_other_says_why_it_loses():
  rows = [_row(72, 19.6, 215.0), _row(90, 21.8, 205.0), _row(96, 24.7, 200.0, peak_at="train step after an eval")]
  rec = recommend(rows)
  assert rec["pick"] == 1 and rec["setting"] == "BS 90, FREE_INTERMEDIATE 1"
  assert "205 min" in rec["why"] and f"{(USABLE - 21.8 * GB) / 1e9:.2f} GB to spare" in rec["why"]
  loses = {o["index"]: o["loses"] for o in rec["others"]}
  assert loses[2].startswith(f"does not fit: {(24.7 * GB - USABLE) / 1e9:.2f} GB over") and \
    loses[2].endswith("at the train step after an eval")
  assert loses[0].startswith("trains 10.0 min slower (215 min, +4.9 %)") and "band" not in loses[0]


def test_an_init_over_the_limit_rules_a_setting_out_and_a_band_overlap_is_said():
  rows = [_row(72, 19.6, 206.0), _row(90, 21.8, 205.0, init_min=31.0), _row(84, 21.0, 209.0)]
  rec = recommend(rows)
  assert rec["pick"] == 0
  loses = {o["index"]: o["loses"] for o in rec["others"]}
  assert loses[1] == "INIT 31 min is over MLPerf's 30-min limit (closed)"
  assert "within the pick's band" in loses[2]       # 209 +- 2 against 206 +- 2: the bands meet


def test_with_nothing_eligible_there_is_no_pick_but_the_fastest_that_fits_is_named():
  rows = [_row(72, 19.6, 215.0, init_min=40.0), _row(90, 21.8, 205.0, init_min=40.0), _row(96, 24.7, 200.0)]
  rec = recommend(rows)
  assert rec["pick"] is None and rec["fastest_fitting"] == 1 and "BS 90, FREE_INTERMEDIATE 1 trains fastest" in rec["why"]
  loses = {o["index"]: o["loses"] for o in rec["others"]}
  assert loses[0].endswith("; and trains 10.0 min slower than BS 90, FREE_INTERMEDIATE 1") and "slower" not in loses[1]
  assert loses[2].startswith("does not fit") and "slower" not in loses[2]
  text = format_sweep({"platform": "p", "target": "CUDA:sm_89", "card": "RTX 4090", "sweep": {"BS": [72, 90, 96]},
                       "how": "hand-built", "eval_bs_rule": "follows BS", "rows": rows, "recommendation": rec})
  assert "recommended: none: no setting fits" in text and text.count(" OVER") == 2 and "  NO " not in text
  assert [l.split()[0] for l in text.splitlines()[3:6]] == ["72", "90", "96"]


def test_equal_times_pick_the_setting_with_more_memory_to_spare():
  rows = [_row(90, 21.8, 205.0, fi=0), _row(90, 21.6, 205.0, fi=1)]
  rec = recommend(rows)
  assert rec["pick"] == 1 and rec["others"][0]["loses"].startswith("as fast (205 min) with less memory to spare")


def test_the_grid_is_every_combination_and_eval_bs_follows_bs_where_the_platform_ties_them():
  s = sweep.parse_sweep(["BS=72,78", "FREE_INTERMEDIATE=0,1"])
  assert sweep.grid(s) == [{"BS": 72, "FREE_INTERMEDIATE": 0}, {"BS": 72, "FREE_INTERMEDIATE": 1},
                           {"BS": 78, "FREE_INTERMEDIATE": 0}, {"BS": 78, "FREE_INTERMEDIATE": 1}]
  green, dev = platform_path(REPO, "tinybox_green"), platform_path(REPO, "dev_1gpu")   # 90/90 and 11/8
  assert sweep.eval_bs_follows(green, {}, s) and not sweep.eval_bs_follows(dev, {}, {"BS": [8, 16]})
  assert not sweep.eval_bs_follows(green, {"EVAL_BS": 60}, s)
  settings, setups, follows = sweep._setups(green, REPO / "resources/demo/bert_config.json", s, {}, None, (2, 4), False)
  assert follows and [(x.settings.batch_size, x.settings.eval.batch_size, x.settings.free_intermediate)
                      for x in setups] == [(72, 72, False), (72, 72, True), (78, 78, False), (78, 78, True)]


@pytest.mark.parametrize("items,says", [
  (["BS"], "expected KEY=V1,V2"), (["BS=72,72"], "a value repeats"), (["BS=72", "BS=78"], "given twice"), ([], "at least one")])
def test_a_bad_sweep_is_one_line(items, says):
  with pytest.raises(UserError, match=says): sweep.parse_sweep(items)


def test_a_setting_the_platform_refuses_is_refused_before_anything_is_dressed():
  with pytest.raises(UserError, match="BS=75 is not divisible by GPUS=6"):
    sweep.sweep_files(platform_path(REPO, "tinybox_green"), REPO / "resources/demo/bert_config.json",
                      {"BS": [72, 75]})
  with pytest.raises(UserError, match="--set and --sweep both set BS"):
    sweep.sweep_files(platform_path(REPO, "tinybox_green"), REPO / "resources/demo/bert_config.json",
                      {"BS": [72]}, overrides={"BS": 90})


def test_the_picture_marks_what_does_not_fit_and_the_pick(tmp_path):
  rows = [_row(72, 19.6, 215.0), _row(90, 21.8, 205.0), _row(96, 24.7, 200.0)]
  ans = {"platform": "tinybox_green", "rows": rows, "recommendation": recommend(rows)}
  batchplan.write_sweep_picture(tmp_path / "p.svg", ans)
  svg = (tmp_path / "p.svg").read_text()
  assert svg.startswith("<?xml") and "does not fit" in svg and "recommended" in svg and "BS (global batch)" in svg
  rows = [_row(72, 19.6, 215.0, init_min=40.0), _row(90, 21.8, 205.0, init_min=40.0)]   # nothing within INIT's limit
  batchplan.write_sweep_picture(tmp_path / "q.svg", {"platform": "p", "rows": rows, "recommendation": recommend(rows)})
  svg = (tmp_path / "q.svg").read_text()
  assert "INIT over the limit" in svg and "fastest that fits" in svg and "does not fit" not in svg


@pytest.mark.slow
def test_a_two_point_sweep_end_to_end(tmp_path):
  """The cpu platform's model (1 layer, hidden 128) compiled for sm_89 on NULL, at BS 8 and 16 (EVAL_BS 64 stays:
  the platform does not tie it to BS): one table, JSON and picture, a recommendation among the two."""
  env = {k: v for k, v in os.environ.items() if k not in ("USE_ATOMICS", "DEBUG", "BEAM", "NOOPT")}
  env["PYTHONPATH"] = str(REPO)
  out, pic = tmp_path / "plan.json", tmp_path / "plan.svg"
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "dress", "--platform", "cpu", "--layers", "1", "--set",
                      "DRESS_TARGET=CUDA:sm_89", "USE_ATOMICS=0", "--sweep", "BS=8,16", "--json", str(out),
                      "--picture", str(pic)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr[-2000:]
  ans = json.loads(out.read_text())
  rows = ans["rows"]
  assert [(r["batch_size"], r["eval_batch_size"]) for r in rows] == [(8, 64), (16, 64)]
  assert ans["eval_bs_rule"].startswith("as the platform") and ans["shared"].startswith("one process")
  assert all(r["fits"] and r["time_to_train"]["minutes"] > 0 and r["step"]["ms"] > 0 and r["init"] for r in rows)
  # a batch twice as large: more memory at the worst moment, a slower step, fewer steps to the target
  assert rows[1]["worst_bytes"] > rows[0]["worst_bytes"] and rows[1]["step"]["ms"] > rows[0]["step"]["ms"]
  assert rows[1]["steps_to_target"]["steps"] < rows[0]["steps_to_target"]["steps"]
  rec = ans["recommendation"]
  assert rec == recommend(rows) and p.stdout.strip() == ans["table"]
  lines = ans["table"].splitlines()
  assert lines[0].startswith("batch plan of cpu (CUDA:sm_89): 2 settings of BS") and \
    [l.split()[0] for l in lines[3:5]] == ["8", "16"]
  assert any(l.startswith("recommended: ") for l in lines)
  assert "BS (global batch)" in pic.read_text() and "measurements" not in ans["answers"][0]


def test_snakemake_dress_takes_the_sweep_from_config(tmp_path):
  """`snakemake dress` with dress_sweep in the config (dry run): a dress_sweep job writing the sweep's JSON, table and
  picture, with its log; without it, none."""
  from workflow_helpers import snakemake
  base = ["-n", "dress", "--cores", "1", "--config", "platform=tinybox_green", f"basedir={tmp_path / 'b'}"]
  r = snakemake(tmp_path, *base, "dress_sweep={BS: [72, 78], FREE_INTERMEDIATE: [0, 1]}")
  out = r.stdout + r.stderr
  for f in ("dress/tinybox_green-sweep.json", "report/dress/tinybox_green-sweep.txt",
            "report/dress/tinybox_green-sweep.svg", "logs/dress/tinybox_green-sweep.log"):
    assert f in out, out[-2000:]
  r = snakemake(tmp_path, *base)
  assert "dress_sweep" not in r.stdout + r.stderr
  from mlperf_bert.train.hparams import check_types    # what workflow/scripts/dress_sweep.py makes of --config's strings
  assert check_types({"BS": "72"}, "x") == {"BS": 72}


def test_batch_keys_share_one_process_and_a_tinygrad_key_does_not():
  """BS and FREE_INTERMEDIATE leave tinygrad's environment alone (one process dresses them all); DEFAULT_FLOAT is read
  at import, so each of its settings needs a process of its own."""
  green, cfg = platform_path(REPO, "tinybox_green"), REPO / "resources/demo/bert_config.json"
  _, setups, _ = sweep._setups(green, cfg, {"BS": [72, 96], "FREE_INTERMEDIATE": [0, 1]}, {}, None, (2, 4), False)
  assert len({tuple(sorted(sweep._env(s).items())) for s in setups}) == 1
  _, setups, _ = sweep._setups(green, cfg, {"DEFAULT_FLOAT": ["HALF", "float32"]}, {}, None, (2, 4), False)
  assert len({tuple(sorted(sweep._env(s).items())) for s in setups}) == 2

"""The dress against tinygrad's history (docs/benchmarks.md): every dress of tinygrad's own step at a commit of its
history (tests/fixtures/dress-tinygrad/tinybox_green-<commit>-bs<BS>.json, written by tools/dress_tinygrad.py) has
its row in the table, and the row's figures are what the fixture says at 24 layers. Reads JSON and Markdown only."""
import json
from pathlib import Path

from mlperf_bert.train.dress.report import tinygrad_prediction

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted((REPO / "tests/fixtures/dress-tinygrad").glob("tinybox_green-*-bs*.json"))
HEADER = "| tinygrad commit (date, PR) |"


def _table() -> list[dict[str, str]]:
  lines = (REPO / "docs/benchmarks.md").read_text().splitlines()
  start = next(i for i, l in enumerate(lines) if l.startswith(HEADER))
  cols = [c.strip() for c in lines[start].strip("|").split("|")]
  rows = []
  for l in lines[start + 2:]:
    if not l.startswith("|"): break
    rows.append(dict(zip(cols, (c.strip() for c in l.strip("|").split("|")))))
  return rows


def test_every_history_fixture_names_its_commit_and_settings():
  assert len(FIXTURES) >= 8
  for f in FIXTURES:
    rec = json.loads(f.read_text())
    _, short, bs = f.stem.split("-")
    assert rec["tinygrad_commit"].startswith(short) and bs == f"bs{rec['settings']['BS']}", f.name
    assert [p["layers"] for p in rec["points"]] == [2, 4] and rec["settings"]["GPUS"] == "6"
    # the step the tool dressed ran with the commit's own FREE_INTERMEDIATE (tinybox_green's scripts never set it)
    assert {p["free_intermediate"] for p in rec["points"]} == {rec["points"][0]["free_intermediate_default"]}


def test_the_history_table_gives_each_fixture_s_figures_at_24_layers():
  rows = _table()
  for f in FIXTURES:
    rec = json.loads(f.read_text())
    s, r = rec["settings"], tinygrad_prediction(rec)
    dressed = f"BS {s['BS']}/{s['EVAL_BS']}, FI {s['FREE_INTERMEDIATE']}"
    mine = [row for row in rows if row["dressed at"] == dressed and
            row["tinygrad commit (date, PR)"].startswith(f"`{rec['tinygrad_commit'][:10]}`")]
    assert len(mine) == 1, (f.name, dressed)
    row, m = mine[0], r["memory"]
    for col, v in (("state", m["persistent"]), ("train peak", m["train_peak"]), ("between", m["between"]),
                   ("eval peak", m["eval_peak"]), ("train after eval", m["train_after_eval_peak"]),
                   ("each device's line", r["worst_each_device"])):
      assert row[col] == f"{v / 1e9:.2f}", (f.name, col, row[col])
    assert row["worst / usable"] == f"{r['worst'] / 1e9:.2f} / {r['usable'] / 1e9:.2f}", f.name
    spare = abs(r["spare"]) / 1e9
    assert row["the dress says"].startswith(f"fits, {spare:.2f} GB to spare" if r["fits"] else f"does not fit, {spare:.2f} GB over"), f.name
  assert len(rows) >= len(FIXTURES)


SWEEP = REPO / "tests/fixtures/dress-sweep/tinybox_green-bs72-96.json"   # bench/bench_sweep.py --fixture


def test_the_history_table_gives_the_planner_s_verdict_at_each_commit():
  """Each row's "the planner at the commit" is history.planner_verdict of the commit's own dressed step (its memory)
  and this project's sweep (the time to train by batch), and its agreement with the batch the commit chose."""
  from mlperf_bert.train.dress.history import SLOPE_FROM, planner_verdict, verdict_text
  from mlperf_bert.train.dress.report import CARDS
  sweep = json.loads(SWEEP.read_text())
  assert [r["batch_size"] for r in sweep["rows"]] == [72, 78, 84, 90, 96] and sweep["platform"] == "tinybox_green"
  commits: dict[str, list] = {}
  for f in FIXTURES:
    rec = json.loads(f.read_text())
    commits.setdefault(rec["tinygrad_commit"][:10], []).append(rec)
  rows = _table()
  for c, recs in commits.items():
    v = planner_verdict(recs, sweep["rows"], CARDS["CUDA:sm_89"].usable, commits.get(SLOPE_FROM.get(c, "")))
    mine = [r for r in rows if r["tinygrad commit (date, PR)"].startswith(f"`{c}`")]
    assert mine, c
    for r in mine:
      assert r["the planner at the commit"].startswith(verdict_text(v)), (c, r["the planner at the commit"])

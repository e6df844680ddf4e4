"""The batch planner's answer (`dress --sweep`): one row a dressed setting, the recommended setting and why each other
loses, as a table, JSON and a picture. Nothing here imports tinygrad (sweep.py runs the dresses).

    row = point_row({"BS": 90}, answer)          # a dress's answer (run.py) reduced to what the planner compares
    rec = recommend(rows)                        # {"pick": index or None, "why": ..., "others": [...]}
    text = format_sweep(sweep_answer)            # the table and the recommendation

The recommendation: among the settings that fit the card with its margin (report.Card.margin) and whose predicted INIT
phase is within MLPerf's limit, the least predicted time to train (cost/totrain.py: the steps to the target at that
batch from the RCP's convergence by batch, the step and eval step the step-time model predicts, the warm-up). The
INIT phase is read in one place (`point_init`): the dress's own, from the BEAM searches of that setting's steps.
"""
from __future__ import annotations
import os
from typing import Any

from mlperf_bert.train.dress.report import gb

SHORT = {"FREE_INTERMEDIATE": "FI"}   # the table's column of a key whose name is wider than the column
PEAKS = {"train_peak": "train step", "eval_peak": "eval step", "train_after_eval_peak": "train step after an eval"}


def point_init(answer: dict[str, Any]) -> dict[str, Any] | None:
  """The INIT phase of one dressed setting: {"minutes", "low_minutes", "high_minutes", "within_limit", "limit_min",
  ...}, as the dress priced it from the BEAM searches of that setting's own steps (cost/init.py predict_init, through
  cost/answer.py add_time_to_train); None when the answer has no predicted INIT."""
  return (answer.get("cost") or {}).get("init") or None


def _worst(memory: dict[str, dict[str, int]]) -> tuple[int, str]:
  """(bytes, which step) of the worst moment: the highest peak on any device, and the step it comes in."""
  best = max(((v, k) for k in PEAKS for v in memory[k].values()), key=lambda x: x[0])
  return int(best[0]), PEAKS[best[1]]


def point_row(setting: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
  """What the planner compares of one dressed setting (`setting`: the keys the sweep set, EVAL_BS when it follows)."""
  worst, at = _worst(answer["memory"])
  card = answer.get("card")
  cost = answer.get("cost") or {}
  step, ev, t = cost.get("step"), cost.get("eval_step"), cost.get("time_to_train")
  band = lambda x, k="ms": None if not x else {"ms": x[k], "low_ms": x.get("low_ms"), "high_ms": x.get("high_ms")}
  return {
    "setting": dict(setting), "batch_size": answer["batch_size"], "eval_batch_size": answer["eval_batch_size"],
    "free_intermediate": answer["free_intermediate"], "fits": answer["fits"], "worst_bytes": worst, "peak_at": at,
    "usable_bytes": card["usable"] if card else None, "margin_bytes": card["margin"] if card else None,
    "spare_bytes": card["usable"] - worst if card else None,
    "programs": int(answer["train"]["programs"]) + int(answer["eval"]["programs"]),
    "step": band(step), "eval_step": band(ev),
    "steps_to_target": None if not t else {"steps": t["steps"], "low": t["steps_low"], "high": t["steps_high"],
                                            "how": t["how"]["steps"]},
    "time_to_train": None if not t else {"minutes": t["minutes"], "low_minutes": t["low_minutes"],
                                         "high_minutes": t["high_minutes"]},
    "init": point_init(answer),
  }


def label(row: dict[str, Any]) -> str:
  """`BS 90, FREE_INTERMEDIATE 1`: the setting's swept keys."""
  return ", ".join(f"{k} {v}" for k, v in row["setting"].items() if k != "EVAL_BS" or "BS" not in row["setting"]) or \
    f"BS {row['batch_size']}"


def _blocker(row: dict[str, Any]) -> str | None:
  """Why a setting cannot be picked at all (does not fit, INIT over the limit, nothing predicted), or None."""
  if row["fits"] is None: return "no card to hold it against (the target has no entry in report.CARDS)"
  if not row["fits"]:
    return f"does not fit: {gb(-row['spare_bytes'])} over the usable memory at the {row['peak_at']}"
  if not row["time_to_train"]: return "no predicted time to train (the target has no step-time model)"
  i = row["init"]
  if i and not i["within_limit"]:
    return f"INIT {i['minutes']:g} min is over MLPerf's {i['limit_min']:g}-min limit ({i['division']})"
  return None


def recommend(rows: list[dict[str, Any]]) -> dict[str, Any]:
  """The least time to train among the settings that fit and keep INIT within the limit (ties: the most spare
  memory), and why each other loses; with no such setting, `pick` is None and `fastest_fitting` names the least time
  to train among those that fit (what the pick would be were the INIT limit met)."""
  blocked = {i: _blocker(r) for i, r in enumerate(rows)}
  ok = [i for i, b in blocked.items() if b is None]
  key = lambda i: (rows[i]["time_to_train"]["minutes"], -rows[i]["spare_bytes"])
  pick = min(ok, key=key) if ok else None
  others = []
  for i, r in enumerate(rows):
    if i == pick: continue
    if blocked[i] is not None:
      others.append({"index": i, "setting": label(r), "loses": blocked[i]})
      continue
    p, t = rows[pick]["time_to_train"], r["time_to_train"]
    d = t["minutes"] - p["minutes"]
    if d == 0: why = f"as fast ({t['minutes']:g} min) with less memory to spare ({gb(r['spare_bytes'])})"
    else:
      overlap = t["low_minutes"] <= p["high_minutes"] and p["low_minutes"] <= t["high_minutes"]
      why = (f"trains {d:.1f} min slower ({t['minutes']:g} min, {100 * d / p['minutes']:+.1f} %)" +
             ("; within the pick's band, so the model cannot tell them apart for certain" if overlap else ""))
    others.append({"index": i, "setting": label(r), "loses": why})
  out: dict[str, Any] = {"pick": pick, "others": others}
  if pick is not None:
    r = rows[pick]
    t = r["time_to_train"]
    init = f", INIT {r['init']['minutes']:g} min within {r['init']['limit_min']:g}" if r["init"] else ""
    out["setting"] = label(r)
    out["why"] = (f"the least predicted time to train that fits: {t['minutes']:g} min (band {t['low_minutes']:g}-"
                  f"{t['high_minutes']:g}), {gb(r['spare_bytes'])} to spare at the {r['peak_at']}{init}")
  else:
    fitting = [i for i, r in enumerate(rows) if r["fits"] and r["time_to_train"]]
    out["why"] = "no setting fits the card and keeps INIT within the limit"
    if fitting:
      f = min(fitting, key=key)
      out["fastest_fitting"] = f
      best = rows[f]["time_to_train"]["minutes"]
      out["why"] += (f"; of those that fit, {label(rows[f])} trains fastest ({best:g} min): the pick once INIT is "
                     f"within the limit")
      for o in others:   # among those that fit, what else each loses against it
        t = rows[o["index"]]["time_to_train"]
        if o["index"] != f and o["index"] in fitting and t["minutes"] > best:
          o["loses"] += f"; and trains {t['minutes'] - best:.1f} min slower than {label(rows[f])}"
  return out


def _cell(x, fmt: str, none: str = "-") -> str:
  return none if x is None else format(x, fmt)


def format_sweep(ans: dict[str, Any]) -> str:
  """The planner's table (one row a setting) and its recommendation."""
  rows, rec = ans["rows"], ans["recommendation"]
  keys = list(ans["sweep"])
  cols = [k for k in keys] + ([] if "EVAL_BS" in keys else ["EVAL_BS"])
  card = next((r for r in rows if r["usable_bytes"]), None)
  lines = [f"batch plan of {ans['platform']} ({ans['target']}): {len(rows)} setting{'s' * (len(rows) != 1)} of "
           f"{' x '.join(keys)}, each dressed ({ans['how']})"]
  if card:
    lines.append(f"  card {ans['card']}: usable {gb(card['usable_bytes'])} a device (margin {gb(card['margin_bytes'])}); "
                 f"EVAL_BS {ans['eval_bs_rule']}" + "".join(f"; {v} = {k}" for k, v in SHORT.items() if k in cols))
  head = " ".join(f"{SHORT.get(c, c)[:7]:>7s}" for c in cols)
  lines.append(f"{head} | fits {'worst GB':>8s} {'spare GB':>8s} {'peak at':24s} | step ms eval ms | steps to target"
               f" | {'time to train min (band)':24s} | INIT min")
  for r in rows:
    vals = {**r["setting"], "EVAL_BS": r["eval_batch_size"]}
    cells = " ".join(f"{str(vals.get(c, '')):>7s}" for c in cols)
    st, ev, n, t, i = r["step"], r["eval_step"], r["steps_to_target"], r["time_to_train"], r["init"]
    fits = "-" if r["fits"] is None else ("yes" if r["fits"] else "NO")
    spare = "-" if r["spare_bytes"] is None else f"{r['spare_bytes'] / 1e9:+.2f}"
    lines.append(f"{cells} | {fits:4s} {r['worst_bytes'] / 1e9:8.2f} {spare:>8s} {r['peak_at']:24s} | "
                 f"{_cell(st and st['ms'], '7.1f'):>7s} {_cell(ev and ev['ms'], '7.1f'):>7s} | "
                 f"{_cell(n and n['steps'], ',d'):>15s} | "
                 + (f"{t['minutes']:7.1f} ({t['low_minutes']:.1f}-{t['high_minutes']:.1f})" if t else "-").ljust(24)
                 + " | " + (f"{i['minutes']:.1f}{'' if i['within_limit'] else ' OVER'}" if i else "-"))
  if rec["pick"] is not None: lines.append(f"recommended: {rec['setting']}: {rec['why']}")
  else: lines.append(f"recommended: none: {rec['why']}")
  for o in rec["others"]: lines.append(f"  {o['setting']}: {o['loses']}")
  return "\n".join(lines)


def write_sweep_picture(out: str | os.PathLike, ans: dict[str, Any]) -> None:
  """The time to train (with its band) against BS, one line a setting of the other swept keys; a setting that does
  not fit is a red cross, one whose INIT is over the limit a hollow marker, the pick ringed. An SVG, atomically."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  from mlperf_bert.fileio import atomic_path
  rows, rec = ans["rows"], ans["recommendation"]
  series: dict[str, list[tuple[int, dict]]] = {}
  for i, r in enumerate(rows):
    rest = ", ".join(f"{k} {v}" for k, v in r["setting"].items() if k not in ("BS", "EVAL_BS"))
    series.setdefault(rest, []).append((i, r))
  fig, ax = plt.subplots(figsize=(7, 4.2))
  for name, pts in series.items():
    pts = [(i, r) for i, r in pts if r["time_to_train"]]
    if not pts: continue
    x = [r["batch_size"] for _, r in pts]
    y = [r["time_to_train"]["minutes"] for _, r in pts]
    err = [[r["time_to_train"]["minutes"] - r["time_to_train"]["low_minutes"] for _, r in pts],
           [r["time_to_train"]["high_minutes"] - r["time_to_train"]["minutes"] for _, r in pts]]
    line = ax.errorbar(x, y, yerr=err, capsize=3, marker="o", label=name or "time to train")
    colour = line[0].get_color()
    for (i, r), xx, yy in zip(pts, x, y):
      if r["fits"] is False: ax.plot([xx], [yy], "x", color="red", markersize=12, mew=2, zorder=4)
      elif r["init"] and not r["init"]["within_limit"]:
        ax.plot([xx], [yy], "o", mfc="white", mec=colour, mew=2, markersize=9, zorder=4)
      if i == rec["pick"]: ax.plot([xx], [yy], "o", mfc="none", mec="green", markersize=16, mew=2, zorder=5)
      if i == rec.get("fastest_fitting"): ax.plot([xx], [yy], "o", mfc="none", mec="green", markersize=16, mew=1.5,
                                                  zorder=5)
  if any(r["fits"] is False for r in rows): ax.plot([], [], "x", color="red", markersize=10, mew=2, label="does not fit")
  if any(r["init"] and not r["init"]["within_limit"] for r in rows):
    ax.plot([], [], "o", mfc="white", mec="grey", mew=2, label="INIT over the limit")
  if rec["pick"] is not None: ax.plot([], [], "o", mfc="none", mec="green", markersize=12, mew=2, label="recommended")
  if rec.get("fastest_fitting") is not None:
    ax.plot([], [], "o", mfc="none", mec="green", markersize=12, mew=1.5, label="fastest that fits (INIT over)")
  ax.set_xlabel("BS (global batch)")
  ax.set_ylabel("predicted time to train (min)")
  ax.set_title(f"{ans['platform']}: time to train by batch (band: what the model cannot know)", fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  with atomic_path(out) as tmp:
    fig.savefig(tmp, format="svg", metadata={"Date": None})
  plt.close(fig)

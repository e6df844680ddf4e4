#!/usr/bin/env python3
"""Record the step-time model's predictions (mlperf_bert/train/cost/) for every (platform, global batch) the audit may
meet into resources/predicted/steps.json (the format: train/cost/band.py reads it).

    python tools/record_step_predictions.py                                 # dress each entry (a few CPU min each)
    python tools/record_step_predictions.py --answer green96.json red96.json   # reuse dress answers (--json) where
                                                                            # platform and BS match; dress the rest
    python tools/record_step_predictions.py --only tinybox_green:96         # only these entries (others kept)
    python tools/record_step_predictions.py --answer g96.json --scale       # the other batches of green scaled from
                                                                            # its answer (no dress; the entry says so)

Entries: tinybox_green and tinybox_red at every global batch of tinycorp's published logs (v4.1: 66, v5.0: 96) and at
the platforms' own BS (90); tinybox_8xMI300X at 1024. An entry dressed here runs `python -m mlperf_bert dress --platform P
--set BS=b EVAL_BS=b` (its 2- and 4-layer models, `--pair` to change) in a subprocess, as a user would.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from mlperf_bert.train.cost.hardware import BAND_HIGH, BAND_LOW, BAND_WHY  # noqa: E402
from mlperf_bert.train.cost.predict import predict_cost  # noqa: E402

OUT = REPO / "resources" / "predicted" / "steps.json"
ENTRIES = (("tinybox_green", 96), ("tinybox_red", 96), ("tinybox_8xMI300X", 1024),
           ("tinybox_green", 90), ("tinybox_red", 90), ("tinybox_green", 66), ("tinybox_red", 66))


def dress(platform: str, bs: int, pair: str) -> dict:
  with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "answer.json"
    cmd = [sys.executable, "-m", "mlperf_bert", "dress", "--platform", platform, "--pair", pair, "--set", f"BS={bs}",
           f"EVAL_BS={bs}", "--json", str(out)]
    p = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    if p.returncode != 0 or not out.exists():
      raise SystemExit(f"error: the dress of {platform} at BS {bs} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.read_text())


def entry(answer: dict) -> dict:
  cost = predict_cost(answer)      # re-simulated from the answer's calls: the model as it is now
  step, ev = cost["step"], cost["eval_step"]
  return {"platform": answer["platform"], "target": answer["target"], "gpus": answer["devices"],
          "global_bs": answer["batch_size"], "step_ms": step["ms"], "low_ms": step["low_ms"], "high_ms": step["high_ms"],
          "eval_bs": answer["eval_batch_size"], "eval_step_ms": ev["ms"], "layers": answer["how"],
          "source_only_ms": step["source_only_ms"], "held_out": step["held_out"],
          "breakdown_ms": step["breakdown_ms"]}


def scaled(e: dict, bs: int) -> dict:
  """An entry at another global batch from a dressed one, without a dress (--scale): the kernels' and the input
  copies' time in proportion to the batch (the step's work is), the all-reduce (the grads' bytes) and the launch
  gaps and host time unchanged; the eval step in proportion. Marked in "layers" as scaled."""
  bd, f = e["breakdown_ms"], bs / e["global_bs"]
  parts = {k: round(v * f if k in ("matmul", "other", "copies") else v, 2) for k, v in bd.items()}
  ms = round(sum(parts.values()) * e["step_ms"] / sum(bd.values()), 2)
  return {**e, "global_bs": bs, "eval_bs": bs, "step_ms": ms, "source_only_ms": round(ms / e["held_out"], 2), "low_ms": round(ms * BAND_LOW, 2),
          "high_ms": round(ms * BAND_HIGH, 2), "eval_step_ms": round(e["eval_step_ms"] * f, 2), "breakdown_ms": parts,
          "layers": f"scaled from the dress at BS {e['global_bs']} ({e['layers']}): kernels x {bs}/{e['global_bs']}, "
                    f"all-reduce, launch and host unchanged (no dress at BS {bs})"}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--answer", nargs="*", type=Path, default=[], help="dress answers (--json) to reuse")
  ap.add_argument("--only", nargs="*", default=None, help="PLATFORM:BS entries to (re)record; the others are kept")
  ap.add_argument("--pair", default="2,4", help="the two depths a dress measures (default 2,4)")
  ap.add_argument("--scale", action="store_true", help="an entry with no answer is scaled from the answer of its "
                  "platform at another batch (no dress; marked in the entry)")
  ap.add_argument("--out", type=Path, default=OUT)
  a = ap.parse_args()
  answers = {}
  for path in a.answer:
    r = json.loads(path.read_text())
    if "calls" not in r["measurements"][-1]["train"]:
      raise SystemExit(f"error: {path} is the answer of a dress without call records; dress it again with this project")
    answers[(r["platform"], r["batch_size"])] = r
  old = {(p["platform"], p["global_bs"]): p for p in json.loads(a.out.read_text())["predictions"]} if a.out.exists() else {}
  wanted = ENTRIES if a.only is None else tuple((s.split(":")[0], int(s.split(":")[1])) for s in a.only)
  preds = dict(old)
  for key in wanted:
    if key in answers: preds[key] = entry(answers[key])
    elif a.scale and (base := next((r for (pl, _), r in answers.items() if pl == key[0]), None)):
      preds[key] = scaled(entry(base), key[1])
    else: preds[key] = entry(dress(*key, a.pair))
    print(f"{key[0]} BS {key[1]}: {preds[key]['step_ms']} ms a step ({preds[key]['low_ms']}-{preds[key]['high_ms']})")
  commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
  order = {k: i for i, k in enumerate(ENTRIES)}
  data = {"schema": "mlperf-bert/step-predictions/1", "recorded_by": "tools/record_step_predictions.py",
          "tinygrad": "0.14.0", "project_commit": commit, "band": {"low": BAND_LOW, "high": BAND_HIGH, "why": BAND_WHY},
          "predictions": [preds[k] for k in sorted(preds, key=lambda k: order.get(k, len(order)))]}
  a.out.parent.mkdir(parents=True, exist_ok=True)
  tmp = a.out.with_suffix(".tmp")
  tmp.write_text(json.dumps(data, indent=1) + "\n")
  tmp.replace(a.out)
  print(f"wrote {a.out.relative_to(REPO) if a.out.is_relative_to(REPO) else a.out}: {len(data['predictions'])} entries")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())

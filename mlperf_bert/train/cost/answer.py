"""The time to train and the INIT phase in the dress's answer (mlperf_bert/train/cost/): from its predicted train and
eval steps (answer["cost"]["step"] and ["eval_step"], the step-time model's) and its distinct programs, into
answer["cost"]["time_to_train"] and ["init"], and their lines of the dress's table (after the table's own lines of
the predicted step and its breakdown).

    add_time_to_train(answer, eval_step_freq=1562)   # no-op (False) when the answer has no predicted step
    lines = cost_lines(answer)                       # [] when it has neither
"""
from __future__ import annotations
from typing import Any

from mlperf_bert.train.cost.init import BeamSettings, held_against_tinycorp, predict_init
from mlperf_bert.train.cost.totrain import predict


def _band(x: dict) -> tuple[float, float, float]:
  return float(x["ms"]), float(x.get("low_ms", x["ms"])), float(x.get("high_ms", x["ms"]))


def init_measurement(answer: dict[str, Any], init_layers: int) -> dict[str, Any] | None:
  """The answer's measurement whose steps the INIT phase searches: at the platform's INIT_BERT_LAYERS, else the
  shallowest measured with call records (the same programs: a layer repeats its kernels), None without one."""
  ms = [m for m in answer.get("measurements", []) if "calls" in m.get("train", {}) and "calls" in m.get("eval", {})]
  return min(ms, key=lambda m: (m["layers"] != init_layers, m["layers"]), default=None)


def add_time_to_train(answer: dict[str, Any], eval_step_freq: int, beam: BeamSettings | None = None,
                      init_layers: int = 2, division: str = "closed") -> bool:
  """Fill answer["cost"]["time_to_train"] (totrain.predict at the answer's platform, global BS and EVAL_BS) and
  answer["cost"]["init"] (init.predict_init of the BEAM searches of its steps at the INIT depth, with the platform's
  `beam` settings, against the `division`'s limit; the steps' build and capture seconds as the INIT process outside
  them) where answer["cost"]["step"]
  and ["eval_step"] are present; True when it did, False (nothing changed) when the answer has no predicted step."""
  cost = answer.get("cost")
  if not isinstance(cost, dict) or not cost.get("step") or not cost.get("eval_step"): return False
  cost["time_to_train"] = predict(answer["platform"], int(answer["batch_size"]), int(answer["eval_batch_size"]),
                                  int(eval_step_freq), _band(cost["step"]), _band(cost["eval_step"]))
  m = init_measurement(answer, init_layers)
  if beam is not None and m is not None:
    outside = sum(m["train"].get("seconds", [])) + sum(m["eval"].get("seconds", []))
    cost["init"] = {**predict_init(m["train"]["calls"], m["eval"]["calls"], answer["target"], beam, outside_s=outside,
                                    division=division),
                    "layers": m["layers"]}
    if (held := held_against_tinycorp(answer["platform"])) is not None: cost["init"]["tinygrad_e0139fa"] = held
  return True


def cost_lines(answer: dict[str, Any]) -> list[str]:
  """The table's lines of the time to train (beside tinycorp's official score where there is one) and the INIT phase;
  [] when the answer has neither (the predicted step and its breakdown are the dress table's own lines)."""
  cost = answer.get("cost") or {}
  lines: list[str] = []
  t = cost.get("time_to_train")
  if t:
    p = t["parts_min"]
    official = (f"; tinycorp's official v5.0 score {t['official_v50_min']} min ({100 * t['error_vs_official']:+.1f} %)"
                if "official_v50_min" in t else "")
    lines.append(f"predicted time to train: {t['minutes']} min (band {t['low_minutes']}-{t['high_minutes']}){official}")
    lines.append(f"  {t['steps']:,} steps {p['steps_min']} min + {t['evals']:g} evals of {t['eval_batches']} batches "
                 f"{p['evals_min']} min + warm-up {p['warmup_min']} min; steps: {t['how']['steps']}")
  i = cost.get("init")
  if i:
    k, n = i["by_kind_min"], i["searches_by_kind"]
    lines.append(f"predicted INIT phase: {i['minutes']} min (band {i['low_minutes']}-{i['high_minutes']}): "
                 f"{i['searches']} BEAM {i['beam']} searches (tinygrad {i['tinygrad']}: "
                 f"{'a search a device' if i['keyed_by_device'] else 'one search for all devices'}): "
                 f"{'within' if i['within_limit'] else 'OVER'} MLPerf's {i['limit_min']:g}-min limit ({i['division']})")
    lines.append("  " + ", ".join(f"{kind} {k[kind]} min ({n[kind]} searches)" for kind in k)
                 + f", the INIT process outside them {i['outside_min']} min; {i['candidates']:,} candidates compiled")
    if (h := i.get("tinygrad_e0139fa")):
      lines.append(f"  held against tinycorp: tinygrad's own e0139fa step priced the same way {h['predicted_min']} min "
                   f"({h['candidates']:,} candidates), its v5.0 INIT phase {h['measured_min']} min ({h['error_pct']:+.0f} %): "
                   f"the model leaves out {h['missing_min']} min that no term here explains (docs/benchmarks.md)")
  return lines

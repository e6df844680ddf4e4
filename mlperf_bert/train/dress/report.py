"""The dress's answer (mlperf_bert/train/dress/): the measurements of one or two depths, extrapolated to
the config's depth, against the card's memory and published peaks, beside tinycorp's published step time; as JSON
and as a one-screen table. Nothing here imports tinygrad.

Cards: the memory and the published dense fp16 peaks (tensor cores / matrix cores, fp32 accumulate where the vendor
states both) of the GPU of each DRESS_TARGET. A step fits when every device's peak is at most the card's memory
less MARGIN (the driver, the CUDA/HIP context and tinygrad's runtime, which a NULL device does not hold).
"""
from __future__ import annotations
import dataclasses, json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GiB = 1 << 30
PUBLISHED = Path(__file__).resolve().parents[3] / "resources" / "published" / "tinycorp-v5.0-bert.json"


@dataclass(frozen=True)
class Card:
  name: str
  memory: int            # bytes
  tflops: float          # dense fp16 peak
  gbps: float            # memory bandwidth, GB/s

  @property
  def margin(self) -> int:
    """Bytes kept for the driver and runtime: 1 GiB + 5 % of the card."""
    return GiB + self.memory // 20

  @property
  def usable(self) -> int: return self.memory - self.margin


CARDS = {
  "CUDA:sm_89": Card("RTX 4090", 24564 << 20, 165.2, 1008.0),       # Ada whitepaper: fp16 tensor, fp32 accumulate
  "AMDLLVM:gfx1100": Card("RX 7900 XTX", 24 * GiB, 122.8, 960.0),   # AMD spec sheet: peak fp16
  "AMDLLVM:gfx942": Card("MI300X", 192 * GiB, 1307.4, 5300.0),      # AMD spec sheet: dense fp16
  "CUDA:sm_90": Card("H200 SXM", 143771 << 20, 989.4, 4800.0),      # NVIDIA datasheet: dense fp16 (1979 with sparsity)
}


def layer_params(cfg) -> int:
  H, I = cfg.hidden_size, cfg.intermediate_size
  return 4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H   # q, k, v, o; ffn in and out; two LayerNorms


def layer_flops(cfg, batch: int, seq: int, train: bool = True) -> float:
  """Matmul FLOPs of one encoder layer for `batch` sequences: dense layers + QK^T and PV, x3 for a train step
  (forward + backward)."""
  H, I = cfg.hidden_size, cfg.intermediate_size
  fwd = 2 * batch * seq * (4 * H * H + 2 * H * I) + 2 * 2 * batch * seq * seq * H
  return 3.0 * fwd if train else float(fwd)


def step_flops(cfg, B: int, S: int, P: int, train: bool = True) -> float:
  """The analytic matmul FLOPs of a step: every layer, the masked-LM transform + decoder and the pooler + NSP head."""
  H, V = cfg.hidden_size, cfg.vocab_size
  heads = 2 * B * P * (H * H + H * V) + 2 * B * H * (H + 2)
  return cfg.num_hidden_layers * layer_flops(cfg, B, S, train) + (3.0 if train else 1.0) * heads


def published(platform: str) -> dict | None:
  """tinycorp's published v5.0 figures of the system of this name (tools/record_published_steps.py), or None."""
  data = json.loads(PUBLISHED.read_text())
  return {"commit": data["commit"], **data["systems"][platform]} if platform in data["systems"] else None


def _line(points: list[dict], key, depth: int, depths: tuple[int, ...]):
  """The value of `key` (a function of one measurement) at `depth`: measured, or on the line through two depths."""
  vals = [key(p) for p in points]
  if len(depths) == 1: return vals[0]
  (a, b), (da, db) = vals, depths
  if isinstance(a, dict): return {k: round(a[k] + (b[k] - a[k]) * (depth - da) / (db - da)) for k in a}
  return round(a + (b - a) * (depth - da) / (db - da))


def tinygrad_prediction(record: dict, depth: int = 24, target: str = "CUDA:sm_89") -> dict[str, Any]:
  """What a dress of tinygrad's own step says of one device at `depth` layers (`record`: tools/dress_tinygrad.py's
  JSON, two depths): each figure on the line through the most any device holds at each depth, and the worst moment
  (a step's peak) against the usable memory of `target`'s card; `worst_each_device`: the same worst moment from each
  device's own line (the devices' differences at the measured depths, which move between depths, grow along it)."""
  points = record["points"]
  depths = tuple(p["layers"] for p in points)
  keys = [k for k in ("persistent", "train_peak", "between", "eval_peak", "train_after_eval_peak") if all(k in p for p in points)]
  mem = {k: _line(points, lambda p, k=k: max(p[k].values()), depth, depths) for k in keys}
  peaks = [k for k in keys if k.endswith("_peak")]
  worst = max(mem[k] for k in peaks)
  each = max(max(_line(points, lambda p, k=k: p[k], depth, depths).values()) for k in peaks)
  card = CARDS[target]
  return {"memory": mem, "worst": worst, "worst_each_device": each, "card": card.name, "usable": card.usable,
          "spare": card.usable - worst, "fits": worst <= card.usable}


def summarize(setup, cfg, points: list[dict], seq: int, pred: int, bs_points: list[dict] | None = None
              ) -> dict[str, Any]:
  """The dress's answer: figures at the config's depth (extrapolated from two depths, or the one measured)."""
  s, depths = setup.settings, setup.depths
  depth = setup.full_depth if len(depths) == 2 else depths[0]
  at = lambda key: _line(points, key, depth, depths)
  mem = {k: at(lambda p, k=k: p[k]) for k in ("persistent", "train_peak", "between", "eval_peak", "train_after_eval_peak")}
  peak = {d: max(mem[k][d] for k in ("train_peak", "eval_peak", "train_after_eval_peak")) for d in mem["persistent"]}
  card = CARDS.get(setup.target)
  tr = {k: at(lambda p, k=k: p["train"][k]) for k in ("kernels", "copies", "copy_bytes", "flops", "bytes", "kernels_per_device")}
  ev = {k: at(lambda p, k=k: p["eval"][k]) for k in ("kernels", "copies", "copy_bytes", "flops", "bytes", "kernels_per_device")}
  tr["programs"], ev["programs"] = points[-1]["train"]["programs"], points[-1]["eval"]["programs"]
  full = dataclasses.replace(cfg, num_hidden_layers=depth)
  tr["analytic_flops"] = step_flops(full, s.batch_size, seq, pred)
  ev["analytic_flops"] = step_flops(full, s.eval.batch_size, seq, pred, train=False)
  out: dict[str, Any] = {
    "platform": setup.platform, "target": setup.target, "compiler": setup.compiler.describe,
    "devices": s.gpus, "device": s.tinygrad.dev, "batch_size": s.batch_size, "eval_batch_size": s.eval.batch_size,
    "float": s.float_type, "sum_dtype": s.tinygrad.sum_dtype, "loss_scaler": s.optimizer.loss_scaler,
    "free_intermediate": s.free_intermediate, "parallel": s.tinygrad.parallel, "beam": 0,
    "seq": seq, "predictions": pred, "layers": depth, "config_layers": setup.full_depth,
    "measured_layers": list(depths), "extrapolated": len(depths) == 2,
    "how": (f"measured at {depths[0]} and {depths[1]} layers, extrapolated linearly to {depth}" if len(depths) == 2
            else f"measured at {depth} layers" + ("" if depth == setup.full_depth else
                                                  f" (the config has {setup.full_depth}: figures of a {depth}-layer model)")),
    "memory": {**mem, "peak": peak}, "train": tr, "eval": ev, "notes": list(setup.notes),
    "per_layer": _per_layer(points, depths, cfg, s, seq) if len(depths) == 2 else None,
    "measurements": points,
  }
  if card:
    worst = max(peak.values())
    out["card"] = {"name": card.name, "memory": card.memory, "margin": card.margin, "usable": card.usable,
                   "tflops": card.tflops, "gbps": card.gbps}
    out["fits"] = worst <= card.usable
    per_dev_flops, per_dev_bytes = tr["flops"] / s.gpus, tr["bytes"] / s.gpus
    out["roofline_ms"] = round(1e3 * max(per_dev_flops / (card.tflops * 1e12), per_dev_bytes / (card.gbps * 1e9)), 1)
    if bs_points: out["largest_batch_size"] = _largest(setup, bs_points, peak, card, depth)
  else:
    out["card"], out["fits"], out["roofline_ms"] = None, None, None
  pub = published(setup.platform)
  if pub:
    samples = pub["steps_to_target"] * pub["global_batch_size"]
    steps = -(-samples // s.batch_size)
    out["published"] = {"system": setup.platform, "step_ms": pub["step_ms"], "global_batch_size": pub["global_batch_size"],
                        "steps_to_target": pub["steps_to_target"], "source": f"training_results_v5.0 {pub['commit'][:10]}",
                        "run_min": round(pub["steps_to_target"] * pub["step_ms"] / 6e4, 1)}
    out["steps_to_target"] = steps
    if out["roofline_ms"]: out["roofline_run_min"] = round(steps * out["roofline_ms"] / 6e4, 1)
  return out


def _per_layer(points, depths, cfg, s, seq) -> dict[str, Any]:
  """One layer's share (the difference of the two depths over the layers between them) beside the analytic count."""
  n = depths[1] - depths[0]
  d0 = points[0]["devices"][0]
  diff = lambda f: (f(points[1]) - f(points[0])) / n
  return {"persistent_bytes": diff(lambda p: p["persistent"][d0]), "analytic_persistent_bytes": 12 * layer_params(cfg),
          "train_flops": diff(lambda p: p["train"]["flops"]), "analytic_train_flops": layer_flops(cfg, s.batch_size, seq),
          "eval_flops": diff(lambda p: p["eval"]["flops"]),
          "analytic_eval_flops": layer_flops(cfg, s.eval.batch_size, seq, train=False),
          "train_peak_bytes": diff(lambda p: p["train_peak"][d0])}


def _largest(setup, bs_points, peak, card: Card, depth: int) -> int:
  """The largest BS (a multiple of GPUS) whose peak, on the line through the two measured batch sizes, fits."""
  worst = lambda r: max(r["memory"]["peak"].values())
  (a, b) = bs_points
  return largest_fitting((a["batch_size"], b["batch_size"]), (worst(a), worst(b)), card.usable, setup.settings.gpus)


def gb(n: float) -> str: return f"{n / 1e9:.2f} GB"


def format_table(r: dict[str, Any]) -> str:
  """One screen: the setting, memory a device against the card, counts, FLOPs, bytes, time."""
  m, tr, ev = r["memory"], r["train"], r["eval"]
  d0 = next(iter(m["peak"]))
  lines = [f"dress of {r['platform']}: {r['devices']} x {r['target']} on tinygrad's NULL device, "
           f"BS {r['batch_size']}, EVAL_BS {r['eval_batch_size']}, {r['float']} (SUM_DTYPE {r['sum_dtype']}), "
           f"seq {r['seq']}, {r['predictions']} predictions, BEAM 0, FREE_INTERMEDIATE {r['free_intermediate']}",
           f"  {r['how']}", f"  compiler: {r['compiler']}"]
  lines += [f"  note: {n}" for n in r["notes"]]
  card = r["card"]
  lines.append("memory a device (the most any device holds)" + (
    f"      card {card['name']}: {gb(card['memory'])}, margin {gb(card['margin'])}, usable {gb(card['usable'])}" if card else ""))
  for label, key in (("persistent state (weights, LAMB, RNG)", "persistent"), ("train-step peak", "train_peak"),
                     ("between the steps", "between"), ("eval-step peak", "eval_peak"),
                     ("train step after an eval", "train_after_eval_peak"), ("peak", "peak")):
    v = max(m[key].values())
    share = f"  {100 * v / card['memory']:5.1f} % of the card" if card else ""
    lines.append(f"  {label:40s} {gb(v):>10s}{share}")
  if r["fits"] is not None:
    lines.append(f"fits: {'yes' if r['fits'] else 'NO'}" + (f" (largest BS that fits: {r['largest_batch_size']})"
                                                             if "largest_batch_size" in r else ""))
  lines.append(f"{'step':8s} {'kernels/dev':>11s} {'programs':>8s} {'copies':>7s} {'copied':>10s} {'TFLOP':>8s} "
               f"{'analytic':>8s} {'GB moved':>9s}")
  for name, x in (("train", tr), ("eval", ev)):
    lines.append(f"{name:8s} {x['kernels_per_device'][d0]:>11,} {x['programs']:>8,} {x['copies']:>7,} "
                 f"{gb(x['copy_bytes']):>10s} {x['flops'] / 1e12:>8.2f} {x['analytic_flops'] / 1e12:>8.2f} "
                 f"{x['bytes'] / 1e9:>9.1f}")
  if r["roofline_ms"] is not None:
    lines.append(f"roofline floor of a train step on {card['name']}'s peaks ({card['tflops']} TFLOPS, {card['gbps']:.0f} GB/s): "
                 f"{r['roofline_ms']} ms")
  step = (r.get("cost") or {}).get("step")
  if step:
    lines.append(f"predicted train step (cost/ model, {step['sources']}): {step['ms']:.1f} ms, band "
                 f"{step['low_ms']:.1f}-{step['high_ms']:.1f} ms" + _beside(r, step["ms"]))
    if step["held_out"] != 1.0:
      lines.append(f"  from sources alone {step['source_only_ms']:.1f} ms x {step['held_out']} (the other systems' "
                   f"measured / predicted, HELD_OUT)" + _beside(r, step["source_only_ms"]))
    else: lines.append("  from sources alone (no held-out factor for this card's rates, HELD_OUT in hardware.py)")
    lines.append("  " + ", ".join(f"{k} {v:.1f}" for k, v in step["breakdown_ms"].items()) + " ms; " + step["critical_path"])
  if r.get("published"):
    p = r["published"]
    lines.append(f"published ({p['source']}): {p['system']} {p['step_ms']} ms a step at BS {p['global_batch_size']}, "
                 f"{p['steps_to_target']:,} steps to the target: {p['run_min']} min of steps")
    if r.get("roofline_run_min") is not None:
      lines.append(f"this platform: {r['steps_to_target']:,} steps at BS {r['batch_size']} x the roofline floor = "
                   f"{r['roofline_run_min']} min at the very least")
  return "\n".join(lines)


def _beside(r: dict[str, Any], ms: float) -> str:
  """tinycorp's measured step beside the prediction, where the published system ran this batch size."""
  p = r.get("published")
  if not p or p["global_batch_size"] != r["batch_size"]: return ""
  return f"; tinycorp measured {p['step_ms']} ms ({100 * (ms / p['step_ms'] - 1):+.1f} %)"


def format_timelines(r: dict[str, Any]) -> str:
  """`dress --timeline`: each step's memory plan on the device that holds most, at the deepest depth measured."""
  from mlperf_bert.train.dress.timeline import format_timeline
  m = max(r["measurements"], key=lambda p: p["layers"])
  tl = m.get("timeline") or {}
  head = f"where the memory goes at {m['layers']} layers, BS {m['batch_size']} (train/jitmem.py plans it):"
  return "\n".join([head] + [format_timeline(step, tl["device"], tl[step]) for step in ("train", "eval") if step in tl])


def largest_fitting(bs_points: tuple[int, int], peaks: tuple[float, float], usable: float, gpus: int) -> int:
  """The largest multiple of `gpus` whose peak, on the straight line through two (BS, peak) points, is at most
  `usable` (0: none)."""
  (b1, b2), (p1, p2) = bs_points, peaks
  slope = (p1 - p2) / (b1 - b2)
  if slope <= 0: return b1
  best = int((usable - p2) / slope + b2)
  return max(0, best // gpus * gpus)

"""A received submission's logged time against the cost model's predicted band (mlperf_bert/train/cost/band.py).

    check_step_band(audit, org_dir, system, logs)

When systems/<system>.json names cards the model knows (audit/cards.py: the cards and count of one of CARD_PLATFORMS's
platforms/<name>/system.json, tinycorp's boxes, however the name is spelled), each log is held to that platform's band
at its global_batch_size (band_at: the recorded prediction, else one the model gives at that batch), from what an
edit of the times cannot dodge, the samples it trained (audit/run_time.py):
  - each eval event's step_num must be its eval's samples (epoch_num) over global_batch_size: a mismatch FAILs, naming
    the event; the steps are counted from the samples either way, and a log without step_num is held alike;
  - its eval intervals (an eval_stop to the next eval_start: only train steps run between them): their LOW_QUANTILE
    step time below the band's low edge FAILs, so squeezing more than one interval in ten shows;
  - the whole run, run_start to run_stop: its trained steps at the band's low edge, each eval's samples at the
    predicted eval step's low edge, and the least warm-up any published run of the platform had
    (resources/published/tinycorp-runs.json, tools/record_published_runs.py) add up to its floor; a run
    shorter FAILs: squeezing any part (the warm-up, the evals, the first interval) shows in the total. The warm-up is
    tinygrad's: a system whose framework is not tinygrad (other makers' 8 x MI300X) counts none.
A received log of a published submission's software on its box (the system.json's `framework` names the software of
one of tinycorp's published submissions of that platform, at a published batch: audit/published_runs.py) is held
closer, to those runs: the fastest published run's LOW_QUANTILE interval step less the spread of one box's machines
(4.7 %, tinybox_red v5.0) takes the band's low edge's place in both checks. A tinygrad log whose software no published
run had is held to the model's band alone, and a WARN says so.
A time under its floor is a log that trains faster than its hardware can. What it cannot prove: a run of unpublished
software up to the band's width faster than the real one (the band's low edge is the prediction's -15 %: x0.88 of
tinycorp's v5.0 green logs with their `framework` renamed passes it, with that WARN; docs/audit.md), and the time of
cards the model does not know: a tinygrad submission naming such cards, or cards near a known one (another card or
count), is a WARN "time on trust"; other systems are not held (no row).
"""
from __future__ import annotations
import dataclasses
from pathlib import Path

from mlperf_bert.audit.cards import Cards, match_cards
from mlperf_bert.audit.logs import MLPerfLog
from mlperf_bert.audit.rows import Audit, shorten
from mlperf_bert.audit.published_runs import PUBLISHED_RUNS, Floor, least_warmup, published_floor
from mlperf_bert.audit.run_time import (LOW_QUANTILE, interval_steps, log_evals, low_quantile, step_mismatches,
                                        trained_steps)
from mlperf_bert.audit.times import FASTER, TIME
from mlperf_bert.audit.untrusted import read_untrusted_json
from mlperf_bert.constants import EVAL_SAMPLES, REPO
from mlperf_bert.train.cost.band import PREDICTED, Band, read_predictions, step_band

SCALED = ("matmul", "other", "copies")   # the parts of a predicted step that grow with the batch (the kernels' work)


@dataclasses.dataclass(frozen=True)
class RunBand:
  """A platform's band at one global batch, how it was had, and its eval step's low edge per sample (ms)."""
  band: Band
  how: str              # '' when recorded; else in words (from the model, or interpolated)
  eval_low_ms: float    # a sample's eval at the eval step's low edge


def _entries(platform: str, path: Path) -> list[dict]:
  data = read_predictions(path)
  return [p for p in (data or {}).get("predictions", []) if p["platform"] == platform]


def _eval_low(e: dict) -> float:
  return e["eval_step_ms"] / e["eval_bs"] * e["low_ms"] / e["step_ms"]


def band_at(platform: str, bs: int, path: Path = PREDICTED) -> RunBand | None:
  """The band of `platform` at global batch `bs`: the recorded prediction; else the model's at that batch, from the
  recorded prediction nearest in batch whose breakdown is on record (its kernels' time in proportion to the batch, the
  all-reduce and the launch and host time unchanged, as tools/record_step_predictions.py scales a batch it did not
  dress); else per sample between the two recorded batches nearest (one alone: in proportion below it, its own step
  above it, as a larger batch's step is no faster). The band's edges keep the prediction's ratios. None: no entry."""
  es = _entries(platform, path)
  if not es: return None
  got = step_band(platform, bs, path)
  near = min(es, key=lambda e: (abs(e["global_bs"] - bs), e["global_bs"]))
  if got is not None: return RunBand(got, "", _eval_low(near))
  shown = step_band(platform, near["global_bs"], path).source
  with_parts = [e for e in es if isinstance(e.get("breakdown_ms"), dict) and sum(e["breakdown_ms"].values()) > 0]
  if with_parts:
    e = min(with_parts, key=lambda e: (abs(e["global_bs"] - bs), e["global_bs"]))
    bd, f = e["breakdown_ms"], bs / e["global_bs"]
    step = sum(v * f if k in SCALED else v for k, v in bd.items()) * e["step_ms"] / sum(bd.values())
    how = (f"from the model at BS {bs}: the prediction at BS {e['global_bs']} with its kernels x {bs}/{e['global_bs']}"
           ", the all-reduce, launch and host time unchanged (no prediction recorded at this batch)")
  else:
    e = near
    two = sorted(es, key=lambda x: (abs(x["global_bs"] - bs), x["global_bs"]))[:2]
    if len(two) == 2 and two[0]["global_bs"] != two[1]["global_bs"]:
      (b0, s0), (b1, s1) = sorted((x["global_bs"], x["step_ms"]) for x in two)
      step = s0 + (s1 - s0) / (b1 - b0) * (bs - b0)
      how = (f"{'interpolated' if b0 < bs < b1 else 'extrapolated'} per sample from the predictions at BS {b0} and "
             f"{b1} (no prediction recorded at this batch, nor a breakdown to scale)")
    else:
      step = e["step_ms"] * min(bs / e["global_bs"], 1.0)
      how = f"scaled per sample from the prediction at BS {e['global_bs']}, the only one (none recorded at this batch)"
    step = max(step, e["step_ms"] * min(bs / e["global_bs"], 1.0))   # never under the proportion of a recorded step
  r_lo, r_hi = e["low_ms"] / e["step_ms"], e["high_ms"] / e["step_ms"]
  band = Band(platform, bs, step, step * r_lo, step * r_hi, shown)
  return RunBand(band, how, _eval_low(e))


def _eval_samples(lg: MLPerfLog) -> int:
  es = lg.eval_samples
  return es if isinstance(es, int) and not isinstance(es, bool) and es > 0 else EVAL_SAMPLES


def hold_log(lg: MLPerfLog, bs: int, rb: RunBand, platform: str, warmup: Path | None,
             floor: Floor | None = None) -> tuple[list[str], dict] | None:
  """The findings (FAIL reasons) of one log held to its band, and its figures; None when nothing can be held (no
  samples on its evals, or no interval and no run_start / run_stop). warmup None: none counted (not tinygrad's).
  floor: the published runs' floor of its software, held instead of the band's low edge where it is higher."""
  evals = log_evals(lg, bs)
  bad = step_mismatches(evals, bs)
  out = [f"{len(bad)} eval event(s) whose step_num is not their eval's samples over global_batch_size: "
         f"{shorten(bad, 2)}; the steps are counted from the samples"] if bad else []
  per, steps, low = interval_steps(evals), trained_steps(evals), rb.band.low_ms
  how = f" ({rb.how})" if rb.how else ""
  held, edge = f"{rb.band.describe()}{how}", "the band's low edge"
  if floor is not None and floor.step_ms > low:
    low, edge = floor.step_ms, "the published runs' floor"
    held = f"held to tinycorp's {floor.said}, above the model's band ({held})"
  fig: dict = {}
  if per:
    fig["q"] = q = low_quantile(per, LOW_QUANTILE)
    if q < low:
      out.append(f"{q:.1f} ms a step in its eval intervals (the {LOW_QUANTILE:g} quantile of its {len(per)}, each "
                 f"an eval_stop to the next eval_start, its steps from the samples); {held}: {FASTER}")
  if steps is not None and lg.run_start_ms is not None and lg.run_stop_ms is not None:
    w, w_from = least_warmup(platform, warmup) if warmup else (0.0, "its framework is not tinygrad: none counted")
    es = _eval_samples(lg)
    ev_s = es * rb.eval_low_ms / 1000
    least = steps * low / 1000 + len(evals) * ev_s + w
    have = (lg.run_stop_ms - lg.run_start_ms) / 1000
    fig["ratio"] = have / least
    if have < least:
      out.append(f"run_start to run_stop {have / 60:.2f} min; its {steps:.0f} steps (the last eval's epoch_num over "
                 f"global_batch_size {bs}) at {edge} ({low:.1f} ms), its {len(evals)} evals of {es} "
                 f"samples at the eval step's low edge ({ev_s:.1f} s each) and a warm-up of {w:.0f} s ({w_from}) take "
                 f"no less than {least / 60:.2f} min; {held}: {FASTER}")
  if fig: fig["published"] = low != rb.band.low_ms
  return (out, fig) if fig or out else None


def _untrusted(audit: Audit, system: str, cards: Cards) -> None:
  """The WARN of cards the model does not know, where it is worth saying: near a known card, or a tinygrad system."""
  said = f"{cards.describe()} in systems/{system}.json"
  if cards.near:
    audit.add("WARN", TIME, system, f"{said} (card '{cards.key}') is near cards the cost model predicts ({cards.near}) "
              "but is not them (another card or count): time on trust, its step times are held to no band")
  elif cards.tinygrad:
    audit.add("WARN", TIME, system, f"{said}: a tinygrad submission whose cards the cost model does not know (it "
              "predicts tinybox_green, tinybox_red and tinybox_8xMI300X): time on trust, its step times are held to no "
              "band")


def check_step_band(audit: Audit, org_dir: Path, system: str, logs: list[MLPerfLog], repo: Path = REPO,
                    predicted: Path = PREDICTED, published: Path = PUBLISHED_RUNS) -> None:
  """The `time` rows of one results/<system>/ (see the module doc)."""
  desc, why = read_untrusted_json(org_dir / "systems" / f"{system}.json", org_dir)
  cards = None if why else match_cards(desc, repo)
  if cards is None:   # no readable description (its own row says so), or no accelerator named
    if not why and isinstance(desc, dict) and "tinygrad" in str(desc.get("framework", "")).lower():
      audit.add("WARN", TIME, system, f"systems/{system}.json names no accelerator_model_name: a tinygrad submission "
                "whose cards the cost model does not know: time on trust, its step times are held to no band")
    return
  platform = cards.platform
  if platform is None:
    _untrusted(audit, system, cards); return
  said = f"{cards.describe()} in systems/{system}.json"
  framework = desc.get("framework") if cards.tinygrad else None
  held, none, fails, bands, floors = [], [], 0, {}, {}
  for lg in logs:
    if lg.unread or lg.path is None: continue
    bs = lg.global_batch_size
    if isinstance(bs, bool) or not isinstance(bs, int) or bs <= 0:
      none.append(lg.path.name); continue
    rb = bands[bs] if bs in bands else bands.setdefault(bs, band_at(platform, bs, predicted))
    if rb is None:
      none.append(lg.path.name); continue
    if bs not in floors: floors[bs] = published_floor(platform, framework, bs, published) if framework else None
    got = hold_log(lg, bs, rb, platform, published if cards.tinygrad else None, floors[bs])
    if got is None:
      none.append(lg.path.name); continue
    found, fig = got
    for f in found:
      audit.add("FAIL", TIME, f"{system}/{lg.path.name}", f"{f} (its {said})")
    fails += bool(found)
    if not found: held.append((lg.path.name, fig, rb, bs))
  if held:
    qs = [h[1]["q"] for h in held if "q" in h[1]]
    rs = [h[1]["ratio"] for h in held if "ratio" in h[1]]
    said_bands = "; ".join(dict.fromkeys(h[2].band.describe() + (f" ({h[2].how})" if h[2].how else "") for h in held))
    pub = {bool(h[1].get("published")) for h in held}
    edge = " or ".join(e for e, on in (("the published runs' floor", True), ("the band's low edge", False)) if on in pub)
    parts = ([f"their eval intervals' {LOW_QUANTILE:g}-quantile steps, {min(qs):.1f}-{max(qs):.1f} ms, hold {edge}"]
             if qs else []) + ([f"their whole runs are {min(rs):.2f}-{max(rs):.2f}x their floor (the steps at {edge}, "
                                "the evals at the eval step's low edge, the least published warm-up)"] if rs else [])
    pubs = "; ".join(dict.fromkeys(floors[h[3]].said for h in held if h[1].get("published")))
    audit.add("PASS", TIME, system, f"{'the other ' if fails else ''}{len(held)} log(s), steps from the samples: "
              f"{'; '.join(parts)}; the band predicted for its {said}: {said_bands}"
              + (f"; held to tinycorp's {pubs}" if pubs else ""))
  unpublished = sorted({h[3] for h in held if floors.get(h[3]) is None})
  if framework and unpublished:
    b = bands[unpublished[0]].band
    audit.add("WARN", TIME, system, f"no published run of {platform} ({Path(published).name}) has the software "
              f"systems/{system}.json names ('{str(framework)[:80]}') at BS {', '.join(map(str, unpublished))}: its "
              f"logs' steps are held to the cost model's band alone, whose low edge (-{1 - b.low_ms / b.step_ms:.0%}) "
              "a log up to that much faster than its real run passes")
  if none:
    audit.add("WARN", TIME, system, f"{len(none)} log(s) without samples (epoch_num) on their evals, without a "
              f"numeric global_batch_size, or without an interval and run_start / run_stop ({shorten(none)}): their "
              f"time is not held to {platform}'s band")

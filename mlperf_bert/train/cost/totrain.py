"""Time to train (mlperf_bert/train/cost/): a predicted step time turned into what the MLPerf clock shows from
run_start to run_stop, with the steps to the target from MLCommons' RCP and from tinycorp's published runs.

    steps = steps_to_target("tinybox_green", global_bs=96, eval_step_freq=1562)
    ttt = time_to_train(380.6, 90.7, steps.steps, eval_step_freq=1562, eval_batches=105,
                        warmup_s=warmup("tinybox_green").seconds)

The clock: warm-up + steps x step + evals x eval batches x eval step (+ EVAL_OVERHEAD_S an eval).
- **Steps to the target.** MLCommons' RCP for BERT at the global batch, as mlperf-logging's rcp_checker finds it
  (pruned RCPs, as package_checker and the audit run it: the record of that batch, the line between the records
  either side, or below the smallest batch the smallest record): its olympic mean samples over the batch, rounded up
  to a whole eval (a run stops at the eval that reaches the target). The score never counts fewer: when a
  submission's runs converge faster than the RCP mean, the rcp_checker's scaling.json scales the score up to it.
  tinycorp's BERT converges slower than the reference: its published v5.0 runs (resources/published/
  tinycorp-v5.0-bert.json) took 1.26 (green, red at BS 96) and 1.33 (MI300X at 1024) times the RCP mean samples of
  their batch. The RCP's samples at this batch x that factor, the median over the *other* systems (the convergence
  is the code's, not the card's; the system predicted is left out), as steps: where it is more than the RCP's, that
  is the steps (a mean over runs, whose evals are already counted in it).
- **The evals**: one every EVAL_STEP_FREQ steps, each ceil(10,000 / EVAL_BS) batches of the eval step.
  EVAL_OVERHEAD_S = 0: tinygrad's eval loop (examples/mlperf/model_train.py at e0139fa, the loop between eval_start and
  eval_stop) runs nothing but the eval steps, four .item() reads a batch and the next batch's load; the predicted eval
  step is to carry its launches and host time.
- **The warm-up**: what a run spends once inside the clock (the weights loaded, both steps' JIT capture from the INIT
  phase's kernel cache, the first eval's capture), estimated from tinycorp's v5.0 logs
  (resources/published/tinycorp-v5.0-overheads.json, tools/record_published_overheads.py): the median of the *other*
  systems' figures (the system predicted left out), their lowest and highest as its band.
- **The band** says what a prediction cannot know: the seeds (the olympic mean of 10 runs over a spread of
  convergence: +-2 standard errors of a mean of 8 runs from the source's spread), the step's own band and the
  warm-up's.
"""
from __future__ import annotations
import functools, json, math, statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlperf_bert.constants import EVAL_SAMPLES, RULESET

PUBLISHED_DIR = Path(__file__).resolve().parents[3] / "resources" / "published"
STEPS_FILE = PUBLISHED_DIR / "tinycorp-v5.0-bert.json"          # tools/record_published_steps.py
OVERHEADS_FILE = PUBLISHED_DIR / "tinycorp-v5.0-overheads.json"  # tools/record_published_overheads.py
EVAL_OVERHEAD_S = 0.0   # an eval's wall outside its steps: none (tinygrad's eval loop, see above)
KEPT = 8                # runs an olympic mean of MLPerf's 10 BERT runs keeps (rcp_checker: submission_runs, less 2)
# tinycorp's official v5.0 scores (minutes), which the audit reproduces from the same logs (docs/audit.md;
# tests/fixtures/audit-calibration.json: audit_score, scaling factor 1 for all three)
OFFICIAL_V50_MIN = {("tinybox_green", 96): 213.60, ("tinybox_red", 96): 300.51, ("tinybox_8xMI300X", 1024): 111.84}


@dataclass(frozen=True)
class Steps:
  steps: float           # steps to the target (the RCP's in whole evals, or a mean over runs: see above)
  low: float
  high: float
  rcp_steps: float       # the RCP's, rounded up to a whole eval
  published_steps: float | None   # the RCP's x the other systems' convergence factor (None: no other system)
  own_steps: float | None         # the system's own published median (beside, never used)
  how: str


@dataclass(frozen=True)
class Warmup:
  seconds: float
  low: float
  high: float
  how: str


@functools.lru_cache(maxsize=4)
def _checker(ruleset: str):
  from mlperf_logging.rcp_checker import rcp_checker
  return rcp_checker.RCP_Checker("training", ruleset, "bert", False)


def rcp_samples(global_bs: int, ruleset: str = RULESET) -> tuple[float, float, str]:
  """(mean samples, their standard deviation over seeds, which record) of MLCommons' BERT RCP at `global_bs`, found
  as mlperf-logging's rcp_checker.check_directory finds it (pruned RCPs)."""
  c = _checker(ruleset)
  rec = c._find_rcp(global_bs, "pruned_rcps")
  if rec is not None: return float(rec["RCP Mean"]), float(rec["RCP Stdev"]), f"RCP at BS {global_bs}"
  lo, hi = c._find_top_min_rcp(global_bs, "pruned_rcps"), c._find_bottom_max_rcp(global_bs, "pruned_rcps")
  if lo is not None and hi is not None:
    _, r = c._create_interp_rcp(global_bs, lo, hi)
    return float(r["RCP Mean"]), float(r["RCP Stdev"]), f"RCP interpolated between BS {lo['BS']} and {hi['BS']}"
  if hi is not None:
    r = c._find_min_rcp("pruned_rcps")
    return float(r["RCP Mean"]), float(r["RCP Stdev"]), f"RCP of the smallest batch, BS {r['BS']} (none below {global_bs})"
  r = max(c.pruned_rcp_data.values(), key=lambda x: x["BS"])
  return float(r["RCP Mean"]), float(r["RCP Stdev"]), f"RCP of the largest batch, BS {r['BS']} (none above {global_bs}: " \
    "the rcp_checker asks for one)"


def _olympic(xs: list[float]) -> float:
  """The mean without the lowest and the highest, as MLPerf scores BERT's 10 runs (audit/logs.py's olympic_mean;
  the train wing does not import the audit)."""
  xs = sorted(xs)
  return statistics.fmean(xs[1:-1] if len(xs) > 2 else xs)


def _whole_evals(steps: float, freq: int) -> float:
  return math.ceil(steps / freq - 1e-9) * freq


def convergence_factors(exclude: str, path: Path = STEPS_FILE, ruleset: str = RULESET) -> dict[str, tuple[float, float]]:
  """Each published system but `exclude`: (its runs' olympic mean samples to the target over the RCP mean at its
  batch, their standard deviation over the same RCP mean): how much slower than the reference tinygrad's BERT
  converged there."""
  out = {}
  for name, v in json.loads(Path(path).read_text())["systems"].items():
    runs = [r["steps_to_target"] * v["global_batch_size"] for r in v["runs"] if r["steps_to_target"]]
    if name == exclude or not runs: continue
    ref = rcp_samples(v["global_batch_size"], ruleset)[0]
    out[name] = (_olympic(runs) / ref, statistics.pstdev(runs) / ref)
  return out


def steps_to_target(platform: str, global_bs: int, eval_step_freq: int, path: Path = STEPS_FILE,
                    ruleset: str = RULESET) -> Steps:
  """The steps `platform` takes to MLPerf's target at `global_bs`: the larger of the RCP's and the RCP's times the
  other systems' convergence factor (see the module's docstring), with a band of +-2 standard errors of an olympic
  mean of 8 runs."""
  mean, sd, rcp_how = rcp_samples(global_bs, ruleset)
  rcp = _whole_evals(mean / global_bs, eval_step_freq)
  rcp_text = f"{rcp_how}: {mean:,.0f} samples = {rcp:,.0f} steps (whole evals)"
  systems = json.loads(Path(path).read_text())["systems"]
  own = systems[platform]["steps_to_target"] if platform in systems and \
    systems[platform]["global_batch_size"] == global_bs else None
  factors = convergence_factors(platform, path, ruleset)
  if factors:
    factor = statistics.median(f for f, _ in factors.values())
    spread = statistics.median(s for _, s in factors.values())
    pub = factor * mean / global_bs
    pse = 2 * spread * mean / math.sqrt(KEPT) / global_bs
    each = ", ".join(f"{n} {f:.3f}" for n, (f, _) in factors.items())
    how = (f"the {rcp_text}, x {factor:.3f}: tinycorp's published v5.0 runs of {each} (olympic mean samples over the RCP "
           f"mean at their batch; the system predicted left out) = {pub:,.0f} steps")
    if pub > rcp: return Steps(pub, max(rcp, pub - pse), pub + pse, rcp, pub, own, how)
    rcp_text = how + "; faster than the RCP: the score is scaled up to it"
  else:
    pub = None
  se = 2 * sd / math.sqrt(KEPT) / global_bs
  return Steps(rcp, _whole_evals(mean / global_bs - se, eval_step_freq), _whole_evals(mean / global_bs + se, eval_step_freq),
               rcp, pub, own, rcp_text)


def warmup(platform: str, path: Path = OVERHEADS_FILE) -> Warmup:
  """The warm-up inside the clock: the median of the other systems' published figures (all three for a platform
  tinycorp did not publish), their lowest and highest as the band."""
  systems = json.loads(Path(path).read_text())["systems"]
  used = {n: v["warmup_s"] for n, v in systems.items() if n != platform}
  vals = list(used.values())
  return Warmup(statistics.median(vals), min(vals), max(vals),
                f"median of tinycorp's v5.0 {', '.join(used)} ({', '.join(f'{v:.0f}' for v in vals)} s), "
                f"{'leaving out ' + platform if platform in systems else 'all systems'} (tools/record_published_overheads.py)")


def batches_an_eval(eval_bs: int, samples: int = EVAL_SAMPLES) -> int:
  """Batches an eval runs: ceil(10,000 / EVAL_BS) (train_bert's MAX_EVAL_STEPS)."""
  return -(-samples // eval_bs)


def time_to_train(step_ms: float, eval_step_ms: float, steps: float, *, eval_step_freq: int, eval_batches: int,
                  warmup_s: float, eval_overhead_s: float = EVAL_OVERHEAD_S) -> dict[str, float]:
  """Minutes from run_start to run_stop, and its parts: `steps` train steps of `step_ms`, one eval every
  `eval_step_freq` steps of `eval_batches` eval steps of `eval_step_ms` (+ `eval_overhead_s`), and the warm-up."""
  evals = steps / eval_step_freq
  parts = {"steps_min": steps * step_ms / 6e4, "evals_min": evals * (eval_batches * eval_step_ms / 1e3 + eval_overhead_s) / 60,
           "warmup_min": warmup_s / 60}
  return {"minutes": sum(parts.values()), "evals": evals, **parts}


def predict(platform: str, global_bs: int, eval_bs: int, eval_step_freq: int, step: tuple[float, float, float],
            eval_step: tuple[float, float, float], steps_file: Path = STEPS_FILE,
            overheads_file: Path = OVERHEADS_FILE) -> dict[str, Any]:
  """The time to train of `platform` at `global_bs` from predicted (ms, low_ms, high_ms) of a train and an eval step:
  the prediction, its band (the low/high of steps, step, eval step and warm-up together), the parts, the sources, and
  tinycorp's official v5.0 score where there is one."""
  st, wu, nb = steps_to_target(platform, global_bs, eval_step_freq, steps_file), warmup(platform, overheads_file), batches_an_eval(eval_bs)
  f = lambda i, n, w: time_to_train(step[i], eval_step[i], n, eval_step_freq=eval_step_freq, eval_batches=nb, warmup_s=w)
  mid = f(0, st.steps, wu.seconds)
  out: dict[str, Any] = {
    "minutes": round(mid["minutes"], 1), "low_minutes": round(f(1, st.low, wu.low)["minutes"], 1),
    "high_minutes": round(f(2, st.high, wu.high)["minutes"], 1),
    "parts_min": {k: round(mid[k], 1) for k in ("steps_min", "evals_min", "warmup_min")},
    "steps": round(st.steps), "steps_low": round(st.low), "steps_high": round(st.high), "rcp_steps": round(st.rcp_steps),
    "published_steps": None if st.published_steps is None else round(st.published_steps),
    "own_published_steps": st.own_steps, "evals": round(mid["evals"], 2), "eval_batches": nb,
    "eval_step_freq": eval_step_freq, "warmup_s": round(wu.seconds, 1), "eval_overhead_s": EVAL_OVERHEAD_S,
    "how": {"steps": st.how, "warmup": wu.how, "eval": f"{nb} batches of EVAL_BS {eval_bs} an eval, one every "
            f"{eval_step_freq} steps; nothing outside the eval steps (tinygrad's eval loop)"},
    "cannot_know": "the seeds (the band's steps: +-2 standard errors of an olympic mean of 8 of 10 runs), the step's "
                   "own band, the warm-up's spread over systems, BEAM's kernels on the box",
    "sources": "mlperf_bert/train/cost/totrain.py",
  }
  official = OFFICIAL_V50_MIN.get((platform, global_bs))
  if official is not None:
    out["official_v50_min"] = official
    out["error_vs_official"] = round(mid["minutes"] / official - 1, 4)
  return out

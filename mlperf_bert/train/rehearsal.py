"""rehearse=true: a platform's whole submission path on this machine's CPU, in minutes.

A rehearsal keeps every setting of the platform (INIT_PROCESS, DEFAULT_FLOAT / SUM_DTYPE, LOSS_SCALER,
FREE_INTERMEDIATE, PARALLEL, NUM_CPU_THREADS, EVAL_METRIC, CACHE_CLEAR, the LAMB settings, the INIT phase's model)
and changes only what a CPU cannot do in minutes (`REHEARSAL` below):
  * DEV=CPU, and the platform's GPUS as that many CPU devices, at most as many as the machine has cores (the
    capped count is said in the job's log);
  * the demo's model size (1 layer, hidden 128, 2 heads, intermediate 512) from a seeded random init, never the
    MLPerf checkpoint (it is BERT-large);
  * BEAM 0 (no kernel search: BEAM=1 already searches every kernel of the step, minutes on a CPU), and so at most
    MAX_INIT_STEPS of the INIT phase's INIT_BENCHMARK_STEPS (the platform's 10 search kernels on the box; at BEAM 0
    the steps after the third, which the JIT replays, repeat it);
  * a training batch of PER_DEVICE_BATCH rows per device (the platform's BERT-large batch would make a CPU step
    take minutes); an eval batch of the platform's rows per device (EVAL_BS / GPUS: 15 on tinybox_green), at most
    MAX_EVAL_PER_DEVICE (8xMI300X's 128), on each CPU device, one eval batch an eval (green's 90 rows on 2 CPU
    devices would be 45 a device, three times the box's, and an eval 9 s instead of 3 on 2 cores);
  * 12 steps with an eval every 4 (three evals), 2 warmup steps and the demo's learning rate 0.01, so the loss
    visibly falls within 12 steps (the platform's MLPerf rate for BERT-large at this batch is ~5e-5);
  * the division open (the log is not a closed-division result) and TARGET 1.0 (never reached: every eval runs);
  * REHEARSAL: the result log says, in a `:::MLLOG` line of key `rehearsal`, that it is a rehearsal and not a
    submission (mlperf-logging's compliance checker accepts the extra key; the audit reads it).
The config's `train:` overrides still apply on top (`check_overrides`: never SUBMISSION_DIVISION closed, never
REHEARSAL), and the notes (`rehearsal_notes`) state the settings the run really has after them. Nothing here imports
tinygrad.
"""
from __future__ import annotations
import os
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.train.settings import Settings

PER_DEVICE_BATCH = 4
MAX_EVAL_PER_DEVICE = 16
MAX_INIT_STEPS = 3
# the train job's Snakemake resources in a rehearsal (the platform's are a GPU box's: 60 GB on tinybox_green)
RESOURCES = {"mem_mb": 4000, "runtime": 30}
REHEARSAL: dict[str, Any] = {
  "DEV": "CPU", "BEAM": 0, "TRAIN_BEAM": None, "EVAL_BEAM": None,
  "BERT_LAYERS": 1, "BERT_HIDDEN_SIZE": 128, "BERT_NUM_HEADS": 2, "BERT_INTERMEDIATE_SIZE": 512,
  "TRAIN_STEPS": 12, "EVAL_STEP_FREQ": 4, "NUM_WARMUP_STEPS": 2, "OPT_BASE_LEARNING_RATE": 0.01,
  "SUBMISSION_DIVISION": "open", "TARGET": 1.0, "CKPT": False, "REHEARSAL": True,
}


def check_overrides(overrides: dict[str, Any] | None, rehearse: bool) -> None:
  """The config's `train:` overrides a rehearsal refuses: a closed division (a rehearsal is never a closed result)
  and REHEARSAL (rehearse=true alone sets it)."""
  over = overrides or {}
  if "REHEARSAL" in over:
    raise UserError("config key train: REHEARSAL is set by rehearse=true alone; remove it from `train:`")
  if rehearse and over.get("SUBMISSION_DIVISION") not in (None, "open"):
    raise UserError(f"rehearse=true with train: SUBMISSION_DIVISION {over['SUBMISSION_DIVISION']!r}: a rehearsal (the "
                    "demo's model on the CPU) is never a closed-division result; remove the override, or drop "
                    "rehearse=true for a real run")


def rehearsal_settings(platform: dict[str, Any], cpus: int | None = None) -> tuple[dict[str, Any], list[str]]:
  """The platform's settings as a rehearsal runs them, and the line that says how its GPUS became CPU devices."""
  cpus = max(1, cpus if cpus is not None else (os.cpu_count() or 1))
  want = int(platform.get("GPUS") or 1)
  gpus = min(want, cpus)
  per_device = max(1, min(int(platform.get("EVAL_BS") or want) // want, MAX_EVAL_PER_DEVICE))
  eval_bs = per_device * gpus
  out = {**platform, **REHEARSAL, "GPUS": gpus, "BS": PER_DEVICE_BATCH * gpus, "EVAL_BS": eval_bs,
         "EVAL_SAMPLES": eval_bs}
  if platform.get("INIT_BENCHMARK_STEPS"):
    out["INIT_BENCHMARK_STEPS"] = min(int(platform["INIT_BENCHMARK_STEPS"]), MAX_INIT_STEPS)
  notes = []
  if gpus < want:
    notes.append(f"rehearsal: GPUS {want} -> {gpus} CPU devices (this machine has {cpus} cores)")
  else:
    notes.append(f"rehearsal: GPUS {want} as {gpus} CPU devices")
  return {k: v for k, v in out.items() if v is not None}, notes


def changed_settings(platform: dict[str, Any], run: Settings, eval_examples: int = 10000) -> list[str]:
  """'KEY platform -> run' for every setting of the run (derived ones included; the run-time knobs that are no rule
  param, e.g. DEBUG, DRESS_TARGET, left out, as the train record leaves them) in which it differs from the platform
  resolved alone for the same seed: whatever changed it, the rehearsal or the config's `train:` overrides."""
  from mlperf_bert.train.hparams import resolve, rule_params
  mine, theirs = rule_params(run), rule_params(resolve(platform, seed=run.seed, eval_examples=eval_examples))
  def show(v: Any) -> str: return "unset" if v is None else f"{v:g}" if isinstance(v, float) else str(v)
  return [f"{k} {show(theirs.get(k))} -> {show(mine.get(k))}" for k in sorted(set(mine) | set(theirs))
          if mine.get(k) != theirs.get(k)]


def rehearsal_notes(platform: dict[str, Any], run: Settings) -> list[str]:
  """What the rehearsal changed, in the settings the run really has (`run`: resolved with the `train:` overrides):
  a summary, then every setting not the platform's (changed_settings). The notes are a param of the train rule: a
  change of their text retrains a rehearsal tree (minutes on a CPU)."""
  o, ev = run.optimizer, run.eval
  name = platform.get("SUBMISSION_PLATFORM", "the platform")
  size = (f"{run.model.layers} layer(s), hidden {run.model.hidden_size}" if run.model.layers else "the initial weights' size")
  return [f"rehearsal of {name} on the CPU: DEV {platform.get('DEV')} -> {run.tinygrad.dev}, BEAM {platform.get('BEAM')} "
          f"-> {run.tinygrad.beam}, model {size}, {o.train_steps} steps with an eval every {ev.step_freq}, BS "
          f"{run.batch_size // max(1, run.gpus)} per device, eval batch {ev.batch_size} ({ev.samples} samples), target "
          f"{ev.target:g}, division {run.submission.division}; the log's `rehearsal` line says it is not a submission; "
          f"every setting not the platform's: {', '.join(changed_settings(platform, run))}; every other setting is the "
          f"platform's"]

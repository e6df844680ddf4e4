"""The resolved settings of one training run as one frozen, typed value (hparams.resolve builds it).

    s = resolve(load_platform("platforms/cpu/platform.yaml"), seed=0)
    s.optimizer.base_lr, s.eval.metric, s.checkpoint.enabled, s.tinygrad.dev, s.global_batch_size

The groups follow the code that reads them: the model's size overrides, the optimizer and its schedule, the eval,
resume checkpoints, the INIT phase, the submission's names, tinygrad's own settings. Every field names the platform
key it holds (schemas/platform.schema.yaml: the keys, their types and defaults); four are derived by resolve (SEED,
GLOBAL_BATCH_SIZE, FLOAT, MAX_EVAL_STEPS). The flat mapping of keys (`as_dict`, `from_dict`) is only for the edges:
the train rule's params, the environment exported to tinygrad, the HParam lines, and the JSON that hands the
resolved value to the INIT and RUN processes on their standard input (`to_json` / `read_json`: the flat keys, read
back as they are, never resolved again; `train --settings FILE` reads the same from a file). Nothing here imports
tinygrad.
"""
from __future__ import annotations
import dataclasses, json, os, sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError

DERIVED = ("SEED", "GLOBAL_BATCH_SIZE", "FLOAT", "MAX_EVAL_STEPS")
JSON_FORMAT = "mlperf-bert resolved settings 1"   # the settings JSON's `format` (to_json, read_json)


def _key(key: str) -> Any:
  return dataclasses.field(metadata={"key": key})


@dataclass(frozen=True)
class ModelSettings:
  """Overrides of bert_config.json and how the model computes (docs/parity.md rows 18, 19)."""
  layers: int | None = _key("BERT_LAYERS")
  hidden_size: int | None = _key("BERT_HIDDEN_SIZE")
  num_heads: int | None = _key("BERT_NUM_HEADS")
  intermediate_size: int | None = _key("BERT_INTERMEDIATE_SIZE")
  disable_dropout: bool = _key("DISABLE_DROPOUT")
  decoder_block: int = _key("DECODER_BLOCK")
  last_layer_rows: bool = _key("LAST_LAYER_ROWS")


@dataclass(frozen=True)
class OptimizerSettings:
  """LAMB, its warmup + polynomial-decay schedule and the fp16 loss scale."""
  base_lr: float = _key("OPT_BASE_LEARNING_RATE")
  beta_1: float = _key("OPT_LAMB_BETA_1")
  beta_2: float = _key("OPT_LAMB_BETA_2")
  epsilon: float = _key("EPSILON")
  weight_decay: float = _key("DECAY")
  poly_power: float = _key("POLY_POWER")
  loss_scaler: float = _key("LOSS_SCALER")
  train_steps: int = _key("TRAIN_STEPS")
  warmup_steps: int = _key("NUM_WARMUP_STEPS")
  gradient_acc_steps: int = _key("GRADIENT_ACC_STEPS")


@dataclass(frozen=True)
class EvalSettings:
  batch_size: int = _key("EVAL_BS")
  step_freq: int = _key("EVAL_STEP_FREQ")
  samples: int = _key("EVAL_SAMPLES")
  metric: str = _key("EVAL_METRIC")
  target: float = _key("TARGET")
  max_steps: int = _key("MAX_EVAL_STEPS")     # derived: ceil(EVAL_SAMPLES / EVAL_BS)
  beam: int | None = _key("EVAL_BEAM")

  @property
  def logged_samples(self) -> int:
    """The samples one eval reads (logged as eval_samples): EVAL_BS * MAX_EVAL_STEPS for the tinygrad metric (as
    train_bert logs it), EVAL_SAMPLES for the pooled one."""
    return self.batch_size * self.max_steps if self.metric == "tinygrad" else self.samples


@dataclass(frozen=True)
class CheckpointSettings:
  enabled: bool = _key("CKPT")
  save_freq: int = _key("SAVE_CKPT_FREQ")
  keep: int = _key("KEEP_CKPT_AMOUNT")
  evidence_freq: int = _key("EVIDENCE_STATE_FREQ")  # the kept states: every N-th eval and the last (train/states.py)


@dataclass(frozen=True)
class InitSettings:
  """The INIT phase: how many steps of how small a model compile the jitted steps, in which process."""
  benchmark_steps: int = _key("INIT_BENCHMARK_STEPS")
  bert_layers: int = _key("INIT_BERT_LAYERS")
  process: str = _key("INIT_PROCESS")
  cache_clear: bool = _key("CACHE_CLEAR")


@dataclass(frozen=True)
class SubmissionSettings:
  platform: str = _key("SUBMISSION_PLATFORM")
  division: str = _key("SUBMISSION_DIVISION")
  org: str = _key("SUBMISSION_ORG")
  status: str = _key("SUBMISSION_STATUS")
  rehearsal: bool | None = _key("REHEARSAL")     # rehearse=true: the log's `rehearsal` line (train/rehearsal.py)


@dataclass(frozen=True)
class TinygradSettings:
  """tinygrad's own settings: exported to the environment before tinygrad is imported (train/environment.py)."""
  dev: str = _key("DEV")
  default_float: str | None = _key("DEFAULT_FLOAT")
  sum_dtype: str | None = _key("SUM_DTYPE")
  ignore_oob: int | None = _key("IGNORE_OOB")
  beam: int | None = _key("BEAM")
  beam_uops_max: int | None = _key("BEAM_UOPS_MAX")
  beam_upcast_max: int | None = _key("BEAM_UPCAST_MAX")
  beam_local_max: int | None = _key("BEAM_LOCAL_MAX")
  beam_min_progress: float | None = _key("BEAM_MIN_PROGRESS")
  ignore_jit_first_beam: int | None = _key("IGNORE_JIT_FIRST_BEAM")
  hcqdev_wait_timeout_ms: int | None = _key("HCQDEV_WAIT_TIMEOUT_MS")
  use_atomics: int | None = _key("USE_ATOMICS")
  debug: int | None = _key("DEBUG")
  jit: int | None = _key("JIT")
  cachelevel: int | None = _key("CACHELEVEL")
  beam_log_surpass_max: int | None = _key("BEAM_LOG_SURPASS_MAX")
  parallel: int | None = _key("PARALLEL")         # tinygrad's PARALLEL in the RUN phase (not exported)
  cpu_threads: bool = _key("CPU_THREADS")         # DEV=CPU: the per-core slices on a thread pool (cpu_threads.py)


_GROUPS = {"model": ModelSettings, "optimizer": OptimizerSettings, "eval": EvalSettings,
           "checkpoint": CheckpointSettings, "init": InitSettings, "submission": SubmissionSettings,
           "tinygrad": TinygradSettings}


@dataclass(frozen=True)
class Settings:
  """Every resolved setting of one training run (hparams.resolve)."""
  seed: int = _key("SEED")
  gpus: int = _key("GPUS")
  batch_size: int = _key("BS")                    # global, all devices together
  global_batch_size: int = _key("GLOBAL_BATCH_SIZE")  # derived: BS * GRADIENT_ACC_STEPS
  float_type: str = _key("FLOAT")                 # derived: float32, half or bfloat16
  num_cpu_threads: int = _key("NUM_CPU_THREADS")
  free_intermediate: int | None = _key("FREE_INTERMEDIATE")
  train_beam: int | None = _key("TRAIN_BEAM")
  dress_target: str | None = _key("DRESS_TARGET")  # the GPU target of the dress (train/dress/)
  model: ModelSettings = None  # type: ignore[assignment]
  optimizer: OptimizerSettings = None  # type: ignore[assignment]
  eval: EvalSettings = None  # type: ignore[assignment]
  checkpoint: CheckpointSettings = None  # type: ignore[assignment]
  init: InitSettings = None  # type: ignore[assignment]
  submission: SubmissionSettings = None  # type: ignore[assignment]
  tinygrad: TinygradSettings = None  # type: ignore[assignment]

  @classmethod
  def from_dict(cls, flat: dict[str, Any]) -> "Settings":
    """The settings of a flat mapping of keys as resolve made it (or the train rule's params); an absent key is
    None. A key that no field holds is refused."""
    unknown = sorted(set(flat) - set(KEY_FIELDS))
    if unknown: raise UserError(f"settings {unknown}: not settings of a run (schemas/platform.schema.yaml)")
    def build(kls):
      return kls(**{f.name: flat.get(f.metadata["key"]) for f in dataclasses.fields(kls) if "key" in f.metadata})
    return dataclasses.replace(build(cls), **{name: build(kls) for name, kls in _GROUPS.items()})

  def as_dict(self) -> dict[str, Any]:
    """The flat mapping of every set key (None left out), sorted: the edges' form."""
    out: dict[str, Any] = {}
    for owner in (self, *(getattr(self, g) for g in _GROUPS)):
      for f in dataclasses.fields(owner):
        if "key" in f.metadata and getattr(owner, f.name) is not None: out[f.metadata["key"]] = getattr(owner, f.name)
    return dict(sorted(out.items()))

  def replace(self, **keys: Any) -> "Settings":
    """A copy with some keys (platform names, e.g. EVAL_METRIC="pooled") changed, derived values unchanged."""
    return Settings.from_dict({**self.as_dict(), **keys})


KEY_FIELDS: dict[str, str] = {f.metadata["key"]: (f"{g}.{f.name}" if g else f.name)
                              for g, kls in (("", Settings), *_GROUPS.items())
                              for f in dataclasses.fields(kls) if "key" in f.metadata}
_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "None": (type(None),)}
KEY_TYPES: dict[str, tuple[type, ...]] = {  # each key's field annotation as types (a float may be written as an int)
  f.metadata["key"]: sum((_TYPES[n] for n in f.type.replace(" ", "").split("|")), ())
  for kls in (Settings, *_GROUPS.values()) for f in dataclasses.fields(kls) if "key" in f.metadata}


def to_json(s: Settings) -> str:
  """Resolved settings as JSON text: the flat keys (`as_dict`), floats written exactly."""
  return json.dumps({"format": JSON_FORMAT, "settings": s.as_dict()}, indent=1) + "\n"


def read_json(path: str | os.PathLike) -> Settings:
  """The settings to_json wrote, from the file `path` or, for "-", standard input: the same typed value, nothing
  resolved again (no defaults filled, nothing derived); another format, an unknown key or a value of the wrong type
  is a one-line UserError."""
  fix = "pass the JSON a train job hands its phases (settings.to_json), or use --platform-file"
  stdin = str(path) == "-"
  name = "standard input" if stdin else path  # what every message below names
  try: data = json.loads(sys.stdin.read() if stdin else Path(path).read_text())
  except (OSError, ValueError) as e: raise UserError(f"{name}: cannot read resolved settings ({e}); {fix}") from None
  if not isinstance(data, dict) or data.get("format") != JSON_FORMAT or not isinstance(data.get("settings"), dict):
    raise UserError(f"{name}: not a settings file (expected {{\"format\": \"{JSON_FORMAT}\", \"settings\": {{...}}}}); {fix}")
  flat = data["settings"]
  bad = sorted(k for k, v in flat.items() if k in KEY_TYPES and (not isinstance(v, KEY_TYPES[k]) or
                                                                 (isinstance(v, bool) and bool not in KEY_TYPES[k])))
  if bad: raise UserError(f"{name}: {', '.join(f'{k}={flat[k]!r}' for k in bad)}: not of the setting's type; {fix}")
  try: return Settings.from_dict(flat)
  except UserError as e: raise UserError(f"{name}: {e}") from None

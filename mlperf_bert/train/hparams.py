"""Platform files and training hyperparameters: load, merge, derive the seed's defaults, validate.

A platform file (platforms/<name>/platform.yaml) is a flat mapping of upper-case keys, as tinygrad's run scripts
export them. Three kinds of keys:
  * tinygrad settings (DEV, DEFAULT_FLOAT, BEAM, ...): exported to the environment before tinygrad is imported;
  * hyperparameters (BS, OPT_BASE_LEARNING_RATE, TRAIN_STEPS, ...): unset ones get the defaults of tinygrad's
    train_bert, derived from GPUS, the float type and the global batch size;
  * run settings (SUBMISSION_*, EVAL_SAMPLES, BERT_* model overrides, INIT_* of the INIT phase).
plus one lower-case section, `resources:` (mem_mb, runtime of the train job: Snakemake resources, never hyperparameters).
Keys, types and static defaults: schemas/platform.schema.yaml, validated like the workflow config (config.py).
The workflow's config key `train:` overrides any of them (highest precedence). resolve() returns the run's typed
Settings (train/settings.py); rule_params and describe give the flat forms its edges need (the environment's:
train/environment.py). Snakemake's resources of the train job: train/resources.py. Nothing here imports tinygrad.
"""
from __future__ import annotations
import importlib.util, math, os
from pathlib import Path
from typing import Any

import yaml

from mlperf_bert.config import CONFIG_SCHEMA, PLATFORM_SCHEMA, load_schema, parse_text_values, safe_yaml, validate_config
from mlperf_bert.errors import UserError
from mlperf_bert.train.settings import DERIVED, KEY_FIELDS, Settings

# The platform file's schema: every key, its type, its static default, whether tinygrad reads it from the
# environment. KNOWN, TINYGRAD_ENV and DEFAULTS are read from it; derived defaults are in resolve().
_SCHEMA = load_schema(PLATFORM_SCHEMA)
_PROPS: dict[str, dict] = _SCHEMA["properties"]
KNOWN = frozenset(k for k in _PROPS if k.isupper())
TINYGRAD_ENV = frozenset(k for k in KNOWN if _PROPS[k].get("x-tinygrad-env"))
DEFAULTS: dict[str, Any] = {k: _PROPS[k]["default"] for k in KNOWN if "default" in _PROPS[k]}
# IGNORE_OOB: the v5.1 scripts export it; tinygrad 0.14 no longer reads it (kept so the platforms match the scripts).
# FUSE_ARANGE / FUSE_ARANGE_UINT (v5.0 scripts) were removed from tinygrad (702e38dc19, e701106a64): not in the
# schema, so a platform file that sets them is refused.
FLOAT_NAMES = {"HALF": "half", "FLOAT16": "half", "BFLOAT16": "bfloat16", "FLOAT": "float32", "FLOAT32": "float32"}
HALF_TYPES = {"half", "bfloat16"}
# the seeds a run may have: the workflow config's bounds (numpy's seed range), applied to `train --seed` too
_SEED = load_schema(CONFIG_SCHEMA)["properties"]["seeds"]["items"]
SEED_RANGE = (int(_SEED["minimum"]), int(_SEED["maximum"]))
# the allowed values of each setting that has a fixed set (EVAL_METRIC, INIT_PROCESS, ...): the schema's enums
CHOICES: dict[str, tuple] = {k: tuple(v for v in _PROPS[k]["enum"] if v is not None)
                             for k in sorted(KNOWN) if "enum" in _PROPS[k]}
# the lower bounds (`minimum:`), the run-time knobs that are no rule param (`x-rule-param: false`) and the settings
# that do not change a run's numbers (`x-fingerprint: false`): the schema's annotations
MINIMUM: dict[str, int] = {k: _PROPS[k]["minimum"] for k in sorted(KNOWN) if "minimum" in _PROPS[k]}
NOT_RULE_PARAMS = frozenset(k for k in KNOWN if _PROPS[k].get("x-rule-param") is False)
NOT_FINGERPRINTED = frozenset(k for k in KNOWN if _PROPS[k].get("x-fingerprint") is False)
if set(KEY_FIELDS) != KNOWN | set(DERIVED):  # every key of the schema has its field in Settings, and no other
  raise RuntimeError(f"{PLATFORM_SCHEMA.name} and mlperf_bert/train/settings.py disagree: "
                     f"{sorted(set(KEY_FIELDS) ^ (KNOWN | set(DERIVED)))}")


def known_devices() -> set[str]:
  """Device names tinygrad 0.14 offers (its runtime/ops_<name>.py modules), found without importing tinygrad."""
  spec = importlib.util.find_spec("tinygrad")
  if spec is None or not spec.submodule_search_locations: return {"CPU"}
  rt = Path(list(spec.submodule_search_locations)[0]) / "runtime"
  return {p.stem[4:].upper() for p in rt.glob("ops_*.py")} - {"DISK", "NPY", "TINYFS", "RDMA"}


def read_platform(path: str | os.PathLike) -> dict[str, Any]:
  """The whole platform file, validated against schemas/platform.schema.yaml (settings and `resources`)."""
  path = Path(path)
  if not path.is_file():
    raise UserError(f"{path}: platform file not found; create it or set `platform:` in the config to the name of a "
                    f"folder under platforms/ that has a platform.yaml")
  try: data = safe_yaml(path.read_text(), str(path)) or {}
  except yaml.YAMLError as e: raise UserError(f"{path}: not valid YAML ({e}); fix the syntax") from None
  if not isinstance(data, dict): raise UserError(f"{path}: expected a mapping of KEY: value, got {type(data).__name__}")
  return check_types(data, str(path))


def load_platform(path: str | os.PathLike) -> dict[str, Any]:
  """The settings of platforms/<name>/platform.yaml (its upper-case keys): what resolve() merges."""
  return {k: v for k, v in read_platform(path).items() if k != "resources"}


def check_types(data: dict[str, Any], where: str, fix: str | None = None) -> dict[str, Any]:
  """Validate settings against the platform schema (unknown keys, types); returns them with text overrides parsed."""
  data = parse_text_values(data, _SCHEMA)  # a command-line override (snakemake --config) arrives as text
  validate_config(data, PLATFORM_SCHEMA, source=where,
                  fix=fix or f"Fix these keys in {where} (the keys and types: {PLATFORM_SCHEMA.name}).")
  return data


def float_name(default_float: str | None) -> str:
  name = (default_float or "float32").upper()
  if name not in FLOAT_NAMES:
    raise UserError(f"DEFAULT_FLOAT={default_float!r} is not supported; use one of {', '.join(FLOAT_NAMES)}")
  return FLOAT_NAMES[name]


def resolve(platform: dict[str, Any], overrides: dict[str, Any] | None = None, seed: int = 0,
            eval_examples: int = 10000, where: str = "config key train") -> Settings:
  """Merge platform <- overrides, fill every unset hyperparameter with the seed's (tinygrad train_bert) default and
  return the run's typed Settings (derived: SEED, GLOBAL_BATCH_SIZE, MAX_EVAL_STEPS, the normalized FLOAT).
  Raises UserError for an invalid combination; the schema's `minimum:` and `enum:` hold for derived values too."""
  if isinstance(seed, bool) or not isinstance(seed, int) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
    raise UserError(f"seed {seed!r} is outside {SEED_RANGE[0]}..{SEED_RANGE[1]} (numpy's seed range, the bounds of "
                    "`seeds` in schemas/config.schema.yaml); pick a seed in that range")
  hp = dict(platform)
  over = check_types(dict(overrides or {}), where)
  if "resources" in over:
    raise UserError(f"{where}: `resources` are the train job's Snakemake resources, not a setting of the run; set "
                    f"them in the platform file or with snakemake --set-resources train:mem_mb=N")
  hp.update(over)
  hp = {k: v for k, v in hp.items() if v is not None}
  for k, v in DEFAULTS.items(): hp.setdefault(k, v)
  hp["DEV"] = _device(hp["DEV"])
  _derive(hp, eval_examples)
  _check(hp, eval_examples)
  hp["SEED"] = int(seed)
  hp["MAX_EVAL_STEPS"] = -(-hp["EVAL_SAMPLES"] // hp["EVAL_BS"])
  return Settings.from_dict(hp)


def _device(dev: Any) -> str:
  """DEV upper-cased; NULL may carry a target whose arch keeps its case (NULL:CUDA:sm_89: compile for sm_89, run
  nothing; tinygrad/helpers.py Target), as the dress sets it."""
  devices = known_devices()
  name, _, target = str(dev).partition(":")
  ren, _, arch = target.partition(":")
  if name.upper() not in devices or (target and (name.upper() != "NULL" or not ren.isalnum() or ":" in arch)):
    raise UserError(f"DEV={dev!r} is not a tinygrad 0.14 device; use one of {', '.join(sorted(devices))}, or "
                    f"NULL:<RENDERER>:<arch> (e.g. NULL:CUDA:sm_89) (set DEV in the platform file or `train: {{DEV: ...}}`)")
  return name.upper() + (f":{ren.upper()}" if ren else "") + (f":{arch}" if arch else "")


def _derive(hp: dict[str, Any], eval_examples: int) -> None:
  """The defaults train_bert derives from GPUS, the float type and the global batch size (in place)."""
  fl = hp["FLOAT"] = float_name(hp.get("DEFAULT_FLOAT"))
  gpus = max(1, hp["GPUS"])
  hp.setdefault("BS", (11 if fl in HALF_TYPES else 8) * gpus)
  hp.setdefault("EVAL_BS", gpus)
  gbs = hp["GLOBAL_BATCH_SIZE"] = hp["BS"] * hp["GRADIENT_ACC_STEPS"]
  hp.setdefault("OPT_BASE_LEARNING_RATE", 0.000175 * math.sqrt(gbs / 96))
  hp.setdefault("TRAIN_STEPS", 3600000 // gbs)
  hp.setdefault("LOSS_SCALER", 2.0 ** 11 if fl == "half" else 1.0)
  hp.setdefault("EVAL_STEP_FREQ", int(math.floor(0.05 * (230.23 * gbs + 3000000) / 25000) * 25000 // gbs))
  hp.setdefault("EVAL_SAMPLES", eval_examples)


def _check(hp: dict[str, Any], eval_examples: int) -> None:
  """The schema's bounds and choices (a platform dict that did not come from a file, a derived value), then the
  combinations no schema can say."""
  for k, low in MINIMUM.items():
    if k in hp and hp[k] < low: raise UserError(f"{k}={hp[k]} must be at least {low}; fix it in the platform file or `train:`")
  for k, allowed in CHOICES.items():
    if hp[k] not in allowed: raise UserError(f"{k}={hp[k]!r}: use one of {', '.join(map(str, allowed))}")
  gpus = hp["GPUS"]
  for k in ("BS", "EVAL_BS"):
    if hp[k] % gpus != 0:
      raise UserError(f"{k}={hp[k]} is not divisible by GPUS={gpus}: every device needs the same share of the batch; "
                      f"set {k} to a multiple of {gpus}")
  if hp["GRADIENT_ACC_STEPS"] != 1:
    raise UserError(f"GRADIENT_ACC_STEPS={hp['GRADIENT_ACC_STEPS']}: gradient accumulation is not implemented (as in "
                    f"tinygrad's train_bert); set it to 1 and raise BS instead")
  if hp["NUM_WARMUP_STEPS"] > hp["TRAIN_STEPS"]:
    raise UserError(f"NUM_WARMUP_STEPS={hp['NUM_WARMUP_STEPS']} exceeds TRAIN_STEPS={hp['TRAIN_STEPS']}; lower it")
  if hp["EVAL_SAMPLES"] > eval_examples:
    raise UserError(f"EVAL_SAMPLES={hp['EVAL_SAMPLES']} exceeds the eval set's {eval_examples} rows (config key "
                    f"eval_examples); lower EVAL_SAMPLES or build a larger eval set")
  if not 0 < hp["TARGET"] <= 1: raise UserError(f"TARGET={hp['TARGET']} must be a masked-LM accuracy in (0, 1]")


def rule_params(s: Settings) -> dict[str, Any]:
  """What the train rule records as params (a change reruns training): every set key but the schema's
  `x-rule-param: false` (run-time knobs)."""
  return {k: v for k, v in s.as_dict().items() if k not in NOT_RULE_PARAMS}


def run_time_knobs(s: Settings) -> dict[str, Any]:
  """The set keys rule_params leaves out (`x-rule-param: false`: DEBUG, DRESS_TARGET): the train job gets them too,
  through a param Snakemake does not compare (rules/train.smk `knobs`)."""
  return {k: v for k, v in s.as_dict().items() if k in NOT_RULE_PARAMS}


def fingerprinted(s: Settings) -> dict[str, Any]:
  """The settings that change a run's numbers: the rule's params but the schema's `x-fingerprint: false` (a change
  of those keeps a resumable checkpoint)."""
  return {k: v for k, v in rule_params(s).items() if k not in NOT_FINGERPRINTED}


def describe(s: Settings) -> str:
  return "\n".join(f'HParam: "{k}": {v}' for k, v in s.as_dict().items())

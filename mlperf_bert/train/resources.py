"""The train job's Snakemake resources on a platform: `gpu`, `mem_mb` and `runtime` (the rules train, preflight and
train_tinygrad declare them).

    resources = train_resources(platform_file)   # {"mem_mb": ..., "runtime": ...}: the platform's `resources:` section
    gpus = train_gpus(settings)                  # the `gpu` resource: GPUS, or 0 on CPU

The `resources:` section of a platform file is the job's, never a setting of the run (hparams.resolve refuses it in
`train:`); its keys and defaults are schemas/platform.schema.yaml's.
"""
from __future__ import annotations
import os

from mlperf_bert.config import PLATFORM_SCHEMA, load_schema
from mlperf_bert.train.hparams import read_platform
from mlperf_bert.train.settings import Settings

RESOURCE_DEFAULTS: dict[str, int] = {k: v["default"] for k, v in
                                     load_schema(PLATFORM_SCHEMA)["properties"]["resources"]["properties"].items()}


def train_resources(path: str | os.PathLike) -> dict[str, int]:
  """The train job's Snakemake resources on this platform: mem_mb and runtime (minutes), the schema's defaults for
  those the file leaves unset. (The `gpu` resource is GPUS, or 0 on CPU: see train_gpus.)"""
  return {**RESOURCE_DEFAULTS, **read_platform(path).get("resources", {})}


def train_gpus(s: Settings) -> int:
  """The train job's `gpu` resource for resolved settings: GPUS, or 0 when tinygrad runs on the CPU."""
  return 0 if s.tinygrad.dev == "CPU" else s.gpus

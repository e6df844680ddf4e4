"""Constants shared by more than one wing. Each is defined here once."""
from __future__ import annotations

import os
from pathlib import Path

# The last MLPerf Training ruleset with BERT (BERT is not in 5.1). The logs, the audit and the package use it.
RULESET = "5.0.0"

# The seven features of a pretraining instance, in the shard's and the .npz dump's order (as the MLPerf
# TFRecords name them). The trainer's jitted steps and BertForPretraining.forward (the first four) take them
# positionally in this order.
FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
            "next_sentence_labels")

# MLPerf's eval set size for BERT (pick_eval_samples.py's default).
EVAL_SAMPLES = 10000
# the INIT phase's limit in minutes, by division, as mlperf-logging's compliance checker's common.yaml sets them (the
# audit checks logs against it; the dress's INIT prediction, train/cost/init.py, too)
INIT_LIMIT_MIN = {"closed": 30, "open": 240}
# the tinygrad whose internals train/cpu_threads.py (CPUProgram.__call__), train/jitmem.py and the dress (the JIT's
# planner, TinyJit.cnt, CapturedJit._written_uops) read: each refuses another version in one line
TINYGRAD_PINNED = "0.14.0"

# A platform's files in the repository: platforms/<name>/platform.yaml (tinygrad settings, hyperparameters, the train
# job's resources) and platforms/<name>/system.json (its MLPerf system description). profiles/ holds only Snakemake
# profiles (profiles/<name>/config.yaml sets config `platform: <name>`).
# The checkout the package runs from: its platforms/, schemas/ and resources/.
REPO = Path(__file__).resolve().parents[1]
PLATFORMS_DIR = "platforms"
PLATFORM_FILE = "platform.yaml"
SYSTEM_FILE = "system.json"


def platform_path(repo: str | os.PathLike, name: str) -> Path:
  """platforms/<name>/platform.yaml under the repository `repo`."""
  return Path(repo) / PLATFORMS_DIR / str(name) / PLATFORM_FILE


def system_path(repo: str | os.PathLike, name: str) -> Path:
  """platforms/<name>/system.json under the repository `repo`."""
  return Path(repo) / PLATFORMS_DIR / str(name) / SYSTEM_FILE

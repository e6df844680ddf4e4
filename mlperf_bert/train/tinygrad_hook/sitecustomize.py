"""The one hook the tinygrad trainer puts into tinygrad's processes (its folder is first on their PYTHONPATH; Python
imports `sitecustomize` at start-up, before model_train.py runs). No line of tinygrad is changed.

MLPERF_BERT_SHUFFLE_SEED: tinygrad's `batch_load_train_bert` (examples/mlperf/dataloader.py at e0139fa) shuffles its
  file list with Python's global `random`, which nothing seeds (docs/parity.md row 4). Seeding it here makes
  tinygrad's file order the one this project's loader gives for that seed. Importing tensorflow draws from that
  same global `random`, and train_bert's RUN process imports it (load_from_pretrained) before it builds the loader;
  so in the RUN process (RUNMLPERF set) tensorflow is imported here first, then `random` is seeded.
MLPERF_BERT_DIVISION: train_bert logs `submission_division` as mlperf_logging's constant CLOSED whatever the run; for
  a platform whose division is open (the CPU demo: a tiny model that cannot reach 0.72) that constant is set to
  "open" in this process, so the log states the division the run is (the closed rules would require 0.72).
Without the variables this does nothing.
"""
import os
import random

if os.environ.get("MLPERF_BERT_SHUFFLE_SEED", "") != "":
  if os.environ.get("RUNMLPERF"):
    try:
      import tensorflow  # noqa: F401  (its import consumes random numbers; see above)
    except ImportError:
      pass
  random.seed(int(os.environ["MLPERF_BERT_SHUFFLE_SEED"]))

if os.environ.get("MLPERF_BERT_DIVISION", "") not in ("", "closed"):
  import mlperf_logging.mllog.constants as _constants
  _constants.CLOSED = os.environ["MLPERF_BERT_DIVISION"]

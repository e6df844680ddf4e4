"""The one hook the tinygrad trainer puts into tinygrad's processes (its folder is first on their PYTHONPATH; Python
imports `sitecustomize` at start-up, before model_train.py runs). No line of tinygrad is changed.

MLPERF_BERT_SHUFFLE_SEED: tinygrad's `batch_load_train_bert` (examples/mlperf/dataloader.py at e0139fa) shuffles its
  file list with Python's global `random`, which nothing seeds (docs/parity.md row 4). Seeding it here makes
  tinygrad's file order the one this project's loader gives for that seed. Importing tensorflow draws from that
  same global `random`, and train_bert's RUN process imports it (load_from_pretrained) before it builds the loader;
  so `random` is seeded again right after tensorflow's package has run (a finder on sys.meta_path wraps that one
  import; importing tensorflow here instead made the process abort at exit).
MLPERF_BERT_DIVISION: train_bert logs `submission_division` as mlperf_logging's constant CLOSED whatever the run; for
  a platform whose division is open (the CPU demo: a tiny model that cannot reach 0.72) that constant is set to
  "open" in this process, so the log states the division the run is (the closed rules would require 0.72).
Without the variables this does nothing.
"""
import importlib.util
import os
import random
import sys



class _SeedAfter:
  """Finds `name` once with the other finders, and seeds `random` after its module has run."""
  def __init__(self, name, seed):
    self.name, self.seed = name, seed

  def find_spec(self, fullname, path=None, target=None):
    if fullname != self.name: return None
    sys.meta_path.remove(self)
    spec = importlib.util.find_spec(fullname)
    if spec is None or spec.loader is None: return spec
    run, seed = spec.loader.exec_module, self.seed
    def exec_module(module):
      run(module)
      random.seed(seed)
    spec.loader.exec_module = exec_module
    return spec


if os.environ.get("MLPERF_BERT_SHUFFLE_SEED", "") != "":
  _seed = int(os.environ["MLPERF_BERT_SHUFFLE_SEED"])
  random.seed(_seed)
  sys.meta_path.insert(0, _SeedAfter("tensorflow", _seed))

if os.environ.get("MLPERF_BERT_DIVISION", "") not in ("", "closed"):
  import mlperf_logging.mllog.constants as _constants
  _constants.CLOSED = os.environ["MLPERF_BERT_DIVISION"]

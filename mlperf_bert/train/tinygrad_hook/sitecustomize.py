"""The one hook the tinygrad trainer puts into tinygrad's processes (its folder is first on their PYTHONPATH).

tinygrad's `batch_load_train_bert` (examples/mlperf/dataloader.py at e0139fa) shuffles its file list with Python's
global `random`, which nothing seeds (docs/parity.md row 4). Python imports `sitecustomize` at start-up, before
model_train.py runs, so seeding the global `random` here with MLPERF_BERT_SHUFFLE_SEED makes tinygrad's file order
the one this project's loader gives for that seed, without changing a line of tinygrad. Without the variable this
does nothing.
"""
import os
import random

if os.environ.get("MLPERF_BERT_SHUFFLE_SEED", "") != "":
  random.seed(int(os.environ["MLPERF_BERT_SHUFFLE_SEED"]))

"""The tinygrad trainer (config `trainer: tinygrad`): tinygrad's own examples/mlperf/model_train.py, from a checkout
brought into the basedir, on this workflow's shards.

One module a job, in the order the workflow runs them:
  source.py      the checkout: cloned or copied into the basedir, verified against the commit it claims;
  checks.py      what train_bert at e0139fa can run, checked when the workflow is planned;
  export.py      the shards and eval set as tinygrad's loader reads them (the product's only pickles);
  checkpoint.py  the initial weights as the TensorFlow checkpoint train_bert loads;
  process.py     train_bert's INIT and RUN processes, as run_and_time.sh runs them, and the result published;
  hook/          sitecustomize.py, the one hook put into tinygrad's processes (first on their PYTHONPATH).
Import the module you need; this package imports none of them.
"""

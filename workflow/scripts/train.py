# rule train: export the platform's tinygrad settings, then train and write the MLPerf result log.
import os

from jobglue import job_log
from mlperf_bert.train.hparams import tinygrad_env

p = snakemake.params
hp = dict(p.hparams)
os.environ.update(tinygrad_env(hp))  # before tinygrad is imported (it reads them at import)

with job_log(snakemake.log[0]):
    from mlperf_bert.train.run import TrainRun

    run = TrainRun(hp, shard_paths=list(snakemake.input.shards), eval_path=snakemake.input.eval_set,
                   bert_config=snakemake.input.bert_config, log_path=snakemake.output[0],
                   work_log_path=p.work_log, ckpt_dir=p.ckpt_dir, max_seq_length=p.max_seq_length,
                   max_predictions_per_seq=p.max_predictions_per_seq,
                   init_weights=snakemake.input.init_weights[0] if snakemake.input.init_weights else None,
                   progress=True)
    res = run.run()
    print(f"training finished: status {res.status} after {res.steps} steps ({res.samples} samples), "
          f"eval accuracies {res.accuracies}, median step {res.step_ms:.1f} ms")

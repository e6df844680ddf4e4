# rule train: export the platform's tinygrad settings, then run the INIT and RUN phases (two processes, as
# tinygrad's run_and_time.sh, or one: INIT_PROCESS) and write the MLPerf result log.
import os

from jobglue import job_log
from mlperf_bert.train.hparams import tinygrad_env
from mlperf_bert.train.inputs import RunInputs
from mlperf_bert.train.settings import Settings

p = snakemake.params
settings = Settings.from_dict(dict(p.hparams))  # the rule's params: the resolved settings of this seed
os.environ.update(tinygrad_env(settings))  # before tinygrad is imported (it reads them at import)
inputs = RunInputs.of(shards=list(snakemake.input.shards), eval_set=snakemake.input.eval_set,
                      bert_config=snakemake.input.bert_config, log=snakemake.output[0], work_log=p.work_log,
                      ckpt_dir=p.ckpt_dir, max_seq_length=p.max_seq_length,
                      max_predictions_per_seq=p.max_predictions_per_seq,
                      init_weights=snakemake.input.init_weights[0] if snakemake.input.init_weights else None)

with job_log(snakemake.log[0]):
    for note in p.rehearsal_notes:  # rehearse=true: what the rehearsal changed (mlperf_bert/train/rehearsal.py)
        print(note, flush=True)
    from mlperf_bert.train.phases import train_job

    train_job(settings, inputs, log=snakemake.log[0])

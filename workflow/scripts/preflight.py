# rule preflight: export the platform's tinygrad settings, then evaluate the initial weights on the eval set and
# check MLCommons' 0.34085 (mlperf_bert/train/preflight.py).
import os

from jobglue import job_log, job_settings
from mlperf_bert.train.environment import export_tinygrad_env

p = snakemake.params
settings = job_settings(p)  # the rule's params: the resolved settings of seed 0
export_tinygrad_env(settings, os.environ)  # before tinygrad is imported (it reads them at import)

with job_log(snakemake.log[0]):
    from mlperf_bert.train.preflight import preflight

    preflight(settings, eval_path=snakemake.input.eval_set, bert_config=snakemake.input.bert_config,
              init_weights=snakemake.input.init_weights[0] if snakemake.input.init_weights else None,
              max_seq_length=p.max_seq_length, max_predictions_per_seq=p.max_predictions_per_seq,
              out=snakemake.output[0])

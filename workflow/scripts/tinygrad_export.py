# rule tinygrad_export: the shards and eval set as tinygrad's loader reads them (pickles, for trainer tinygrad only).
import json

from jobglue import job_log
from mlperf_bert.fileio import atomic_path
from mlperf_bert.train.tinygrad_trainer.export import export

with job_log(snakemake.log[0]):
    p = snakemake.params
    stats = export(list(snakemake.input.shards), snakemake.input.eval_set, snakemake.output.data,
                   max_seq_length=p.max_seq_length, max_predictions_per_seq=p.max_predictions_per_seq,
                   space_check=p.space_check)
    with atomic_path(snakemake.output.stats) as tmp:
        tmp.write_text(json.dumps(stats, indent=1) + "\n")

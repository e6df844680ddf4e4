# rule convert_checkpoint: TF model.ckpt-28252 (+ bert_config.json) -> checkpoint/model.safetensors.
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.checkpoint import convert_tf_checkpoint
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    prefix = str(snakemake.input.index)[: -len(".index")]
    stats = convert_tf_checkpoint(prefix, snakemake.input.bert_config, snakemake.output[0])
    print(json.dumps(stats, indent=1))

# rule convert_init_weights: TF model.ckpt-28252 (+ bert_config.json) -> checkpoint/model.safetensors.
import json
from jobglue import job_log
from mlperf_bert.train.init_weights import convert_tf_checkpoint

with job_log(snakemake.log[0]):
    prefix = str(snakemake.input.index)[: -len(".index")]
    stats = convert_tf_checkpoint(prefix, snakemake.input.bert_config, snakemake.output[0],
                                  space_check=snakemake.params.space_check)
    print(json.dumps(stats, indent=1))

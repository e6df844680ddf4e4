# rule tinygrad_init_weights: the initial weights as the TF checkpoint train_bert loads from INIT_CKPT_DIR.
from jobglue import job_log, job_settings
from mlperf_bert.train.tinygrad_trainer.tf_init import init_model_config, write_tf_init_weights

with job_log(snakemake.log[0]):
    settings = job_settings(snakemake.params)  # the rule's params: this seed's settings
    i = snakemake.input
    index = write_tf_init_weights(snakemake.output[0], init_model_config(i.bert_config, settings), seed=settings.seed,
                                  safetensors=i.init_weights[0] if i.init_weights else None)
    print(f"wrote {index} ({'the initial weights' if i.init_weights else 'the seeded init of seed ' + str(settings.seed)})")

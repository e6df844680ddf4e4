# rule train: the INIT and RUN phases (two processes, as tinygrad's run_and_time.sh, or one: INIT_PROCESS) on the
# rule's resolved settings, writing the MLPerf result log. The process that imports tinygrad exports the settings'
# tinygrad environment first (mlperf_bert/train/phases.py).
from jobglue import job_log, job_settings
from mlperf_bert.train.inputs import RunInputs

p = snakemake.params
settings = job_settings(p)  # the rule's params: the resolved settings of this seed
inputs = RunInputs.of(shards=list(snakemake.input.shards), eval_set=snakemake.input.eval_set,
                      bert_config=snakemake.input.bert_config, log=snakemake.output[0], work_log=p.work_log,
                      ckpt_dir=p.ckpt_dir, max_seq_length=p.max_seq_length,
                      max_predictions_per_seq=p.max_predictions_per_seq,
                      init_weights=snakemake.input.init_weights[0] if snakemake.input.init_weights else None,
                      space_check=p.space_check)

with job_log(snakemake.log[0]):
    for note in p.rehearsal_notes:  # rehearse=true: what the rehearsal changed (mlperf_bert/train/rehearsal.py)
        print(note, flush=True)
    from mlperf_bert.train.phases import train_job

    train_job(settings, inputs, log=snakemake.log[0])

# rule train_tinygrad: tinygrad's own train_bert, INIT process then RUN process as run_and_time.sh, on the export.
from pathlib import Path

from jobglue import job_log, job_settings
from mlperf_bert.train.tinygrad_trainer.process import run_phases

with job_log(snakemake.log[0]):
    i, p = snakemake.input, snakemake.params
    print(f"trainer tinygrad: commit {p.commit}", flush=True)
    rec = run_phases(job_settings(p),  # the rule's params: this seed's settings
                     checkout=i.checkout, data_dir=i.data, init_ckpt_dir=i.init_ckpt,
                     work_dir=p.work_dir, out=snakemake.output[0], shard_paths=list(i.shards), eval_path=i.eval_set,
                     bert_config=i.bert_config, init_weights=str(Path(i.init_ckpt) / "model.ckpt.index"))
    print(f"result: {rec['status']}, eval accuracies {rec['eval_accuracy']}")

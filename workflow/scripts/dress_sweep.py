# rule dress_sweep: the batch planner (mlperf_bert/train/dress/sweep.py) over the config's dress_sweep grid.
from jobglue import job_log
from mlperf_bert.train.dress import parse_layers
from mlperf_bert.train.dress.sweep import sweep_files
from mlperf_bert.train.hparams import check_types

with job_log(snakemake.log[0]):
    p = snakemake.params
    # --config dress_sweep={BS: [72, 96]} gives strings: typed as the platform keys are
    sweep = {k: [check_types({k: x}, "config key dress_sweep")[k] for x in v] for k, v in dict(p.sweep).items()}
    r = sweep_files(snakemake.input.platform_file, snakemake.input.bert_config, sweep, overrides=dict(p.overrides),
                    layers=parse_layers(None if p.layers is None else str(p.layers)), json_out=snakemake.output.json,
                    table_out=snakemake.output.table, picture_out=snakemake.output.picture)
    print(r["table"])
print(r["table"], flush=True)  # and on Snakemake's own output

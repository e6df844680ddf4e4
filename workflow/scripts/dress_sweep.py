# rule dress_sweep: the batch planner (mlperf_bert/train/dress/sweep.py) over the config's dress_sweep grid.
from jobglue import job_log
from mlperf_bert.train.dress import parse_layers
from mlperf_bert.train.dress.sweep import sweep_files

with job_log(snakemake.log[0]):
    p = snakemake.params
    r = sweep_files(snakemake.input.platform_file, snakemake.input.bert_config,
                    {k: list(v) for k, v in dict(p.sweep).items()}, overrides=dict(p.overrides),
                    layers=parse_layers(None if p.layers is None else str(p.layers)), json_out=snakemake.output.json,
                    table_out=snakemake.output.table, picture_out=snakemake.output.picture)
    print(r["table"])
print(r["table"], flush=True)  # and on Snakemake's own output

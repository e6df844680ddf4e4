# rule dress_platform: the dress of the platform (mlperf_bert/train/dress/), its JSON and table.
from jobglue import job_log
from mlperf_bert.train.dress import dress_files, parse_layers

with job_log(snakemake.log[0]):
    p = snakemake.params
    r = dress_files(snakemake.input.platform_file, snakemake.input.bert_config,
                    layers=parse_layers(None if p.layers is None else str(p.layers)), overrides=dict(p.overrides),
                    json_out=snakemake.output.json, table_out=snakemake.output.table,
                    picture_out=snakemake.output.picture)
    print(r["table"])
print(r["table"], flush=True)  # and on Snakemake's own output: the answer a user ran `snakemake dress` for

# mlperf-bert: tinygrad's MLPerf Training BERT submission as a Snakemake workflow.
# The DAG only; the logic lives in the mlperf_bert package. See README.md.

configfile: f"{workflow.basedir}/config.yaml"


include: "rules/common.smk"
include: "rules/download.smk"
include: "rules/prepare.smk"
include: "rules/shards.smk"
include: "rules/checkpoint.smk"
include: "rules/preflight.smk"
include: "rules/train.smk"
include: "rules/audit.smk"


rule all:
    input:
        all_shards,
        B("shards/SHA256SUMS"),
        B("eval/eval.shard"),
        train_results,
        provenance_records,
        report_targets,
    default_target: True

# mlperf-bert: tinygrad's MLPerf Training BERT submission as a Snakemake workflow.
# The DAG only; the logic lives in the mlperf_bert package. See README.md.

# YAML aliases (nested ones expand to gigabytes) and URLs with credentials (Snakemake would record them) are refused
# in each config file before the Snakefile merges config.yaml
from mlperf_bert.config import precheck_config_files

try:
    precheck_config_files(f"{workflow.basedir}/config.yaml", *workflow.overwrite_configfiles)
except Exception as e:
    raise WorkflowError(str(e))


configfile: f"{workflow.basedir}/config.yaml"


include: "rules/common.smk"
include: "rules/download.smk"
include: "rules/prepare.smk"
include: "rules/shards.smk"
include: "rules/init_weights.smk"
include: "rules/preflight.smk"
include: "rules/train.smk"
include: "rules/tinygrad.smk"
include: "rules/audit.smk"
include: "rules/dress.smk"


rule all:
    input:
        footprint_note,
        all_shards,
        B("shards/SHA256SUMS"),
        B("eval/eval.shard"),
        train_results,
        provenance_records,
        report_targets,
    default_target: True

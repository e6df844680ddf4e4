# 7. Provenance of each result log; 8. the MLPerf submission package; the audit runs outside the DAG
#    (`python -m mlperf_bert audit {basedir}`), since it must not rebuild or write into what it checks.
import sys as _sys


def provenance_downloads(wildcards=None):
    """Every configured download: the manifest, vocab, bert_config, the text tarball, TF checkpoint files."""
    return [B("download", f) for f in config["sources"]]


def provenance_checkpoint(wildcards=None):
    """The converted checkpoint, when the config downloads the TF checkpoint the trainer starts from."""
    return [B("checkpoint/model.safetensors")] if "model.ckpt-28252.index" in config["sources"] else []


rule provenance:
    input:
        log=B("results/{platform}/result_bert_{seed}.log"),
        downloads=provenance_downloads,
        shards=all_shards,
        shard_sums=B("shards/SHA256SUMS"),
        eval=B("eval/eval.shard"),
        checkpoint=provenance_checkpoint,
    output:
        B("results/{platform}/result_bert_{seed}.provenance.json"),
    params:
        config=lambda w: dict(config),
        command=lambda w: list(_sys.argv),
        repo=str(REPO),
    log:
        B("logs/provenance/{platform}/{seed}.log"),
    conda:
        "../envs/audit.yaml"
    resources:
        mem_mb=300,
    script:
        "../workflow/scripts/provenance.py"

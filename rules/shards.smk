# 4. Shard each topic exactly as MLCommons' create_pretraining_data.py; 5. build the picked eval set.
# Changing a preprocessing setting (params) reruns the shards; rebuilding one topic reruns nothing else
# (SHA256SUMS takes the sidecars as ancient inputs; the audit compares contents by hash).


rule shard:
    input:
        text=extracted("{topic}"),
        verified=B("verified/{topic}.ok"),
        vocab=B("download/vocab.txt"),
    output:
        shard=B("shards/{topic}.shard"),
        sha256=B("shards/{topic}.shard.sha256"),
    params:
        **PRE,
        # the shard format: a shard of an older one (version 1 recorded no source text) is rebuilt
        shard_format=SHARD_FORMAT,
        space_check=uncompared(PLAN.space_check),
    log:
        B("logs/shard/{topic}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        # measured by bench/bench_shard.py: ~200 MB + ~11 MB per MB of topic text (~500 MB for a 28 MB topic)
        mem_mb=lambda wildcards, input: 300 + int(15 * input.size_mb),
    script:
        "../workflow/scripts/shard.py"


rule shard_checksums:
    input:
        lambda w: [ancient(p) for p in all_shard_sums(w)],
    output:
        B("shards/SHA256SUMS"),
    log:
        B("logs/shard_checksums/shard_checksums.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=200,
    script:
        "../workflow/scripts/shard_checksums.py"


rule evalset:
    input:
        text=extracted("eval.txt"),
        verified=B("verified/eval.txt.ok"),
        vocab=B("download/vocab.txt"),
    output:
        shard=B("eval/eval.shard"),
        sha256=B("eval/eval.shard.sha256"),
    params:
        **PRE,
        shard_format=SHARD_FORMAT,
        space_check=uncompared(PLAN.space_check),
        num_examples=PLAN.eval_examples,
    log:
        B("logs/evalset/evalset.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda wildcards, input: 400 + int(15 * input.size_mb),
    script:
        "../workflow/scripts/evalset.py"

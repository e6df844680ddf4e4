# 2. Extract results_text.tar.gz safely; 3. verify each file against the md5 manifest, eval.txt per article.


checkpoint extract:
    input:
        tarball=B("download/results_text.tar.gz"),
        manifest=B("download", MANIFEST),
    output:
        # a listing, not directory(): each extracted file then keeps its own mtime and checksum, so an
        # edited topic reruns exactly that topic's chain
        B("results4.files"),
    params:
        dest=lambda w, output: output[0].removesuffix(".files"),
        space_check=uncompared(PLAN.space_check),
    log:
        B("logs/extract/extract.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=300,
    script:
        "../workflow/scripts/extract.py"


rule verify_topic:
    input:
        text=extracted("{topic}"),
        manifest=B("download", MANIFEST),
    output:
        B("verified/{topic}.ok"),
    log:
        B("logs/verify_topic/{topic}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=200,
    script:
        "../workflow/scripts/verify_topic.py"


rule verify_eval:
    input:
        text=extracted("eval.txt"),
        manifest=B("download", MANIFEST),
        eval_md5=repo_path(PLAN.config["eval_md5"]),
    output:
        B("verified/eval.txt.ok"),
    log:
        B("logs/verify_eval/eval.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=300,
    script:
        "../workflow/scripts/verify_eval.py"

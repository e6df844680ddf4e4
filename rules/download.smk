# 1. Download: every MLPerf artifact from its configured source (gdrive:<id>, URL or local path), md5-checked.


rule download:
    output:
        B("download/{file}"),
    params:
        url=lambda w: config["sources"][w.file]["url"],
        md5=lambda w: config["sources"][w.file]["md5"],
        root=str(REPO),
    wildcard_constraints:
        file="|".join(re.escape(k) for k in config["sources"]),
    log:
        B("logs/download/{file}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=300,
    retries: 2
    script:
        "../workflow/scripts/download.py"

# 1. Download: every MLPerf artifact from its configured source (mlcommons-r2:<.uri URL or mirror directory>,
#    gdrive:<id>, URL or local path), md5-checked, resumed after a failure. An R2 dataset's md5 list is fetched
#    once (checkpoint r2_listing, cached under download/r2/); each file is then its own job. Network errors are
#    retried inside the job with backoff; no `retries:` here, so a deterministic failure (md5 mismatch, missing
#    path, HTTP 403) fails once.
rule download:
    input:
        unpack(lambda w: _listing(PLAN.file_sources[w.file]["url"])),
    output:
        file=B("download/{file}"),
        sha256=B("download/{file}.sha256"),
    params:
        url=lambda w: PLAN.file_sources[w.file]["url"],
        md5=lambda w: PLAN.file_sources[w.file]["md5"],
        path=lambda w: PLAN.file_sources[w.file].get("path"),
        listed_md5=lambda w: _listed_md5(w.file),
        download=uncompared(PLAN.download),
    wildcard_constraints:
        file=_one_of(PLAN.file_sources),
    log:
        B("logs/download/{file}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=300,
    script:
        "../workflow/scripts/download.py"


checkpoint r2_listing:
    output:
        listing=B("download/r2/{dataset}.md5"),
        uri=B("download/r2/{dataset}.uri"),
    params:
        source=lambda w: PLAN.r2_datasets[w.dataset],
        download=uncompared(PLAN.download),
    wildcard_constraints:
        dataset=_one_of(PLAN.r2_datasets),
    log:
        B("logs/download/r2_{dataset}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=200,
    script:
        "../workflow/scripts/r2_listing.py"


if PLAN.text_from_r2:

    # The dataset holds the text already extracted: each part is its own download into results4/ (no extract
    # step), and the manifest the verify rules read is written from the dataset's md5 list.
    rule r2_text:
        input:
            listing=ancient(B(f"download/r2/{PLAN.text_dataset}.md5")),
            uri=ancient(B(f"download/r2/{PLAN.text_dataset}.uri")),
        output:
            B("results4/{name}"),
        params:
            dataset=PLAN.text_dataset,
            md5=lambda w: text_md5s(B(f"download/r2/{PLAN.text_dataset}.md5")).get(w.name),
            download=uncompared(PLAN.download),
        wildcard_constraints:
            name=r"part-\d{5}-of-\d{5}|eval\.txt",
        log:
            B("logs/download/results4_{name}.log"),
        conda:
            "../envs/data.yaml"
        resources:
            mem_mb=300,
        script:
            "../workflow/scripts/r2_text.py"

    rule r2_manifest:
        input:
            listing=ancient(B(f"download/r2/{PLAN.text_dataset}.md5")),
        output:
            B("download", MANIFEST),
        params:
            dataset=PLAN.text_dataset,
            # rewritten (and the topics re-verified) only when the text's md5s change, not when the list is re-fetched
            digest=lambda w: text_digest(B(f"download/r2/{PLAN.text_dataset}.md5")),
        log:
            B("logs/download/r2_manifest.log"),
        conda:
            "../envs/data.yaml"
        resources:
            mem_mb=200,
        script:
            "../workflow/scripts/r2_manifest.py"

# Dress: the platform's train and eval steps at full size (MLPerf BERT-large, seq 512, 76 predictions),
# compiled for its GPU (DRESS_TARGET) on tinygrad's NULL device, on no GPU: memory a device against the card, kernels,
# FLOPs, the roofline floor beside tinycorp's published step time, and where the step model ran the predicted step,
# time to train and INIT phase, with a picture of each device's compute and copy queues over one step
# (mlperf_bert/train/dress/, mlperf_bert/train/cost/, docs/dress.md). `snakemake dress --config platform=tinybox_green` writes {basedir}/dress/tinybox_green.json and the
# report's "Dress" section. Config key dress_layers: unset = 2 and 4 layers extrapolated, `full`, or N.


rule dress:
    input:
        B(f"dress/{PLAN.platform}.json"),
        B(f"report/dress/{PLAN.platform}.txt"),
        B(f"report/dress/{PLAN.platform}.svg"),


rule dress_platform:
    input:
        bert_config=repo_path("resources/demo/bert_config.json"),
        platform_file=repo_path(PLAN.platform_file),
    output:
        json=B("dress/{platform}.json"),
        table=report(B("report/dress/{platform}.txt"), caption="../workflow/report/dress.rst",
                     category="Dress", labels={"platform": "{platform}", "figure": "the answer"}),
        picture=report(B("report/dress/{platform}.svg"), caption="../workflow/report/dress_picture.rst",
                       category="Dress", labels={"platform": "{platform}", "figure": "one step's queues"}),
    params:
        layers=PLAN.config.get("dress_layers"),
        overrides=PLAN.train,
        tinygrad=TINYGRAD_VERSION,
    log:
        B("logs/dress/{platform}.log"),
    conda:
        "../envs/dress.yaml"
    resources:
        mem_mb=4000,
    wildcard_constraints:
        platform=re.escape(PLAN.platform),
    script:
        "../workflow/scripts/dress.py"

# Dress: the platform's train and eval steps at full size (MLPerf BERT-large, seq 512, 76 predictions),
# compiled for its GPU (DRESS_TARGET) on tinygrad's NULL device, on no GPU: memory a device against the card, kernels,
# FLOPs, the roofline floor beside tinycorp's published step time, and where the step model ran the predicted step,
# time to train and INIT phase, with a picture of each device's compute and copy queues over one step
# (mlperf_bert/train/dress/, mlperf_bert/train/cost/, docs/dress.md). `snakemake dress --config platform=tinybox_green` writes {basedir}/dress/tinybox_green.json and the
# report's "Dress" section. Config key dress_layers: unset = 2 and 4 layers extrapolated, `full`, or N.
# Config key dress_sweep (a grid of platform keys, e.g. {BS: [72, 78, 84, 90, 96]}): `snakemake dress` also runs the
# batch planner (dress --sweep) and writes {basedir}/dress/P-sweep.json, its table and picture (docs/dress.md,
# "Plan the batch").

DRESS_SWEEP = PLAN.config.get("dress_sweep") or {}


rule dress:
    input:
        B(f"dress/{PLAN.platform}.json"),
        B(f"report/dress/{PLAN.platform}.txt"),
        B(f"report/dress/{PLAN.platform}.svg"),
        [B(f"dress/{PLAN.platform}-sweep.json"), B(f"report/dress/{PLAN.platform}-sweep.txt"),
         B(f"report/dress/{PLAN.platform}-sweep.svg")] if DRESS_SWEEP else [],


rule dress_sweep:
    input:
        bert_config=repo_path("resources/demo/bert_config.json"),
        platform_file=repo_path(PLAN.platform_file),
    output:
        json=B("dress/{platform}-sweep.json"),
        table=report(B("report/dress/{platform}-sweep.txt"), caption="../workflow/report/dress_sweep.rst",
                     category="Dress", labels={"platform": "{platform}", "figure": "the batch plan"}),
        picture=report(B("report/dress/{platform}-sweep.svg"), caption="../workflow/report/dress_sweep.rst",
                       category="Dress", labels={"platform": "{platform}", "figure": "time to train by batch"}),
    params:
        layers=PLAN.config.get("dress_layers"),
        sweep=DRESS_SWEEP,
        overrides={k: v for k, v in PLAN.train.items() if k not in DRESS_SWEEP},
        tinygrad=TINYGRAD_VERSION,
    log:
        B("logs/dress/{platform}-sweep.log"),
    conda:
        "../envs/dress.yaml"
    resources:
        mem_mb=4000,
    wildcard_constraints:
        platform=re.escape(PLAN.platform),
    script:
        "../workflow/scripts/dress_sweep.py"


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

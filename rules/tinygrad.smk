# 6'. trainer: tinygrad — tinygrad's own examples/mlperf/model_train.py on this workflow's data (instead of rule
# train of rules/train.smk; docs/tinygrad-trainer.md). The checkout is brought into the basedir and verified
# (mlperf_bert/train/tinygrad_trainer/source.py); the shards and eval set are exported as tinygrad's loader reads them and the
# initial weights as the TF checkpoint train_bert loads (mlperf_bert/train/tinygrad_trainer/export.py, tf_init.py); then train_bert's
# INIT and RUN processes, as run_and_time.sh runs them, write result_bert_<seed>.log with its train record.
# Everything of this trainer lives under {basedir}/tinygrad/; nothing else of the workflow reads it. Its settings are
# the plan's (rules/common.smk PLAN: the trainer, its source, the `train` overrides with the eval train_bert needs).
# rules/train.smk's rule train makes the same files; with trainer: tinygrad this file's rule is preferred.
if PLAN.trainer == "tinygrad":

    ruleorder: train_tinygrad > train

    rule tinygrad_checkout:
        output:
            checkout=directory(B("tinygrad/checkout")),
            record=B("tinygrad/checkout.json"),
        params:
            # the commit and the kind of source (never a local path: a moved checkout reruns nothing)
            source=PLAN.tinygrad_source.describe(),
            commit=PLAN.tinygrad_source.commit,
            # where it comes from, a local path too (kind, where, commit): handed over, not compared
            checkout_from=uncompared(dataclasses.asdict(PLAN.tinygrad_source)),
        log:
            B("logs/tinygrad/checkout.log"),
        conda:
            "../envs/tinygrad.yaml"
        resources:
            mem_mb=500,
        script:
            "../workflow/scripts/tinygrad_checkout.py"

    rule tinygrad_export:
        input:
            shards=lambda w: [ancient(p) for p in all_shards(w)],
            eval_set=ancient(B("eval/eval.shard")),
        output:
            data=directory(B("tinygrad/data")),
            stats=B("tinygrad/data.json"),
        params:
            max_seq_length=PRE["max_seq_length"],
            max_predictions_per_seq=PRE["max_predictions_per_seq"],
            space_check=uncompared(PLAN.space_check),
        log:
            B("logs/tinygrad/export.log"),
        conda:
            "../envs/data.yaml"
        resources:
            mem_mb=3000,
        script:
            "../workflow/scripts/tinygrad_export.py"

    rule tinygrad_init_weights:
        input:
            bert_config=B("download/bert_config.json"),
            init_weights=initial_weights,
        output:
            directory(B("tinygrad/init_ckpt/seed_{seed}")),
        params:
            settings=lambda w: train_settings(w.seed),
            knobs=lambda w, output: train_knobs(w.seed),  # DEBUG, DRESS_TARGET: a function of the output, not compared
        log:
            B("logs/tinygrad/init_ckpt_{seed}.log"),
        conda:
            "../envs/init_weights.yaml"
        resources:
            mem_mb=2000,
        wildcard_constraints:
            seed=r"\d+",
        script:
            "../workflow/scripts/tinygrad_init_weights.py"

    rule train_tinygrad:
        input:
            shards=lambda w: [ancient(p) for p in all_shards(w)],
            eval_set=ancient(B("eval/eval.shard")),
            bert_config=B("download/bert_config.json"),
            checkout=B("tinygrad/checkout"),
            checkout_record=B("tinygrad/checkout.json"),
            data=B("tinygrad/data"),
            init_ckpt=B("tinygrad/init_ckpt/seed_{seed}"),
            preflight=preflight_result,
        output:
            B(RESULT_LOG),
            B(TRAIN_RECORD),
        params:
            settings=lambda w: train_settings(w.seed),
            knobs=lambda w, output: train_knobs(w.seed),  # DEBUG, DRESS_TARGET: a function of the output, not compared
            commit=PLAN.tinygrad_source.commit,
            work_dir=lambda w, output: str(target_basedir(output[0], RESULT_LOG) / "tinygrad" / "work" / w.platform
                                           / f"seed_{w.seed}"),
        log:
            B(TRAIN_LOG),
        conda:
            "../envs/tinygrad.yaml"
        resources:
            gpu=train_gpus(PLAN.resolved),
            mem_mb=PLAN.train_resources["mem_mb"],
            runtime=PLAN.train_resources["runtime"],
        wildcard_constraints:
            platform=re.escape(PLAN.run_name),
            seed=r"\d+",
        script:
            "../workflow/scripts/tinygrad_train.py"

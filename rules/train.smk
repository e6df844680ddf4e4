# 6. Train BERT with tinygrad on the shards and write the MLPerf result log, one per configured seed.
# The platform (config key `platform`, set by each profile) names platforms/<platform>/platform.yaml: tinygrad
# settings and hyperparameters; config key `train` overrides any of them. Every resolved setting but the run-time
# knobs (DEBUG, DRESS_TARGET), and the tinygrad version, are compared params, so changing one reruns training.
# Shards and the eval set are ancient inputs: rebuilding a topic byte-identically must not retrain (the audit
# compares contents by hash, and each shard's hash against the one the train process recorded).
# Resume: the checkpoint directory {basedir}/train/{platform}/seed_{seed}/ is deliberately not an output, so a
# killed or failed job keeps it and the same snakemake command continues from the newest checkpoint.
rule train:
    input:
        shards=lambda w: [ancient(p) for p in all_shards(w)],
        eval_set=ancient(B("eval/eval.shard")),
        bert_config=B("download/bert_config.json"),
        init_weights=initial_weights(),
        preflight=preflight_result(),
    output:
        B(RESULT_LOG),
        # the train process's record of the shards, eval set and checkpoint it read and of the log it wrote
        # (mlperf_bert/train/record.py): written with the log, by this rule alone; the audit checks the log against it
        B(TRAIN_RECORD),
        # its final weights (sha256 in the train record): the audit evaluates a random sample of the last eval's
        # batches on them and compares the counts the record holds (mlperf_bert/audit/reexec.py)
        B(FINAL_WEIGHTS),
        # the training state at each eval (EVIDENCE_STATE_FREQ; sha256s in the train record): the audit re-executes a
        # random sample of the segments between them and compares the weights and the logged time
        # (mlperf_bert/audit/segments.py)
        directory(B(KEPT_STATES)),
    params:
        settings=lambda w: train_settings(w.seed),
        knobs=lambda w, output: train_knobs(w.seed),  # DEBUG, DRESS_TARGET: a function of the output, not compared
        tinygrad=TINYGRAD_VERSION,
        max_seq_length=PRE["max_seq_length"],
        max_predictions_per_seq=PRE["max_predictions_per_seq"],
        rehearsal_notes=PLAN.rehearsal_notes,
        space_check=uncompared(PLAN.space_check),
        # derived from the output (under the basedir), so Snakemake does not compare them: a moved tree reruns nothing
        ckpt_dir=lambda w, output: str(target_basedir(output[0], RESULT_LOG) / "train" / w.platform / f"seed_{w.seed}"),
        work_log=lambda w, output: str(target_basedir(output[0], RESULT_LOG) / "logs" / "train" / w.platform
                                       / f"result_bert_{w.seed}.partial.log"),
    log:
        B(TRAIN_LOG),
    conda:
        "../envs/train.yaml"
    resources:
        # declared once, by the platform: gpu is its GPUS (0 on CPU), mem_mb and runtime its `resources:` section
        gpu=train_gpus(PLAN.resolved),
        mem_mb=PLAN.train_resources["mem_mb"],
        runtime=PLAN.train_resources["runtime"],
    wildcard_constraints:
        platform=re.escape(PLAN.run_name),
        seed=r"\d+",
    script:
        "../workflow/scripts/train.py"

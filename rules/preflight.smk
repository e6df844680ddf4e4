# 5b. The pre-flight check of MLCommons' BERT README: the initial weights' masked-LM accuracy on the eval set,
# before any training, must be very close to 0.34085 (mlperf_bert/train/preflight.py states the band). Config key
# `preflight`: auto (the default) runs it where the platform's SUBMISSION_DIVISION is closed and the config downloads
# MLPerf's checkpoint; true runs it always (without a checkpoint it only says so); false never. When it runs, train
# takes its JSON as an input, so a failed check stops the run before the INIT phase. It runs on the training
# platform's devices, float type and settings (the train job's resources), in one process.
rule preflight:
    input:
        eval_set=ancient(B("eval/eval.shard")),
        bert_config=B("download/bert_config.json"),
        init_weights=initial_weights,
    output:
        B("preflight/{platform}.json"),
    params:
        settings=lambda w: train_settings(0),
        knobs=lambda w, output: train_knobs(0),  # DEBUG, DRESS_TARGET: a function of the output, not compared
        tinygrad=TINYGRAD_VERSION,
        max_seq_length=PRE["max_seq_length"],
        max_predictions_per_seq=PRE["max_predictions_per_seq"],
    log:
        B("logs/preflight/{platform}.log"),
    conda:
        "../envs/train.yaml"
    resources:
        gpu=train_gpus(PLAN.resolved),
        mem_mb=PLAN.train_resources["mem_mb"],
        runtime=PLAN.train_resources["runtime"],
    wildcard_constraints:
        platform=re.escape(PLAN.run_name),
    script:
        "../workflow/scripts/preflight.py"

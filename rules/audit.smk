# 7. Provenance of each result log; 8. the MLPerf submission package; the audit runs outside the DAG
#    (`python -m mlperf_bert audit {basedir}`), since it must not rebuild or write into what it checks.
rule provenance:
    input:
        log=B(RESULT_LOG),
        train_record=B(TRAIN_RECORD),
        # the final weights the train rule writes (tinygrad's own trainer writes none)
        final_weights=[B(FINAL_WEIGHTS)] if PLAN.trainer != "tinygrad" else [],
        # and the training states it kept at its evals (their sha256s are in the train record)
        kept_states=[B(KEPT_STATES)] if PLAN.trainer != "tinygrad" else [],
        downloads=provenance_downloads(),
        # the shards are those SHA256SUMS lists (mlperf_bert.audit.provenance.listed_shards): an input that waited on
        # the extract rule made Snakemake build every provenance job twice while planning
        shard_sums=ancient(B("shards/SHA256SUMS")),
        eval=ancient(B("eval/eval.shard")),
        init_weights=initial_weights(),
        # trainer tinygrad: the verified checkout's record (commit, git tree)
        trainer_record=[B("tinygrad/checkout.json")] if PLAN.trainer == "tinygrad" else [],
    output:
        B(PROVENANCE),
    params:
        # the config without basedir (the record names files by their place in it): a moved tree, the same params
        # (tinygrad_source too: a local checkout's path is not recorded; `trainer` names the commit and source kind);
        # its `train` the overrides the trainer runs (mlperf_bert/plan.py)
        config=PLAN.provenance_config,
        trainer=PLAN.trainer_info,
        basedir=lambda w, output: str(target_basedir(output[0], PROVENANCE)),  # derived: not compared
    log:
        B("logs/provenance/{platform}/{seed}.log"),
    conda:
        "../envs/audit.yaml"
    resources:
        mem_mb=300,
    script:
        "../workflow/scripts/provenance.py"


rule submission:
    """`snakemake submission`: the MLPerf package of the configured platform's seeds, checked and scored."""
    input:
        # the submitter named in the logs: SUBMISSION_ORG of the platform, unless the `train` config overrides it
        B(f"submission/{PLAN.resolved.submission.org}.{PLAN.run_name}.score.json"),


rule submission_package:
    """The package of the platform's seeds; its system (results/<system>/, systems/<system>.json) is the logs'
    submission_platform, the score file is named after the workflow's platform."""
    input:
        logs=lambda w: expand(B(RESULT_LOG), platform=w.platform, seed=PLAN.seeds),
        provenance=lambda w: expand(B(PROVENANCE), platform=w.platform, seed=PLAN.seeds),
    output:
        score=B(SUBMISSION_SCORE),
    params:
        out=lambda w, output: str(Path(output.score).parent),
        system_json=lambda w: str(system_path("", PLAN.platform)),  # in the repository
        ruleset=RULESET,
        basedir=lambda w, output: str(target_basedir(output.score, SUBMISSION_SCORE)),  # derived: not compared
    log:
        B("logs/submission/{org}.{platform}.log"),
    conda:
        "../envs/audit.yaml"
    resources:
        mem_mb=500,
    script:
        "../workflow/scripts/submission.py"


# Snakemake's report (`snakemake --report report.html`): add these outputs to a target to include them.
# The training curves of every configured seed, one figure each, from one job: a job per seed made planning slow with
# many seeds (Snakemake's own work per job; bench/bench_dryrun.py --seeds N).
rule report_runs:
    input:
        logs=train_results(),
    output:
        [
            report(
                B(RUN_FIGURE.format(platform=PLAN.run_name, seed=seed)),
                caption="../workflow/report/run.rst",
                category="Training",
                subcategory=PLAN.run_name,
                labels={"platform": PLAN.run_name, "seed": str(seed), "figure": "curves"},
            )
            for seed in PLAN.seeds
        ],
    params:
        # each seed's train job log, which holds its per-step lines (read if present); derived from the inputs
        step_logs=lambda w, input: [str(target_basedir(log, RESULT_LOG) / TRAIN_LOG.format(platform=PLAN.run_name,
                                                                                             seed=seed))
                                    for log, seed in zip(input.logs, PLAN.seeds)],
        targets=lambda w: [train_settings(seed)["TARGET"] for seed in PLAN.seeds],
        note="rehearsal on the CPU, not a result" if PLAN.rehearse else "",
    log:
        B(f"logs/report_runs/{PLAN.run_name}.log"),
    conda:
        "../envs/audit.yaml"
    resources:
        mem_mb=400,
    script:
        "../workflow/scripts/report_runs.py"


rule report_shards:
    input:
        shards=lambda w: [ancient(p) for p in all_shards(w)],
    output:
        report(B("report/shards.png"), caption="../workflow/report/shards.rst", category="Data",
               labels={"figure": "shards per topic"}),
    log:
        B("logs/report_shards/report_shards.log"),
    conda:
        "../envs/audit.yaml"
    resources:
        mem_mb=400,
    script:
        "../workflow/scripts/report_shards.py"


rule report_audit:
    input:
        logs=train_results,
        provenance=provenance_records,
        sums=B("shards/SHA256SUMS"),
    output:
        report(B(AUDIT_PAGE), caption="../workflow/report/audit.rst", category="Audit",
               labels={"table": "audit"}),
    params:
        basedir=lambda w, output: str(target_basedir(output[0], AUDIT_PAGE)),
        ruleset=RULESET,
        config=uncompared(PLAN.config),  # the config as the run has it (the audit compares the records with it)
    log:
        B("logs/report_audit/report_audit.log"),
    conda:
        "../envs/audit.yaml"
    resources:
        mem_mb=500,
    script:
        "../workflow/scripts/report_audit.py"

# rule report_runs: each configured seed's training curves for Snakemake's report, one figure per seed.
from jobglue import job_log
from mlperf_bert.audit.report import plot_run

p = snakemake.params
with job_log(snakemake.log[0]):
    # step_logs: each seed's train job log with its per-step lines; plot_run reads it when it exists
    for out, log, step_log, target in zip(snakemake.output, snakemake.input.logs, p.step_logs, p.targets, strict=True):
        print(out, plot_run(out, log, step_log, target=target, note=p.note), flush=True)

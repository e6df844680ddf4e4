# rule report_run: one seed's training curves for Snakemake's report.
from jobglue import job_log
from mlperf_bert.audit.report import plot_run

with job_log(snakemake.log[0]):
    # step_log: the trainer's job log with its per-step lines; plot_run reads it when it exists
    print(plot_run(snakemake.output[0], snakemake.input.log, snakemake.params.step_log, target=snakemake.params.target,
                   note=snakemake.params.note))

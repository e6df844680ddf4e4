# rule report_run: one seed's training curves for Snakemake's report.
from pathlib import Path

from jobglue import job_log
from mlperf_bert.audit.report import plot_run

with job_log(snakemake.log[0]):
    step_log = snakemake.params.step_log
    print(plot_run(snakemake.output[0], snakemake.input.log, step_log if Path(step_log).is_file() else None,
                   target=snakemake.params.target))

# rule report_run: one seed's training curves for Snakemake's report.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.report import plot_run
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    step_log = snakemake.params.step_log
    print(plot_run(snakemake.output[0], snakemake.input.log, step_log if Path(step_log).is_file() else None,
                   target=snakemake.params.target))

# rule report_shards: instances/tokens/bytes per topic for Snakemake's report.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.report import plot_shards
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    stats = plot_shards(snakemake.output[0], list(snakemake.input.shards))
    print(f"{len(stats)} shards, {sum(s['instances'] for s in stats)} instances")

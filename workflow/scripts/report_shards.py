# rule report_shards: instances/tokens/bytes per topic for Snakemake's report.
from jobglue import job_log
from mlperf_bert.audit.report import plot_shards

with job_log(snakemake.log[0]):
    stats = plot_shards(snakemake.output[0], list(snakemake.input.shards))
    print(f"{len(stats)} shards, {sum(s['instances'] for s in stats)} instances")

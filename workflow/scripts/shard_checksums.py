# rule shard_checksums: SHA256SUMS (sha256sum -c format) from the shards' sidecars.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.shards import write_sha256sums
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    write_sha256sums(snakemake.output[0], snakemake.input)

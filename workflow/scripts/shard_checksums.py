# rule shard_checksums: SHA256SUMS (sha256sum -c format) from the shards' sidecars.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.shards import write_checksum_list
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    write_checksum_list(snakemake.input, snakemake.output[0])

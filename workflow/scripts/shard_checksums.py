# rule shard_checksums: SHA256SUMS (sha256sum -c format) from the shards' sidecars.
from jobglue import job_log
from mlperf_bert.data.shards import write_sha256sums

with job_log(snakemake.log[0]):
    write_sha256sums(snakemake.output[0], snakemake.input)

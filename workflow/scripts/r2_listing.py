# checkpoint r2_listing: cache an R2 dataset's md5 list and base URL (the files to download are read from it).
from jobglue import REPO, job_log
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.data.r2 import fetch_listing

with job_log(snakemake.log[0]):
    fetch_listing(snakemake.params.source, snakemake.output.listing, snakemake.output.uri,
                  root=REPO, policy=FetchPolicy(**snakemake.params.download))

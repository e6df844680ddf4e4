# rule download: fetch one artifact and check its md5.
from jobglue import REPO, job_log
from mlperf_bert.data.download import fetch

with job_log(snakemake.log[0]):
    p = snakemake.params
    fetch(p.url, snakemake.output[0], md5=p.md5, root=REPO)  # relative local sources: the repository's

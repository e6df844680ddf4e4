# rule download: fetch one artifact, check its md5 and content, record its sha256 beside it.
from jobglue import REPO, job_log
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.data.download import fetch

with job_log(snakemake.log[0]):
    p, i = snakemake.params, snakemake.input
    # relative local sources are the repository's (REPO, never a param: a moved checkout would rerun)
    fetch(p.url, snakemake.output.file, md5=p.md5, path=p.path, listing=i.get("listing"), uri=i.get("uri"),
          root=REPO, sidecar=True, policy=FetchPolicy(**p.download))

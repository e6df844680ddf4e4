# rule download: fetch one artifact, check its md5 and content, record its sha256 beside it.
from pathlib import Path

from jobglue import job_log
from mlperf_bert.data.download import fetch

with job_log(snakemake.log[0]):
    p, i = snakemake.params, snakemake.input
    fetch(p.url, snakemake.output.file, md5=p.md5, path=p.path, listing=i.get("listing"), uri=i.get("uri"),
          root=Path(__file__).resolve().parents[2], sidecar=True)

# rule download: fetch one artifact and check its md5.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.download import fetch
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    p = snakemake.params
    fetch(p.url, snakemake.output[0], md5=p.md5, root=p.root)

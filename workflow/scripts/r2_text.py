# rule r2_text: one extracted text file (a topic or eval.txt) from an R2 dataset, md5-checked, resumable.
from jobglue import REPO, job_log
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.data.r2 import fetch_text_file

with job_log(snakemake.log[0]):
    fetch_text_file(snakemake.input.listing, snakemake.input.uri, snakemake.wildcards.name, snakemake.output[0],
                    dataset=snakemake.params.dataset, root=REPO,
                    policy=FetchPolicy(**snakemake.params.download))

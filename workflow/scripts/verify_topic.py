# rule verify_topic: one extracted file against the md5 manifest.
from jobglue import job_log
from mlperf_bert.data.verify import verify_file

with job_log(snakemake.log[0]):
    verify_file(snakemake.input.text, snakemake.input.manifest, stamp=snakemake.output[0])

# rule verify_topic: one extracted file against the md5 manifest.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.snakejob import job_log
from mlperf_bert.verify import verify_file

with job_log(snakemake.log[0]):
    verify_file(snakemake.input.text, snakemake.input.manifest, stamp=snakemake.output[0])

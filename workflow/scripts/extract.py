# checkpoint extract: results_text.tar.gz -> results4/, refusing unsafe members.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.extract import extract_results
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    extract_results(snakemake.input.tarball, snakemake.input.manifest, snakemake.params.dest,
                    listing=snakemake.output[0])

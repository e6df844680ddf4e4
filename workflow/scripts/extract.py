# checkpoint extract: results_text.tar.gz -> results4/, refusing unsafe members.
from jobglue import job_log
from mlperf_bert.data.extract import extract_results

with job_log(snakemake.log[0]):
    extract_results(snakemake.input.tarball, snakemake.input.manifest, snakemake.params.dest,
                    listing=snakemake.output[0], space_check=snakemake.params.space_check)

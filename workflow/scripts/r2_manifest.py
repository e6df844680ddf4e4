# rule r2_manifest: the text's md5 manifest (bert_reference_results_text_md5.txt's format) from the dataset's list.
from jobglue import job_log
from mlperf_bert.data.r2 import write_manifest

with job_log(snakemake.log[0]):
    n = write_manifest(snakemake.input.listing, snakemake.output[0], snakemake.params.dataset)
    print(f"{snakemake.output[0]}: {n} files")

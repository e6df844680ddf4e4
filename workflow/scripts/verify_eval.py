# rule verify_eval: eval.txt against the md5 manifest, then article by article against eval.md5.
from jobglue import job_log
from mlperf_bert.data.verify import verify_eval_articles, verify_file

with job_log(snakemake.log[0]):
    verify_file(snakemake.input.text, snakemake.input.manifest)
    verify_eval_articles(snakemake.input.text, snakemake.input.eval_md5, stamp=snakemake.output[0])

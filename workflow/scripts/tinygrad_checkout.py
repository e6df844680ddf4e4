# rule tinygrad_checkout: tinygrad's code into the basedir (clone + checkout, or a copy of a local checkout), verified.
from jobglue import REPO, job_log
from mlperf_bert.train.tinygrad_trainer.source import bring_checkout, parse_source

with job_log(snakemake.log[0]):
    # the source from the config, not from params (a local path is never a param)
    rec = bring_checkout(parse_source(snakemake.config.get("tinygrad_source")), snakemake.output.checkout,
                         snakemake.output.record, repo=REPO)
    print(f"tinygrad checkout: commit {rec['commit']}, git tree {rec['tree']} ({rec['source']})")

# rule tinygrad_checkout: tinygrad's code into the basedir (clone + checkout, or a copy of a local checkout), verified.
from jobglue import REPO, job_log
from mlperf_bert.train.tinygrad_trainer.source import Source, bring_checkout

with job_log(snakemake.log[0]):
    # the plan's source, handed over uncompared (a local path is never a compared param)
    rec = bring_checkout(Source(**snakemake.params.checkout_from), snakemake.output.checkout, snakemake.output.record,
                         repo=REPO)
    print(f"tinygrad checkout: commit {rec['commit']}, git tree {rec['tree']} ({rec['source']})")

# rule evalset: eval.txt -> instances with the same settings -> the picked eval set (a shard).
from jobglue import job_log
from mlperf_bert.data.evalset import build_evalset

with job_log(snakemake.log[0]):
    p = snakemake.params
    build_evalset(snakemake.input.text, snakemake.input.vocab, snakemake.output.shard,
                  num_examples=p.num_examples,
                  max_seq_length=p.max_seq_length, max_predictions_per_seq=p.max_predictions_per_seq,
                  masked_lm_prob=p.masked_lm_prob, short_seq_prob=p.short_seq_prob,
                  random_seed=p.random_seed, dupe_factor=p.dupe_factor, progress=True, space_check=p.space_check)

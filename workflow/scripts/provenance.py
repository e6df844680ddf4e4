# rule provenance: the JSON record beside a result log (config, versions, git, hashes of every input).
from jobglue import REPO, job_log
from mlperf_bert.audit.provenance import listed_shards, trainer_entry, write_provenance
from mlperf_bert.snakejob import recorded_command

with job_log(snakemake.log[0]):
    i = snakemake.input
    rec = write_provenance(
        snakemake.output[0],
        log_path=i.log,
        inputs={
            "downloads": list(i.downloads),
            "shards": listed_shards(i.shard_sums),  # every shard SHA256SUMS lists (the workflow's topics)
            "shard_sums": [i.shard_sums],
            "eval": [i.eval],
            "init_weights": list(i.init_weights),
            "train_record": [i.train_record],
            "final_weights": list(i.final_weights),
        },
        config=snakemake.params.config,
        seed=snakemake.wildcards.seed,
        platform=snakemake.wildcards.platform,
        command=recorded_command(snakemake.params.basedir) or "(not recorded)",
        repo_dir=REPO,
        basedir=snakemake.params.basedir,
        extra={"rule": snakemake.rule},
        trainer=trainer_entry(snakemake.params.trainer, list(i.trainer_record)),
    )
    print(f"wrote {snakemake.output[0]}: {sum(len(v) for v in rec['inputs'].values())} inputs, "
          f"git {rec['git'].get('commit')} dirty={rec['git'].get('dirty')}")

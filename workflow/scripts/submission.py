# rule submission_package: <org>/{systems,results,benchmarks} from the seeds' logs, package checker, summarizer, score.
from jobglue import REPO, job_log
from mlperf_bert.audit.submission import build_package, provenance_command, read_system_json
from mlperf_bert.snakejob import recorded_command

with job_log(snakemake.log[0]):
    p = snakemake.params
    # the system is the logs' submission_platform (results/<system>/, systems/<system>.json); the score file is
    # this rule's output, named after the workflow's platform. The command is the one that produced the logs (their
    # provenance records), not this `snakemake submission`.
    rec = build_package(p.out, logs=list(snakemake.input.logs), org=snakemake.wildcards.org, ruleset=p.ruleset,
                        command=provenance_command(snakemake.input.provenance,
                                                   fallback=recorded_command(p.basedir)),
                        system_overrides=read_system_json(REPO / p.system_json, missing_ok=True),
                        score_path=snakemake.output.score)
    pc = rec["package_checker"]
    print(f"package {rec['package']} (system {rec['system']}, {rec['division']} division)")
    print(f"package_checker: {'PASS' if pc['passed'] else 'FAIL'} {pc['errors']}")
    print(f"score: {rec['score_rounded']}")

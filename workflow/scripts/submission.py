# rule submission_package: <org>/{systems,results,benchmarks} from the seeds' logs, package checker, summarizer, score.
import json, os, shlex
from pathlib import Path

from jobglue import REPO, job_log
from mlperf_bert.audit.submission import build_package


def as_text(command) -> str:
    return shlex.join(command) if isinstance(command, list) else str(command)


with job_log(snakemake.log[0]):
    p = snakemake.params
    system_json = REPO / p.system_json
    overrides = json.loads(system_json.read_text()) if system_json.is_file() else None
    # the command that produced the logs is the one their provenance records hold (not this `snakemake submission`)
    commands = []
    for rec in snakemake.input.provenance:
        c = as_text(json.loads(Path(rec).read_text()).get("command") or "")
        if c and c not in commands: commands.append(c)
    if not commands:
        commands = [as_text(json.loads(os.environ.get("MLPERF_BERT_COMMAND", "[]")))]
    # the system is the logs' submission_platform (results/<system>/, systems/<system>.json); the score file is
    # this rule's output, named after the workflow's platform
    rec = build_package(p.out, logs=list(snakemake.input.logs), org=snakemake.wildcards.org, ruleset=p.ruleset,
                        command="\n".join(commands), system_overrides=overrides, score_path=snakemake.output.score)
    pc = rec["package_checker"]
    print(f"package {rec['package']} (system {rec['system']}, {rec['division']} division)")
    print(f"package_checker: {'PASS' if pc['passed'] else 'FAIL'} {pc['errors']}")
    print(f"score: {rec['score_rounded']}")

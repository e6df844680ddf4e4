# rule submission: <org>/{systems,results,benchmarks} from the seeds' logs, package checker, summarizer, score.
import json, os, sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.errors import UserError
from mlperf_bert.snakejob import job_log
from mlperf_bert.submission import build_package

with job_log(snakemake.log[0]):
    p = snakemake.params
    overrides = json.loads(Path(p.system_json).read_text()) if Path(p.system_json).is_file() else None
    rec = build_package(p.out, logs=list(snakemake.input.logs), org=snakemake.wildcards.org,
                        system=snakemake.wildcards.platform, ruleset=p.ruleset,
                        command=" ".join(json.loads(os.environ.get("MLPERF_BERT_COMMAND", "[]"))),
                        system_overrides=overrides)
    if Path(snakemake.output.score).resolve() != (Path(p.out) / f"{rec['org']}.{rec['system']}.score.json").resolve():
        raise UserError(f"the score went to {rec['org']}.{rec['system']}.score.json, not {snakemake.output.score}")
    pc = rec["package_checker"]
    print(f"package_checker: {'PASS' if pc['passed'] else 'FAIL'} {pc['errors']}")
    print(f"score: {rec['score_rounded']}")

# rule report_audit: the audit table (no dry run: Snakemake is running) for Snakemake's report, against the config
# as the run has it (the plan's, a param: `train` as the trainer runs it; mlperf_bert/plan.py).
from jobglue import REPO, job_log
from mlperf_bert.audit.report import audit_report

with job_log(snakemake.log[0]):
    p = snakemake.params
    print(audit_report(snakemake.output[0], p.basedir, ruleset=p.ruleset, workflow_dir=REPO,
                       resolved_config=dict(p.config)))

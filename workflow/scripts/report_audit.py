# rule report_audit: the audit table (no dry run: Snakemake is running) for Snakemake's report.
from jobglue import REPO, job_log
from mlperf_bert.audit.checks import format_table
from mlperf_bert.audit.tree import audit_basedir
from mlperf_bert.audit.report import audit_html

with job_log(snakemake.log[0]):
    p = snakemake.params
    audit = audit_basedir(p.basedir, ruleset=p.ruleset, workflow_dir=REPO, dry_run=False,
                          resolved_config=dict(snakemake.config))
    print(format_table(audit))
    audit_html(snakemake.output[0], audit)

# rule report_audit: the audit table (no dry run: Snakemake is running) for Snakemake's report.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))
from mlperf_bert.audit import audit_basedir, format_table
from mlperf_bert.report import audit_html
from mlperf_bert.snakejob import job_log

with job_log(snakemake.log[0]):
    p = snakemake.params
    audit = audit_basedir(p.basedir, ruleset=p.ruleset, workflow_dir=p.repo, dry_run=False,
                          resolved_config=dict(snakemake.config))
    print(format_table(audit))
    audit_html(snakemake.output[0], audit)

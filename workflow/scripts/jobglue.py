"""The one preamble of the rules' scripts (Snakemake puts this directory on sys.path): the repository's package
first on sys.path, also when it is not pip-installed, and `job_log`, which sends the job's output to its log."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: never a rule's param (a moved checkout would rerun)
sys.path.insert(0, str(REPO))

from mlperf_bert.snakejob import job_log  # noqa: E402

__all__ = ["REPO", "job_log"]

"""The one preamble of the rules' scripts (Snakemake puts this directory on sys.path): the repository's package
first on sys.path, also when it is not pip-installed, and `job_log`, which sends the job's output to its log."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: never a rule's param (a moved checkout would rerun)
sys.path.insert(0, str(REPO))

from mlperf_bert.snakejob import job_log  # noqa: E402


def job_settings(params):
    """A train, preflight or tinygrad rule's resolved settings: its `settings` param (compared: a change reruns the
    job) and its `knobs` (DEBUG, DRESS_TARGET: not compared), one typed value."""
    from mlperf_bert.train.settings import Settings
    return Settings.from_dict({**params.settings, **params.knobs})


__all__ = ["REPO", "job_log", "job_settings"]

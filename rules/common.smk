# Shared definitions: config validation, artifact paths, the topic list from the md5 manifest.
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

REPO = Path(workflow.basedir)
sys.path.insert(0, str(REPO))  # the package, also when it is not pip-installed

from mlperf_bert.config import validate_config
from mlperf_bert.errors import UserError
from mlperf_bert.extract import topics as manifest_topics

try:
    validate_config(config, REPO / "schemas" / "config.schema.yaml")
except UserError as e:
    raise WorkflowError(str(e))

BASEDIR = config["basedir"]
PRE = config["preprocessing"]
MANIFEST = "bert_reference_results_text_md5.txt"


def B(*parts):
    """A path under the run's basedir."""
    return str(Path(BASEDIR, *parts))


def repo_path(p):
    """A path from the config: absolute, or relative to the repository."""
    return str(p if Path(p).is_absolute() else REPO / p)


def all_topics(wildcards=None):
    """Training topics, read from the md5 manifest once results_text.tar.gz is extracted."""
    checkpoints.extract.get()
    return manifest_topics(B("download", MANIFEST))


def extracted(name):
    """Input function for a file of results4/: known once the extract checkpoint has run."""

    def fn(wildcards):
        checkpoints.extract.get()
        return B("results4", name.format(**wildcards))

    return fn


def all_shards(wildcards=None):
    return expand(B("shards/{topic}.shard"), topic=all_topics())


def all_shard_sums(wildcards=None):
    return expand(B("shards/{topic}.shard.sha256"), topic=all_topics())


wildcard_constraints:
    topic=r"part-\d{5}-of-\d{5}",

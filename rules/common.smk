# Shared definitions: config validation, artifact paths, the topic list from the md5 manifest.
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

REPO = Path(workflow.basedir)
sys.path.insert(0, str(REPO))  # the package, also when it is not pip-installed

from mlperf_bert.config import validate_config
from mlperf_bert.errors import UserError
from mlperf_bert.data.extract import topics as manifest_topics

try:
    validate_config(config, REPO / "schemas" / "config.schema.yaml")
except UserError as e:
    raise WorkflowError(str(e))

BASEDIR = config["basedir"]
PRE = config["preprocessing"]
MANIFEST = "bert_reference_results_text_md5.txt"
# sources.results4: a dataset holding the text already extracted (R2); else results_text.tar.gz + its manifest
TEXT_FROM_R2 = "results4" in config["sources"]


def B(*parts):
    """A path under the run's basedir."""
    return str(Path(BASEDIR, *parts))


def repo_path(p):
    """A path from the config: absolute, or relative to the repository. Inside the working directory (the demo runs
    in the checkout) it is given relative to it, so a moved checkout keeps the same input paths."""
    full = Path(p) if Path(p).is_absolute() else REPO / p
    try:
        return str(full.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(full)


def all_topics(wildcards=None):
    """Training topics, read from the md5 manifest once results_text.tar.gz is extracted (or from the R2 list)."""
    if TEXT_FROM_R2:
        from mlperf_bert.data.r2 import read_listing, text_entries

        listing = checkpoints.r2_listing.get(dataset=TEXT_DATASET).output.listing
        return sorted(n for n in text_entries(read_listing(listing), TEXT_DATASET) if n != "eval.txt")
    checkpoints.extract.get()
    return manifest_topics(B("download", MANIFEST))


def extracted(name):
    """Input function for a file of results4/: known once the extract checkpoint (or the R2 listing) has run."""

    def fn(wildcards):
        if TEXT_FROM_R2:
            checkpoints.r2_listing.get(dataset=TEXT_DATASET)
        else:
            checkpoints.extract.get()
        return B("results4", name.format(**wildcards))

    return fn


def all_shards(wildcards=None):
    return expand(B("shards/{topic}.shard"), topic=all_topics())


def all_shard_sums(wildcards=None):
    return expand(B("shards/{topic}.shard.sha256"), topic=all_topics())


wildcard_constraints:
    topic=r"part-\d{5}-of-\d{5}",


# ---- training (rules/train.smk) ----
import importlib.metadata as _im
import re as _re

from mlperf_bert.train.hparams import load_platform as _load_platform, resolve as _resolve, rule_params as _rule_params

PLATFORM = config.get("platform", "cpu")
PLATFORM_FILE = REPO / "profiles" / PLATFORM / "platform.yaml"
TINYGRAD_VERSION = _im.version("tinygrad")
try:
    _PLATFORM_SETTINGS = _load_platform(PLATFORM_FILE)
    _resolve(_PLATFORM_SETTINGS, config.get("train") or {}, seed=0, eval_examples=config["eval_examples"])
except UserError as e:
    raise WorkflowError(f"platform {PLATFORM!r}: {e}")


def train_seeds():
    return [int(s) for s in config.get("seeds", [0])]


def train_hparams(seed):
    """Every resolved hyperparameter and setting of the training run for a seed (the rule's params)."""
    hp = _resolve(_PLATFORM_SETTINGS, config.get("train") or {}, seed=int(seed), eval_examples=config["eval_examples"])
    return _rule_params(hp)


def use_initial_checkpoint():
    """Train from the converted MLPerf checkpoint when the config downloads it; else from a seeded random init."""
    return "model.ckpt-28252.index" in config["sources"]


def train_results(wildcards=None):
    """The result logs of the configured platform and seeds (targets of `rule all`)."""
    return expand(B("results/{platform}/result_bert_{seed}.log"), platform=PLATFORM, seed=train_seeds())


# ---- provenance, submission, report (rules/audit.smk) ----
def provenance_downloads(wildcards=None):
    """Every configured download: the manifest, vocab, bert_config, the text tarball, TF checkpoint files."""
    return [B("download", f) for f in FILE_SOURCES] + ([B("download", MANIFEST)] if TEXT_FROM_R2 else [])


def provenance_checkpoint(wildcards=None):
    """The converted checkpoint, when the config downloads the TF checkpoint the trainer starts from."""
    return [B("checkpoint/model.safetensors")] if "model.ckpt-28252.index" in config["sources"] else []


def provenance_records(wildcards=None):
    """The provenance record beside each result log of the configured platform and seeds."""
    return [p[: -len(".log")] + ".provenance.json" for p in train_results()]


def report_targets(wildcards=None):
    """What Snakemake's report shows: training curves per seed, shard statistics, the audit table."""
    runs = expand(B("report/{platform}/run_{seed}.png"), platform=PLATFORM, seed=train_seeds())
    return runs + [B("report/shards.png"), B("report/audit.html")]


def submission_org():
    """The submitter named in the logs: SUBMISSION_ORG of the platform, unless the `train` config overrides it."""
    return str((config.get("train") or {}).get("SUBMISSION_ORG") or _PLATFORM_SETTINGS.get("SUBMISSION_ORG", "tinycorp"))


def submission_seeds(wildcards=None):
    """The seeds whose logs go into the package: config key `seeds` (the lead's training config), else 0..9."""
    return list(config.get("seeds", range(10)))

# Shared definitions of every rules file: config validation, artifact paths, the topic list from the md5 manifest,
# the platform's resolved settings and seeds (train), the provenance/report targets (audit). Functions live here,
# not beside the rules (snakemake --lint). Snakemake puts the Snakefile's folder (the repository) first on sys.path,
# so the package is imported from this checkout.
import functools
import hashlib
import importlib.metadata
import os
import re
import sys
from pathlib import Path

from snakemake.utils import min_version

from mlperf_bert.config import CONFIG_SCHEMA, check_basedir, typed_config, validate_config
from mlperf_bert.constants import RULESET
from mlperf_bert.data import r2 as _r2
from mlperf_bert.data.shard_header import VERSION as SHARD_FORMAT
from mlperf_bert.data.extract import topics as manifest_topics
from mlperf_bert.errors import UserError
from mlperf_bert.snakejob import lock_basedir, record_command
from mlperf_bert.train.hparams import load_platform, resolve, rule_params, train_gpus, train_resources
from mlperf_bert.train.rehearsal import RESOURCES as REHEARSAL_RESOURCES, rehearsal_notes, rehearsal_settings
from mlperf_bert.train.rehearsal import check_overrides as check_rehearsal_overrides

min_version("9.0")

REPO = Path(workflow.basedir)

try:
    config.update(typed_config(config))  # --config values arrive as text
    validate_config(config, CONFIG_SCHEMA)
    check_basedir(config["basedir"], repo=REPO, workdir=Path.cwd())
except UserError as e:
    raise WorkflowError(str(e))

BASEDIR = config["basedir"]
PRE = config["preprocessing"]
MANIFEST = "bert_reference_results_text_md5.txt"
# sources.results4: a dataset holding the text already extracted (R2); else results_text.tar.gz + its manifest
TEXT_FROM_R2 = "results4" in config["sources"]


# The command line of this Snakemake run, for the provenance records and the submission README: written once into
# the basedir before the first job (never in a dry run); the jobs read it back (mlperf_bert.snakejob).
# The basedir is locked first (logs/workflow.lock, held until this Snakemake process ends): another checkout's run
# on the same basedir is refused, naming the lock's holder.
BASEDIR_LOCK = []


onstart:
    try:
        BASEDIR_LOCK.append(lock_basedir(BASEDIR, checkout=REPO, argv=sys.argv))
    except UserError as e:
        raise WorkflowError(str(e))
    record_command(BASEDIR, sys.argv)


def B(*parts):
    """A path under the run's basedir."""
    return str(Path(BASEDIR, *parts))


# The artifacts that more than one rule names, as patterns under the basedir (Snakemake wildcards)
RESULT_LOG = "results/{platform}/result_bert_{seed}.log"
TRAIN_RECORD = "results/{platform}/result_bert_{seed}.train.json"
# the train process's final weights (mlperf_bert/train/evidence.py): the audit re-executes part of the last eval on them
FINAL_WEIGHTS = "results/{platform}/result_bert_{seed}.final.safetensors"
PROVENANCE = "results/{platform}/result_bert_{seed}.provenance.json"
TRAIN_LOG = "logs/train/{platform}/seed_{seed}.log"  # the train job's log: it holds the trainer's per-step lines
RUN_FIGURE = "report/{platform}/run_{seed}.png"
AUDIT_PAGE = "report/audit.html"


def target_basedir(target, pattern):
    """The basedir of `target`, a path written B(pattern). A param derived from a job's own input or output is not
    compared by Snakemake, so a moved tree reruns nothing."""
    return Path(target).parents[len(Path(pattern).parts) - 1]


def repo_path(p):
    """A path from the config: absolute, or relative to the repository. Inside the working directory (the demo runs
    in the checkout) it is given relative to it, so a moved checkout keeps the same input paths."""
    full = Path(p) if Path(p).is_absolute() else REPO / p
    try:
        return str(full.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(full)


# ---- data (rules/download.smk, prepare.smk, shards.smk) ----
def all_topics(wildcards=None):
    """Training topics, read from the md5 manifest once results_text.tar.gz is extracted (or from the R2 list)."""
    if TEXT_FROM_R2:
        from mlperf_bert.data.r2 import read_listing, text_entries

        listing = checkpoints.r2_listing.get(dataset=TEXT_DATASET).output.listing
        return sorted(n for n in text_entries(read_listing(listing), TEXT_DATASET) if n != "eval.txt")
    checkpoints.extract.get()
    path = B("download", MANIFEST)
    return list(_manifest_topics(path, os.stat(path).st_mtime_ns))


@functools.lru_cache(maxsize=None)
def _manifest_topics(path, mtime_ns):
    """The manifest's topics, read once per version of the file (every train and provenance job asks; with many
    seeds, reading it per job made planning slow)."""
    return tuple(manifest_topics(path))


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


# ---- training (rules/checkpoint.smk, train.smk) ----
PLATFORM = config.get("platform", "cpu")
PLATFORM_FILE = REPO / "profiles" / PLATFORM / "platform.yaml"
# rehearse=true: the platform's submission path on this machine's CPU (mlperf_bert/train/rehearsal.py), its outputs
# under results/<platform>-rehearsal/ (never in place of a real run's)
REHEARSE = bool(config.get("rehearse", False))
RUN_NAME = f"{PLATFORM}-rehearsal" if REHEARSE else PLATFORM
TINYGRAD_VERSION = importlib.metadata.version("tinygrad")
# the seeds trained, provenanced, reported and packaged: config key `seeds` (the one default: seed 0 alone)
SEEDS = [int(s) for s in config.get("seeds", [0])]
try:
    PLATFORM_SETTINGS = load_platform(PLATFORM_FILE)
    REHEARSAL_NOTES = []
    check_rehearsal_overrides(config.get("train"), REHEARSE)  # a rehearsal is never closed
    if REHEARSE:
        _profile = PLATFORM_SETTINGS
        PLATFORM_SETTINGS, REHEARSAL_NOTES = rehearsal_settings(PLATFORM_SETTINGS)
    TRAIN_RESOURCES = {**train_resources(PLATFORM_FILE), **(REHEARSAL_RESOURCES if REHEARSE else {})}
    # resolved once here, so that a bad platform file or `train:` override stops the workflow before any job runs
    RESOLVED = resolve(PLATFORM_SETTINGS, config.get("train") or {}, seed=0, eval_examples=config["eval_examples"])
    if REHEARSE:  # the settings the run really has, the `train:` overrides applied
        REHEARSAL_NOTES = rehearsal_notes(_profile, RESOLVED) + REHEARSAL_NOTES
        for _note in REHEARSAL_NOTES:
            print(_note, file=sys.stderr)
except UserError as e:
    raise WorkflowError(f"platform {PLATFORM!r}: {e}")


def train_hparams(seed):
    """Every resolved hyperparameter and setting of the training run for a seed (the rule's params)."""
    return dict(_train_hparams(int(seed)))


@functools.lru_cache(maxsize=None)
def _train_hparams(seed):
    # resolved once per seed: Snakemake evaluates a job's params several times while planning (train, report_run)
    hp = resolve(PLATFORM_SETTINGS, config.get("train") or {}, seed=seed, eval_examples=config["eval_examples"])
    return rule_params(hp)


def use_initial_checkpoint():
    """Train from the converted MLPerf checkpoint when the config downloads it (never in a rehearsal: its model is
    the demo's size); else from a seeded random init."""
    return "model.ckpt-28252.index" in config["sources"] and not REHEARSE


def initial_checkpoint(wildcards=None):
    """The converted checkpoint the trainer starts from (an input of train and provenance), when there is one."""
    return [B("checkpoint/model.safetensors")] if use_initial_checkpoint() else []


def preflight_enabled():
    """Config key `preflight` (rules/preflight.smk): auto runs the check where the platform's division is closed
    (with the `train` overrides) and MLPerf's checkpoint is used; true always; false never."""
    mode = config.get("preflight", "auto")
    if mode == "auto":
        return RESOLVED.submission.division == "closed" and use_initial_checkpoint()
    return bool(mode)


def preflight_result(wildcards=None):
    """The pre-flight check's JSON, an input of train when the check runs (a failed check stops the run)."""
    return [B(f"preflight/{RUN_NAME}.json")] if preflight_enabled() else []


def train_results(wildcards=None):
    """The result logs of the configured platform and seeds (targets of `rule all`)."""
    return expand(B(RESULT_LOG), platform=RUN_NAME, seed=SEEDS)


# ---- provenance, submission, report (rules/audit.smk) ----
def provenance_downloads(wildcards=None):
    """Every configured download: the manifest, vocab, bert_config, the text tarball, TF checkpoint files."""
    return [B("download", f) for f in FILE_SOURCES] + ([B("download", MANIFEST)] if TEXT_FROM_R2 else [])


def provenance_records(wildcards=None):
    """The provenance record beside each result log of the configured platform and seeds."""
    return expand(B(PROVENANCE), platform=RUN_NAME, seed=SEEDS)


def report_targets(wildcards=None):
    """What Snakemake's report shows: training curves per seed, shard statistics, the audit table."""
    runs = expand(B(RUN_FIGURE), platform=RUN_NAME, seed=SEEDS)
    return runs + [B("report/shards.png"), B(AUDIT_PAGE)]


# ---- downloads (rules/download.smk): R2 datasets and their cached md5 lists ----


def _r2_datasets():
    """{dataset name: source} of every R2 dataset the config names (no network: the name is in the URL)."""
    out = {}
    for s in config["sources"].values():
        if _r2.is_r2(s["url"]):
            out.setdefault(_r2.dataset_name(s["url"], root=REPO), s["url"])
    return out


try:
    R2_DATASETS = _r2_datasets()
    TEXT_DATASET = _r2.dataset_name(config["sources"]["results4"]["url"], root=REPO) if TEXT_FROM_R2 else None
except UserError as e:
    raise WorkflowError(str(e))
# with results4 (the text extracted) the tarball and its manifest are not downloaded (a demo config merged under
# this one may still name them)
FILE_SOURCES = {k: v for k, v in config["sources"].items()
                if k != "results4" and not (TEXT_FROM_R2 and k in (MANIFEST, "results_text.tar.gz"))}


def _listing(source):
    """The cached md5 list and .uri of the R2 dataset a source names (empty for other sources). ancient(): listing
    the dataset again reruns only the files whose md5 changed (their params, below), not every download."""
    if not _r2.is_r2(source):
        return {}
    name = _r2.dataset_name(source, root=REPO)
    return {"listing": ancient(B(f"download/r2/{name}.md5")), "uri": ancient(B(f"download/r2/{name}.uri"))}


@functools.lru_cache(maxsize=None)
def _read_listing(path, mtime_ns):
    listing = _r2.read_listing(path)
    return listing, {n: listing[rel] for n, rel in _text_names(listing).items()}


def _text_names(listing):
    try:
        return _r2.text_entries(listing, "?")
    except UserError:
        return {}


def _listed(dataset):
    """(listing, {text name: md5}) of a cached dataset list, or (None, None) before it is fetched."""
    p = B(f"download/r2/{dataset}.md5")
    try:
        return _read_listing(p, os.stat(p).st_mtime_ns)
    except (OSError, UserError):
        return None, None


def _listed_md5(file):
    """The md5 the dataset's list gives for a download of an R2 source (None for other sources, or not yet listed)."""
    s = FILE_SOURCES[file]
    if not _r2.is_r2(s["url"]):
        return None
    listing, _ = _listed(_r2.dataset_name(s["url"], root=REPO))
    try:
        return listing[_r2.find_entry(listing, s.get("path") or file, "?")] if listing else None
    except UserError:
        return None


def _one_of(names):
    return "|".join(re.escape(n) for n in names) or "(?!)"

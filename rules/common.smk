# Shared definitions of every rules file: the run's plan (PLAN: mlperf_bert/plan.py), artifact paths, the topic list,
# the train inputs and the provenance/report targets (audit). Planning only: the logic lives in the package.
# Functions live here, not beside the rules (snakemake --lint). Snakemake puts the Snakefile's folder (the repository)
# first on sys.path, so the package is imported from this checkout.
import dataclasses
import functools
import importlib.metadata
import re
import sys
from pathlib import Path

from snakemake.utils import min_version

from mlperf_bert.constants import RULESET, system_path
from mlperf_bert.data import r2 as _r2
from mlperf_bert.data.download import MANIFEST
from mlperf_bert.data.lists import dataset_topics, listed_md5, manifest_topics, text_digest, text_md5s
from mlperf_bert.data.shard_header import VERSION as SHARD_FORMAT
from mlperf_bert.errors import UserError
from mlperf_bert.footprint import plan_footprint
from mlperf_bert.plan import plan_workflow
from mlperf_bert.snakejob import lock_basedir, record_command, reserve_inodes
from mlperf_bert.train.hparams import rule_params, run_time_knobs
from mlperf_bert.train.resources import train_gpus

min_version("9.0")

REPO = Path(workflow.basedir)

# The one plan of this run, made once: the config checked and typed into a copy (PLAN.config; --config values arrive as
# text), the platform, its resolved settings and seeds, the `train` overrides as the trainer runs them, the trainer and
# its source, the R2 datasets and downloads. Every rules file reads PLAN; none writes into `config` or rebinds a name
# of another rules file; each job reads what it needs from its rule's params, never Snakemake's `config`.
try:
    PLAN = plan_workflow(config, repo=REPO, workdir=Path.cwd(), configfiles=workflow.overwrite_configfiles,
                         cli_config=workflow.config_settings.config)
except UserError as e:
    raise WorkflowError(str(e))
# printed once, here: what a rehearsal changes, and tinygrad's widened eval
for _note in PLAN.rehearsal_notes + ([PLAN.tinygrad_eval_note] if PLAN.tinygrad_eval_note else []):
    print(_note, file=sys.stderr)

BASEDIR = PLAN.basedir
PRE = PLAN.preprocessing


# The run's footprint (mlperf_bert/footprint.py): the bytes each folder of the basedir holds when the run is done,
# against the free space there, printed once by a dry run (`snakemake -n`). It is an input function of `rule all`, the
# first one Snakemake evaluates while it builds the DAG: by then it knows whether it runs dry (not while the Snakefile is
# read). It adds no input.
FOOTPRINT_SHOWN = []


def footprint_note(wildcards=None):
    if workflow.dryrun and not FOOTPRINT_SHOWN:
        FOOTPRINT_SHOWN.append(True)
        try:
            for line in plan_footprint(PLAN, REPO).lines():
                print(line, file=sys.stderr)
        except (UserError, OSError) as e:
            print(f"footprint: not planned ({e})", file=sys.stderr)
    return []


# The command line of this Snakemake run, for the provenance records and the submission README: written once into
# the basedir before the first job (never in a dry run); the jobs read it back (mlperf_bert.snakejob).
# The basedir is locked first (logs/workflow.lock, held until this Snakemake process ends): another checkout's run
# on the same basedir is refused, naming the lock's holder; a basedir that cannot be written (read-only, not
# writable, full, out of inodes) is one line here, before any job.
BASEDIR_LOCK = []


onstart:
    try:
        BASEDIR_LOCK.append(lock_basedir(BASEDIR, checkout=REPO, argv=sys.argv))
        record_command(BASEDIR, sys.argv)
        reserve_inodes(BASEDIR)  # a job's log on a filesystem out of inodes takes one (snakejob.job_log)
    except UserError as e:
        raise WorkflowError(str(e))


def B(*parts):
    """A path under the run's basedir."""
    return str(Path(BASEDIR, *parts))


# The artifacts that more than one rule names, as patterns under the basedir (Snakemake wildcards)
RESULT_LOG = "results/{platform}/result_bert_{seed}.log"
TRAIN_RECORD = "results/{platform}/result_bert_{seed}.train.json"
# the train process's final weights (mlperf_bert/train/evidence.py): the audit re-executes part of the last eval on them
FINAL_WEIGHTS = "results/{platform}/result_bert_{seed}.final.safetensors"
# the training state it kept at its evals (mlperf_bert/train/states.py): the audit re-executes segments between them
KEPT_STATES = "results/{platform}/result_bert_{seed}.states"
PROVENANCE = "results/{platform}/result_bert_{seed}.provenance.json"
TRAIN_LOG = "logs/train/{platform}/seed_{seed}.log"  # the train job's log: it holds the trainer's per-step lines
RUN_FIGURE = "report/{platform}/run_{seed}.png"
AUDIT_PAGE = "report/audit.html"
SUBMISSION_SCORE = "submission/{org}.{platform}.score.json"


def target_basedir(target, pattern):
    """The basedir of `target`, a path written B(pattern). A param derived from a job's own input or output is not
    compared by Snakemake, so a moved tree reruns nothing."""
    return Path(target).parents[len(Path(pattern).parts) - 1]


def uncompared(value):
    """A param Snakemake hands the job but does not compare with the one it recorded (a function of the job's output
    is a derived param): changing it reruns nothing. For what a job needs that does not shape its output (the
    download bounds, the run's config) or that is a path (where tinygrad's checkout comes from)."""
    return lambda wildcards, output: value


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
    if PLAN.text_from_r2:
        return dataset_topics(checkpoints.r2_listing.get(dataset=PLAN.text_dataset).output.listing, PLAN.text_dataset)
    checkpoints.extract.get()
    return manifest_topics(B("download", MANIFEST))  # read once per version of the file (mlperf_bert/data/lists.py)


def extracted(name):
    """Input function for a file of results4/: known once the extract rule (or the R2 listing) has run."""

    def fn(wildcards):
        if PLAN.text_from_r2:
            checkpoints.r2_listing.get(dataset=PLAN.text_dataset)
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


# ---- training (rules/init_weights.smk, train.smk) ----
# rehearse=true: the platform's submission path on this machine's CPU (mlperf_bert/train/rehearsal.py), its outputs
# under results/<platform>-rehearsal/ (PLAN.run_name; never in place of a real run's). The seeds trained,
# provenanced, reported and packaged: config key `seeds` (PLAN.seeds; the one default: seed 0 alone).
TINYGRAD_VERSION = importlib.metadata.version("tinygrad")


@functools.lru_cache(maxsize=None)
def _seed_settings(seed):
    # resolved once per seed: Snakemake evaluates a job's params several times while planning (train, report_runs)
    return PLAN.settings(seed)


def train_settings(seed):
    """Every resolved setting of the training run for a seed, flat (the rule's params: changing one retrains)."""
    return rule_params(_seed_settings(int(seed)))


def train_knobs(seed):
    """The run-time knobs of a seed's run (DEBUG, DRESS_TARGET): a train rule's `knobs` param, a function of its
    output so that Snakemake does not compare it (changing a knob does not retrain)."""
    return run_time_knobs(_seed_settings(int(seed)))


def initial_weights(wildcards=None):
    """The initial weights the trainer starts from (an input of train and provenance), when there is one."""
    return [B("checkpoint/model.safetensors")] if PLAN.from_init_weights else []


def preflight_result(wildcards=None):
    """The pre-flight check's JSON (config key `preflight`), an input of train when the check runs (a failed check
    stops the run)."""
    return [B(f"preflight/{PLAN.run_name}.json")] if PLAN.preflight else []


def train_results(wildcards=None):
    """The result logs of the configured platform and seeds (targets of `rule all`)."""
    return expand(B(RESULT_LOG), platform=PLAN.run_name, seed=PLAN.seeds)


# ---- provenance, submission, report (rules/audit.smk) ----
def provenance_downloads(wildcards=None):
    """Every configured download: the manifest, vocab, bert_config, the text tarball, TF checkpoint files."""
    return [B("download", f) for f in PLAN.file_sources] + ([B("download", MANIFEST)] if PLAN.text_from_r2 else [])


def provenance_records(wildcards=None):
    """The provenance record beside each result log of the configured platform and seeds."""
    return expand(B(PROVENANCE), platform=PLAN.run_name, seed=PLAN.seeds)


def report_targets(wildcards=None):
    """What Snakemake's report shows: training curves per seed, shard statistics, the audit table."""
    runs = expand(B(RUN_FIGURE), platform=PLAN.run_name, seed=PLAN.seeds)
    return runs + [B("report/shards.png"), B(AUDIT_PAGE)]


# ---- downloads (rules/download.smk): R2 datasets and their cached md5 lists ----


def _listing(source):
    """The cached md5 list and .uri of the R2 dataset a source names (empty for other sources). ancient(): listing
    the dataset again reruns only the files whose md5 changed (their params, below), not every download."""
    if not _r2.is_r2(source):
        return {}
    name = _r2.dataset_name(source, root=REPO)
    return {"listing": ancient(B(f"download/r2/{name}.md5")), "uri": ancient(B(f"download/r2/{name}.uri"))}


def _listed_md5(file):
    """The md5 the dataset's cached list gives a download of an R2 source (None for other sources, or not yet listed):
    a param of the download, so that listing the dataset again reruns only the files whose md5 changed."""
    return listed_md5(PLAN.file_sources[file], file, B("download/r2"), root=REPO)


def _one_of(names):
    return "|".join(re.escape(n) for n in names) or "(?!)"

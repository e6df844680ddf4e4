"""The workflow's plan: every value the rules files derive from the validated config, made once by rules/common.smk.

`plan_workflow` checks and types the config as Snakemake hands it over, then `make_plan(config, repo)` reads the config
(typed and validated) and the platform file and returns a frozen
WorkflowPlan: the platform and its settings (a rehearsal's CPU stand-in), the run name and seeds, the `train`
overrides as the configured trainer runs them (tinygrad's train_bert: its eval widened, `eval_overrides`), the
resolved seed-0 Settings, the trainer and its source, and the R2 datasets and file downloads. The rules files only
read it; nothing writes into Snakemake's `config`. It prints nothing: the notes a user should see (`rehearsal_notes`,
`tinygrad_eval_note`) are fields, printed once by the workflow. The jobs read what they need of it from their rule's
params (workflow/scripts/*.py never read Snakemake's config): the download bounds as FetchPolicy's fields, typed here.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mlperf_bert.config import CONFIG_SCHEMA, check_basedir, check_seed_count, seeds_source, typed_config
from mlperf_bert.config import validate_config, without_operational
from mlperf_bert.constants import platform_path
from mlperf_bert.data import r2
from mlperf_bert.data.download import MANIFEST
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.rehearsal import RESOURCES as REHEARSAL_RESOURCES, rehearsal_notes, rehearsal_settings
from mlperf_bert.train.rehearsal import check_overrides as check_rehearsal_overrides
from mlperf_bert.train.resources import train_resources
from mlperf_bert.train.settings import Settings
from mlperf_bert.train.tinygrad_trainer.checks import check_settings, eval_overrides
from mlperf_bert.train.tinygrad_trainer.source import Source, check_local, parse_source
from mlperf_bert.urls import refuse_url_credentials

TEXT_TARBALL = "results_text.tar.gz"
CHECKPOINT_INDEX = "model.ckpt-28252.index"  # a config that downloads it trains from MLPerf's checkpoint


@dataclasses.dataclass(frozen=True)
class WorkflowPlan:
  """What the rules files read (rules/common.smk: PLAN). Lists and dicts are the values the rules hand on as params
  (a list, not a tuple, so a tree planned before keeps the same params); never modify them."""
  basedir: str                     # config `basedir`: where every artifact goes
  preprocessing: dict[str, Any]    # config `preprocessing`: create_pretraining_data.py's flags
  eval_examples: int               # config `eval_examples`: rows of the eval set
  platform: str                    # config `platform`: the name of platforms/<platform>/
  platform_file: Path              # platforms/<platform>/platform.yaml (constants.platform_path)
  rehearse: bool                   # config `rehearse`: the platform's path on this machine's CPU
  run_name: str                    # results/<run_name>/: the platform, or "<platform>-rehearsal"
  seeds: list[int]                 # config `seeds`: one training run, provenance record and figure each
  platform_settings: dict[str, Any]  # the platform file's settings (a rehearsal's, when rehearsing)
  rehearsal_notes: list[str]       # what a rehearsal changed (empty when not rehearsing)
  train_resources: dict[str, int]  # the train job's mem_mb and runtime
  train: dict[str, Any]            # config `train` overrides, as the trainer runs them (tinygrad: eval widened)
  resolved: Settings               # seed 0's settings: the platform with `train` applied
  trainer: str                     # config `trainer`: "project" or "tinygrad"
  tinygrad_source: Source          # config `tinygrad_source` (parsed for either trainer)
  trainer_info: dict[str, str]     # what the provenance records of the trainer
  tinygrad_eval_note: str | None   # the line saying tinygrad's eval was widened (None: it was not)
  from_init_weights: bool          # train from MLPerf's initial weights (its TF checkpoint, converted; the config
                                   # downloads it; no rehearsal: its model is the demo's size), else a seeded init
  preflight: bool                  # config `preflight` decided: auto runs it where the division is closed (with the
                                   # `train` overrides) and MLPerf's checkpoint is used; true always; false never
  text_from_r2: bool               # sources.results4: the text extracted, from an R2 dataset
  r2_datasets: dict[str, str]      # {dataset name: source URL} of every R2 dataset the config names
  text_dataset: str | None         # the R2 dataset of results4 (None: the tarball and its manifest)
  file_sources: dict[str, dict[str, Any]]  # {download name: source} of every file downloaded
  download: dict[str, Any]         # config `download` bounds as FetchPolicy's fields (a job: FetchPolicy(**download))
  config: dict[str, Any]           # the config as this run has it: Snakemake's, `train` as the trainer runs it
  space_check: bool = True         # config `space_check`: the jobs check their free space first (mlperf_bert/space.py)

  @property
  def provenance_config(self) -> dict[str, Any]:
    """The config a provenance record holds: no basedir (a record names files by their place in it) nor
    tinygrad_source (a local checkout's path is never recorded; the record's `trainer` names the commit), nor an
    operational setting (the schema's `x-operational: true`: space_check, download; config.without_operational)."""
    return {k: v for k, v in without_operational(self.config).items() if k not in ("basedir", "tinygrad_source")}

  def settings(self, seed: int) -> Settings:
    """The training run's resolved settings for a seed."""
    return resolve(self.platform_settings, self.train, seed=seed, eval_examples=self.eval_examples)


def plan_workflow(raw: dict[str, Any], *, repo: Path, workdir: Path, configfiles: list[str | Path],
                  cli_config: dict[str, Any] | None) -> WorkflowPlan:
  """The plan of Snakemake's `config` as it hands it over (`--config` values as text; `configfiles` and `cli_config`:
  the --configfile paths and --config values, to name the source of too many seeds). A URL with credentials left in
  it came from --config (the Snakefile checked the files); the values are typed into a copy (`raw` is never
  written); too many seeds is one line naming the file that sets them, before the schema's list of problems; a
  dangerous basedir is refused. Raises UserError."""
  refuse_url_credentials(raw, "--config (or a Snakemake profile's config:)")
  typed = typed_config(raw)
  check_seed_count(typed.get("seeds"), seeds_source(configfiles, cli_config, repo / "config.yaml"))
  validate_config(typed, CONFIG_SCHEMA)
  check_basedir(typed["basedir"], repo=repo, workdir=workdir)
  return make_plan(typed, repo)


def make_plan(config: dict[str, Any], repo: Path) -> WorkflowPlan:
  """The plan of a validated, typed config (rules/common.smk). Raises UserError, one line: "platform 'x': ..." for a
  bad platform file or `train:` override, the R2 source's own message, "trainer tinygrad: ..." for what tinygrad's
  trainer cannot run."""
  platform = config.get("platform", "cpu")
  rehearse = bool(config.get("rehearse", False))
  platform_file = platform_path(repo, platform)
  overrides = config.get("train") or {}
  eval_examples = config["eval_examples"]
  try:
    platform_spec, settings, notes = _platform(config, platform_file, rehearse)
    resources = {**train_resources(platform_file), **(REHEARSAL_RESOURCES if rehearse else {})}
    # resolved once here, so that a bad platform file or `train:` override stops the workflow before any job runs
    resolved = resolve(settings, overrides, seed=0, eval_examples=eval_examples)
    if rehearse:  # the settings the run really has, the `train:` overrides applied
      notes = rehearsal_notes(platform_spec, resolved) + notes
  except UserError as e:
    raise UserError(f"platform {platform!r}: {e}") from None
  r2_datasets, text_dataset, file_sources = _downloads(config, repo)
  trainer = config.get("trainer", "project")
  train, note = dict(overrides), None
  try:
    source = parse_source(config.get("tinygrad_source"))
    if trainer == "tinygrad":
      check_local(source, repo)  # a local checkout that is not there stops the workflow at planning
      # train_bert evaluates at least 10,000 samples: a platform with fewer (the demo) evaluates 100 x 100
      train = eval_overrides(resolved, overrides)
      if train != overrides:
        note = (f"trainer tinygrad: train_bert asserts EVAL_BS x MAX_EVAL_STEPS >= 10000; evaluating with "
                f"EVAL_BS {train['EVAL_BS']}, EVAL_SAMPLES {train['EVAL_SAMPLES']}")
      resolved = resolve(settings, train, seed=0, eval_examples=eval_examples)
      check_settings(resolved)  # what train_bert at e0139fa cannot run stops the workflow before any job
  except UserError as e:
    raise UserError(f"trainer tinygrad: {e}") from None
  info = ({"name": "tinygrad", "commit": source.commit, "source": source.describe()}
          if trainer == "tinygrad" else {"name": "project"})
  from_init_weights = CHECKPOINT_INDEX in config["sources"] and not rehearse
  preflight = config.get("preflight", "auto")
  preflight = resolved.submission.division == "closed" and from_init_weights if preflight == "auto" else bool(preflight)
  return WorkflowPlan(
    basedir=config["basedir"], preprocessing=config["preprocessing"], eval_examples=eval_examples,
    platform=platform, platform_file=platform_file, rehearse=rehearse,
    run_name=f"{platform}-rehearsal" if rehearse else platform, seeds=[int(s) for s in config.get("seeds", [0])],
    platform_settings=settings, rehearsal_notes=notes, train_resources=resources, train=train, resolved=resolved,
    trainer=trainer, tinygrad_source=source, trainer_info=info, tinygrad_eval_note=note,
    from_init_weights=from_init_weights, preflight=preflight,
    text_from_r2="results4" in config["sources"], r2_datasets=r2_datasets, text_dataset=text_dataset,
    file_sources=file_sources, download=dataclasses.asdict(FetchPolicy.bounded(**(config.get("download") or {}))),
    config=_run_config(config, train), space_check=bool(config.get("space_check", True)))


def _platform(config: dict[str, Any], platform_file: Path,
              rehearse: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
  """The platform file's settings, the settings the run has (a rehearsal's CPU stand-in) and the rehearsal's device
  note."""
  platform = load_platform(platform_file)
  check_rehearsal_overrides(config.get("train"), rehearse)  # a rehearsal is never closed
  return (platform, *rehearsal_settings(platform)) if rehearse else (platform, platform, [])


def _downloads(config: dict[str, Any], repo: Path) -> tuple[dict[str, str], str | None, dict[str, dict[str, Any]]]:
  """The R2 datasets the config names ({name: source}, no network: the name is in the URL), the dataset of the
  extracted text (sources.results4), and the files to download: with results4 the tarball and its manifest are not
  downloaded (a demo config merged under this one may still name them)."""
  sources = config["sources"]
  datasets: dict[str, str] = {}
  for s in sources.values():
    if r2.is_r2(s["url"]):
      datasets.setdefault(r2.dataset_name(s["url"], root=repo), s["url"])
  from_r2 = "results4" in sources
  text_dataset = r2.dataset_name(sources["results4"]["url"], root=repo) if from_r2 else None
  files = {k: v for k, v in sources.items() if k != "results4" and not (from_r2 and k in (MANIFEST, TEXT_TARBALL))}
  return datasets, text_dataset, files


def _run_config(config: dict[str, Any], train: dict[str, Any]) -> dict[str, Any]:
  """The config as the run has it (a copy): its `train` the overrides the trainer runs where they differ from the
  config's (what the provenance records and the report's audit compares against)."""
  out = dict(config)
  if train != (config.get("train") or {}):
    out["train"] = train
  return out

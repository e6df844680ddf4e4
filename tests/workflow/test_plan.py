"""The workflow's one plan (mlperf_bert/plan.py, made by rules/common.smk): no rules file writes into `config` or
rebinds a name another rules file binds, no job script reads Snakemake's `config` (each reads its rule's params), and
make_plan gives the demo's, a rehearsal's and tinygrad's trainer's settings from the repository's config.yaml, with a
bad platform or trainer setting one line. Seconds: no Snakemake."""
import ast
import copy
import dataclasses
import re
from pathlib import Path

import pytest

from mlperf_bert.constants import platform_path
from mlperf_bert.config import safe_yaml, typed_config
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.errors import UserError
from mlperf_bert.plan import make_plan, plan_workflow
from mlperf_bert.train.rehearsal import RESOURCES as REHEARSAL_RESOURCES
from mlperf_bert.train.tinygrad_trainer.source import PINNED_COMMIT

REPO = Path(__file__).resolve().parents[2]
RULES = sorted((REPO / "rules").glob("*.smk"))
SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))
WRITES = re.compile(r"\bconfig\s*\[[^\]]*\]\s*(?:[-+*/|&]?=(?!=))|\bdel\s+config\b|"
                    r"\bconfig\s*\.\s*(?:update|setdefault|pop|popitem|clear)\s*\(")
# a binding of a rules file's namespace: any name at column 0, an UPPER_CASE name at any depth (in a try:/if: block;
# a rule's lowercase keyword items, `name=value`, are not bindings)
BINDING = re.compile(r"^(\s*)((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s*(?:[-+*/|&]?=(?!=))")


def _code(path: Path) -> list[str]:
  return [l.split("#", 1)[0].rstrip() for l in path.read_text().splitlines()]


def _bindings(path: Path) -> set[str]:
  names = set()
  for line in _code(path):
    m = BINDING.match(line) or re.match(r"^()for\s+((?:\w+\s*,\s*)*\w+)\s+in\b", line)
    if not m: continue
    for name in (n.strip() for n in m.group(2).split(",")):
      if not m.group(1) or re.fullmatch(r"[A-Z][A-Z0-9_]*", name): names.add(name)
  return names


def test_no_rules_file_writes_config():
  bad = [f"{p.name}:{i}: {line.strip()}" for p in RULES for i, line in enumerate(_code(p), 1)
         if WRITES.search(line)]
  assert not bad, "rules files must read PLAN (mlperf_bert/plan.py), not write config: " + "; ".join(bad)


def test_no_rules_file_rebinds_another_files_name():
  owners: dict[str, list[str]] = {}
  for p in RULES:
    for name in _bindings(p): owners.setdefault(name, []).append(p.name)
  shared = {n: files for n, files in owners.items() if len(files) > 1}
  assert not shared, f"names bound in more than one rules file (define them once, in common.smk): {shared}"
  assert owners.get("PLAN") == ["common.smk"] and "RESOLVED" not in owners and "TRAINER" not in owners


def test_the_checks_catch_what_tinygrad_smk_once_did(tmp_path):
  """The two patterns the plan replaced: tinygrad.smk rewrote config["train"] and rebound RESOLVED in a try block."""
  old = tmp_path / "tinygrad.smk"
  old.write_text('try:\n    if TRAINER == "tinygrad":\n        config["train"] = _train\n'
                 '        RESOLVED = resolve(PLATFORM_SETTINGS, {})\nexcept UserError as e:\n    raise\n')
  assert WRITES.search(_code(old)[2]) and "RESOLVED" in _bindings(old) and "_train" not in _bindings(old)
  assert WRITES.search("    config.update(typed_config(config))") and WRITES.search("config.setdefault('x', 1)")
  assert not WRITES.search("    typed = typed_config(config)") and not WRITES.search('x = PLAN.config["sources"]')


def _reads_config(source: str) -> list[int]:
  """The lines of a job script that read Snakemake's config: `snakemake.config` or getattr(snakemake, "config")."""
  lines = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Attribute) and node.attr == "config" and isinstance(node.value, ast.Name) \
        and node.value.id == "snakemake":
      lines.append(node.lineno)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and [type(a) for a in node.args[:2]] == [ast.Name, ast.Constant] and node.args[0].id == "snakemake" \
        and node.args[1].value == "config":
      lines.append(node.lineno)
  return sorted(lines)


def test_no_job_script_reads_snakemake_config():
  """One road for a setting: a job reads what it needs from its rule's params, typed once by the plan; the config
  as Snakemake hands it over holds `--config` values as text and is read by the plan alone."""
  bad = [f"{p.relative_to(REPO)}:{n}" for p in SCRIPTS for n in _reads_config(p.read_text())]
  assert not bad, "job scripts must read their rule's params, never snakemake.config: " + ", ".join(bad)


def test_the_script_check_catches_what_the_jobs_once_did():
  """The reads the params replaced: the download bounds, the submission's basedir, report_audit's second plan."""
  assert _reads_config('policy = FetchPolicy.from_config(snakemake.config.get("download"))') == [1]
  assert _reads_config('b = snakemake.config["basedir"]\nc = make_plan(typed_config(snakemake.config), REPO)') == [1, 2]
  assert _reads_config('c = getattr(snakemake, "config")') == [1]
  assert _reads_config('p = snakemake.params\nf(p.config, dict(snakemake.params.download))') == []


def _config(**changes) -> dict:
  cfg = typed_config(safe_yaml((REPO / "config.yaml").read_text(), "config.yaml"))
  cfg.update(changes)
  return cfg


def test_demo_plan():
  cfg = _config()
  before = copy.deepcopy(cfg)
  plan = make_plan(cfg, REPO)
  assert cfg == before  # the config is read, never written
  assert (plan.platform, plan.run_name, plan.rehearse, plan.seeds, plan.trainer) == ("cpu", "cpu", False, [0], "project")
  assert plan.train == {} and plan.rehearsal_notes == [] and plan.tinygrad_eval_note is None
  assert plan.platform_file == platform_path(REPO, "cpu")
  assert plan.resolved.tinygrad.dev == "CPU" and plan.settings(3).seed == 3 and plan.resolved.seed == 0
  assert plan.trainer_info == {"name": "project"} and plan.tinygrad_source.commit == PINNED_COMMIT
  assert sorted(plan.file_sources) == sorted(cfg["sources"]) and not plan.text_from_r2 and plan.r2_datasets == {}
  assert "basedir" not in plan.provenance_config and plan.config == cfg
  with pytest.raises(dataclasses.FrozenInstanceError):
    plan.trainer = "tinygrad"


def test_rehearsal_plan():
  plan = make_plan(_config(platform="tinybox_green", rehearse=True), REPO)
  assert plan.run_name == "tinybox_green-rehearsal" and plan.resolved.tinygrad.dev == "CPU"
  assert plan.rehearsal_notes[0].startswith("rehearsal of tinybox_green on the CPU: DEV NV -> CPU")
  assert plan.rehearsal_notes[-1].startswith("rehearsal: GPUS 6 -> ")
  assert {k: plan.train_resources[k] for k in REHEARSAL_RESOURCES} == REHEARSAL_RESOURCES
  assert plan.resolved.submission.division == "open"


def test_tinygrad_trainer_plan_widens_the_demo_eval(tmp_path):
  (tmp_path / "tg" / "examples" / "mlperf").mkdir(parents=True)
  (tmp_path / "tg" / "examples" / "mlperf" / "model_train.py").write_text("")
  cfg = _config(trainer="tinygrad", tinygrad_source=str(tmp_path / "tg"))
  plan = make_plan(cfg, REPO)
  assert plan.train == {"EVAL_BS": 100, "EVAL_SAMPLES": 10000} and cfg["train"] == {}
  assert (plan.resolved.eval.batch_size, plan.settings(1).eval.batch_size) == (100, 100)
  assert plan.tinygrad_eval_note.endswith("evaluating with EVAL_BS 100, EVAL_SAMPLES 10000")
  assert plan.trainer_info == {"name": "tinygrad", "commit": PINNED_COMMIT, "source": "local checkout"}
  # the provenance records the eval the trainer ran; never the local path
  assert plan.provenance_config["train"] == plan.train and "tinygrad_source" not in plan.provenance_config
  # an eval the config sets is kept as it is
  kept = make_plan(_config(trainer="tinygrad", tinygrad_source=str(tmp_path / "tg"),
                          train={"EVAL_BS": 125, "EVAL_SAMPLES": 10000}), REPO)
  assert kept.tinygrad_eval_note is None and kept.train == {"EVAL_BS": 125, "EVAL_SAMPLES": 10000}


def test_download_bounds_are_typed_once_by_the_plan(tmp_path):
  """`--config download={...}` arrives as text; plan_workflow types it, and the jobs get FetchPolicy's fields."""
  assert FetchPolicy(**make_plan(_config(), REPO).download) == FetchPolicy()
  raw = safe_yaml((REPO / "config.yaml").read_text(), "config.yaml")
  raw["download"] = "{deadline_s: 30, stall_s: 5, max_file_bytes: 1000}"
  plan = plan_workflow(raw, repo=REPO, workdir=tmp_path, configfiles=[], cli_config={"download": raw["download"]})
  assert FetchPolicy(**plan.download) == FetchPolicy.bounded(deadline_s=30, stall_s=5, max_file_bytes=1000)
  d = plan.download
  assert (d["deadline_s"], d["listing_deadline_s"], d["max_file_bytes"]) == (30, 30, 1000)
  assert raw["download"] == "{deadline_s: 30, stall_s: 5, max_file_bytes: 1000}"  # typed into a copy
  raw["download"] = "{deadline_s: 0}"
  with pytest.raises(UserError, match="'download.deadline_s': 0 is less than or equal to the minimum of 0"):
    plan_workflow(raw, repo=REPO, workdir=tmp_path, configfiles=[], cli_config={})


def test_the_checkpoint_and_the_preflight_are_planned():
  """MLPerf's checkpoint is used where the config downloads it (never in a rehearsal); preflight: auto runs the check
  on a closed platform with the checkpoint, true always, false never."""
  demo = make_plan(_config(), REPO)
  assert (demo.from_init_weights, demo.preflight) == (False, False)
  sources = {**_config()["sources"], "model.ckpt-28252.index": {"url": "x/model.ckpt-28252.index", "md5": None}}
  closed = make_plan(_config(sources=sources, platform="tinybox_green"), REPO)
  assert (closed.from_init_weights, closed.preflight) == (True, True)
  assert make_plan(_config(sources=sources), REPO).preflight is False  # the cpu platform is open division
  assert make_plan(_config(sources=sources, platform="tinybox_green", preflight=False), REPO).preflight is False
  assert make_plan(_config(preflight=True), REPO).preflight is True
  rehearsal = make_plan(_config(sources=sources, platform="tinybox_green", rehearse=True), REPO)
  assert (rehearsal.from_init_weights, rehearsal.preflight) == (False, False)


@pytest.mark.parametrize("changes, start, words", [
  ({"platform": "nosuch"}, "platform 'nosuch': ", "platform file not found"),
  ({"rehearse": True, "train": {"SUBMISSION_DIVISION": "closed"}}, "platform 'cpu': ", "closed"),
  ({"trainer": "tinygrad", "train": {"EVAL_BS": 64}}, "trainer tinygrad: ", "asserts at least 10000 eval samples"),
])
def test_bad_settings_are_one_line(changes, start, words):
  with pytest.raises(UserError) as e:
    make_plan(_config(**changes), REPO)
  assert str(e.value).startswith(start) and words in str(e.value) and "\n" not in str(e.value)


def test_operational_settings_are_no_part_of_the_recorded_config():
  """space_check and the download bounds (the schema's `x-operational: true`) change no output: the config a
  provenance record holds (a compared param of rule provenance) is the same with or without them, and the audit's
  comparison drops them on both sides (an older record that holds them still compares equal)."""
  from mlperf_bert.config import operational_keys, without_operational
  assert operational_keys() == ["download", "space_check"]
  plain = make_plan(_config(), REPO)
  quiet = make_plan(_config(space_check=False, download={"stall_s": 5}), REPO)
  assert quiet.space_check is False and quiet.download["stall_s"] == 5  # the jobs still get them (uncompared params)
  assert quiet.provenance_config == plain.provenance_config
  assert "space_check" not in quiet.provenance_config and "download" not in quiet.provenance_config
  assert without_operational({**_config(), "space_check": False}) == without_operational(_config())
  # what changes an output stays: the preprocessing, seeds, train overrides
  assert without_operational(_config(seeds=[1]))["seeds"] == [1]

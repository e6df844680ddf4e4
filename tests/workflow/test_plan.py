"""The workflow's one plan (mlperf_bert/plan.py, made by rules/common.smk): no rules file writes into `config` or
rebinds a name another rules file binds, and make_plan gives the demo's, a rehearsal's and tinygrad's trainer's
settings from the repository's config.yaml, with a bad platform or trainer setting one line. Seconds: no Snakemake."""
import copy
import dataclasses
import re
from pathlib import Path

import pytest

from mlperf_bert.config import safe_yaml, typed_config
from mlperf_bert.errors import UserError
from mlperf_bert.plan import make_plan
from mlperf_bert.train.rehearsal import RESOURCES as REHEARSAL_RESOURCES
from mlperf_bert.train.tinygrad_trainer.source import PINNED_COMMIT

REPO = Path(__file__).resolve().parents[2]
RULES = sorted((REPO / "rules").glob("*.smk"))
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
  assert plan.platform_file == REPO / "profiles" / "cpu" / "platform.yaml"
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


@pytest.mark.parametrize("changes, start, words", [
  ({"platform": "nosuch"}, "platform 'nosuch': ", "platform file not found"),
  ({"rehearse": True, "train": {"SUBMISSION_DIVISION": "closed"}}, "platform 'cpu': ", "closed"),
  ({"trainer": "tinygrad", "train": {"EVAL_BS": 64}}, "trainer tinygrad: ", "asserts at least 10000 eval samples"),
])
def test_bad_settings_are_one_line(changes, start, words):
  with pytest.raises(UserError) as e:
    make_plan(_config(**changes), REPO)
  assert str(e.value).startswith(start) and words in str(e.value) and "\n" not in str(e.value)

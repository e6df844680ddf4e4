"""train/settings.py + hparams.resolve: one typed value of a run's settings, the schema the single source of its
keys, defaults, bounds and of which keys change a run's numbers. No tinygrad, no training."""
import dataclasses, io, json
from pathlib import Path

import pytest
import yaml

from mlperf_bert.constants import platform_path
from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import (KNOWN, NOT_FINGERPRINTED, PLATFORM_SCHEMA, fingerprinted, load_platform, resolve,
                                       rule_params)
from mlperf_bert.train.settings import DERIVED, KEY_FIELDS, JSON_FORMAT, Settings, read_json, to_json

REPO = Path(__file__).resolve().parents[2]
PROPS = yaml.safe_load(PLATFORM_SCHEMA.read_text())["properties"]


def test_every_schema_key_has_one_field_and_defaults_are_the_schema_s():
  assert set(KEY_FIELDS) == KNOWN | set(DERIVED)
  s = resolve({}, seed=0, eval_examples=100)
  assert dataclasses.is_dataclass(s) and s.__dataclass_params__.frozen
  with pytest.raises(dataclasses.FrozenInstanceError): s.seed = 1
  flat = s.as_dict()
  for k, p in PROPS.items():
    if k.isupper() and "default" in p and p["default"] is not None: assert flat[k] == p["default"], k
  assert s.eval.metric == PROPS["EVAL_METRIC"]["default"] == "tinygrad"  # one default, the schema's


@pytest.mark.parametrize("name", ["cpu", "tinybox_green", "tinybox_8xMI300X"])
def test_the_flat_edge_round_trips(name):
  s = resolve(load_platform(platform_path(REPO, name)), {"DEBUG": 2}, seed=4)
  assert Settings.from_dict(s.as_dict()) == s
  assert "DEBUG" not in rule_params(s) and s.tinygrad.debug == 2   # x-rule-param: false
  assert s.replace(EVAL_METRIC="pooled").eval.metric == "pooled" and s.eval.metric != "pooled"
  with pytest.raises(UserError, match="BEAM_SIZE"): Settings.from_dict({**s.as_dict(), "BEAM_SIZE": 1})


def test_what_changes_the_numbers_is_the_schema_s_annotation():
  assert NOT_FINGERPRINTED == {k for k, p in PROPS.items() if p.get("x-fingerprint") is False}
  assert NOT_FINGERPRINTED == {"CKPT", "KEEP_CKPT_AMOUNT", "SAVE_CKPT_FREQ", "EVIDENCE_STATE_FREQ", "INIT_PROCESS",
                               "CPU_THREADS"}
  a, b = resolve({}, {"CKPT": True}), resolve({}, {"CKPT": False, "INIT_PROCESS": "same"})
  assert fingerprinted(a) == fingerprinted(b) and rule_params(a) != rule_params(b)
  assert fingerprinted(resolve({}, {"TARGET": 0.5})) != fingerprinted(a)


@pytest.mark.parametrize("over,msg", [
  ({"BS": 4_000_000}, "TRAIN_STEPS=0 must be at least 1"),      # a derived value is held to the schema's minimum
  ({"EVAL_STEP_FREQ": 0}, "EVAL_STEP_FREQ"),                      # a given one is refused by the schema itself
  ({"SUBMISSION_DIVISION": "closd"}, "closd"),                    # the schema's enum
])
def test_bounds_and_choices_come_from_the_schema(over, msg):
  with pytest.raises(UserError, match=msg):
    resolve({}, over, eval_examples=100)


@pytest.mark.parametrize("name", ["cpu", "dev_1gpu", "tinybox_green", "tinybox_red", "tinybox_8xMI300X"])
def test_the_settings_file_reads_back_the_same_value(name, tmp_path, monkeypatch):
  """The train job hands its resolved settings to the INIT and RUN processes as JSON on their standard input
  (`--settings -`); `train --settings FILE` reads the same as a file: read back, the same typed value (floats to the
  bit), with and without the keys the rule's params leave out."""
  s = resolve(load_platform(platform_path(REPO, name)), {"TRAIN_STEPS": 77, "DEBUG": 2,
                                                                       "OPT_BASE_LEARNING_RATE": 0.1 + 0.2}, seed=5)
  monkeypatch.setattr("sys.stdin", io.StringIO(to_json(s)))
  back = read_json("-")                                       # what the phases read
  assert back == s and back.optimizer.base_lr == 0.1 + 0.2 and back.tinygrad.debug == 2
  job = Settings.from_dict(rule_params(s))  # what the train job has: the rule's params
  (tmp_path / "s.json").write_text(to_json(job))
  assert read_json(tmp_path / "s.json") == job and job.tinygrad.debug is None


def test_the_settings_file_is_not_resolved_again(tmp_path, monkeypatch):
  """Read as written: no default filled, nothing derived, no check of combinations (resolve made them once)."""
  import mlperf_bert.train.hparams as hparams
  monkeypatch.setattr(hparams, "resolve", lambda *a, **k: pytest.fail("resolve called"))
  f = tmp_path / "s.json"
  f.write_text(json.dumps({"format": JSON_FORMAT, "settings": {"SEED": 3, "TRAIN_STEPS": 2, "NUM_WARMUP_STEPS": 5}}))
  s = read_json(f)  # resolve would refuse NUM_WARMUP_STEPS > TRAIN_STEPS and fill the betas' defaults
  assert (s.seed, s.optimizer.train_steps, s.optimizer.warmup_steps, s.optimizer.beta_1) == (3, 2, 5, None)


@pytest.mark.parametrize("text, expect", [
  ("{", "cannot read resolved settings"),
  ('{"settings": {}}', "not a settings file"),
  ('{"format": "%s", "settings": {"BEAM_SIZE": 1}}' % JSON_FORMAT, "BEAM_SIZE"),
  ('{"format": "%s", "settings": {"BS": "4", "CKPT": 1, "TARGET": true}}' % JSON_FORMAT,
   "BS='4', CKPT=1, TARGET=True: not of the setting's type"),
])
def test_a_bad_settings_file_is_one_line_naming_it(tmp_path, text, expect):
  f = tmp_path / "s.json"
  f.write_text(text)
  with pytest.raises(UserError) as e: read_json(f)
  assert str(e.value).startswith(f"{f}: ") and expect in str(e.value) and "\n" not in str(e.value)

"""train/settings.py + hparams.resolve: one typed value of a run's settings, the schema the single source of its
keys, defaults, bounds and of which keys change a run's numbers. No tinygrad, no training."""
import dataclasses
from pathlib import Path

import pytest
import yaml

from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import (KNOWN, NOT_FINGERPRINTED, SCHEMA, fingerprinted, load_platform, resolve,
                                       rule_params)
from mlperf_bert.train.settings import DERIVED, KEY_FIELDS, Settings

REPO = Path(__file__).resolve().parents[2]
PROPS = yaml.safe_load(SCHEMA.read_text())["properties"]


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
  s = resolve(load_platform(REPO / f"profiles/{name}/platform.yaml"), {"DEBUG": 2}, seed=4)
  assert Settings.from_dict(s.as_dict()) == s
  assert "DEBUG" not in rule_params(s) and s.tinygrad.debug == 2   # x-rule-param: false
  assert s.replace(EVAL_METRIC="pooled").eval.metric == "pooled" and s.eval.metric != "pooled"
  with pytest.raises(UserError, match="BEAM_SIZE"): Settings.from_dict({**s.as_dict(), "BEAM_SIZE": 1})


def test_what_changes_the_numbers_is_the_schema_s_annotation():
  assert NOT_FINGERPRINTED == {k for k, p in PROPS.items() if p.get("x-fingerprint") is False}
  assert NOT_FINGERPRINTED == {"CKPT", "KEEP_CKPT_AMOUNT", "SAVE_CKPT_FREQ", "INIT_PROCESS", "CPU_THREADS"}
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

"""Config validation: the shipped configs pass; unknown keys and wrong types are named."""
from pathlib import Path

import pytest, yaml

from mlperf_bert.config import validate_config
from mlperf_bert.errors import UserError

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schemas" / "config.schema.yaml"


@pytest.mark.parametrize("name", ["config.yaml", "config/mlperf.yaml"])
def test_shipped_configs_are_valid(name):
  validate_config(yaml.safe_load((REPO / name).read_text()), SCHEMA)


def test_unknown_key_and_wrong_type_are_named():
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg["preprocessing"]["max_seq_lenght"] = 128
  cfg["preprocessing"]["dupe_factor"] = "ten"
  with pytest.raises(UserError) as e:
    validate_config(cfg, SCHEMA)
  msg = str(e.value)
  assert "unknown key 'preprocessing.max_seq_lenght'" in msg
  assert "'preprocessing.dupe_factor' must be of type integer, got string 'ten'" in msg
  assert "Fix these keys" in msg

"""Inputs a careless user can mix up, refused by the schema and the config checks before any job runs: download
bounds, a dangerous basedir, a platform name that leaves profiles/."""
import pytest, yaml

from mlperf_bert.config import validate_config
from mlperf_bert.data.fetch_http import FetchPolicy
from mlperf_bert.errors import UserError
from workflow_helpers import REPO

SCHEMA = REPO / "schemas" / "config.schema.yaml"


def _config(**changes):
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg.update(changes)
  return cfg


def test_download_bounds_are_validated_and_reach_the_policy():
  validate_config(_config(download={"deadline_s": 30, "stall_s": 5, "max_file_bytes": 1000}), SCHEMA)
  p = FetchPolicy.from_config({"deadline_s": 30, "stall_s": 5, "max_file_bytes": 1000})
  assert (p.deadline_s, p.stall_s, p.max_file_bytes, p.listing_deadline_s) == (30, 5, 1000, 30)
  assert FetchPolicy.from_config(None) == FetchPolicy()
  with pytest.raises(UserError, match="'download.stall_s': 0 is less than or equal to the minimum of 0"):
    validate_config(_config(download={"stall_s": 0}), SCHEMA)
  with pytest.raises(UserError, match="unknown key 'download.timeout'"):
    validate_config(_config(download={"timeout": 5}), SCHEMA)

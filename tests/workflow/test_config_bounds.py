"""The schema carries the real bounds of the preprocessing settings: a value every shard job (or training) would
fail on stops the workflow before any job runs, naming the key and the bound."""
from pathlib import Path

import pytest, yaml

from mlperf_bert.config import validate_config
from mlperf_bert.errors import UserError
from workflow_helpers import REPO, snakemake, write_config

SCHEMA = REPO / "schemas" / "config.schema.yaml"


@pytest.mark.parametrize("key,value,why", [
  ("max_seq_length", 70000, "70000 is greater than the maximum of 512"),
  ("max_seq_length", 513, "513 is greater than the maximum of 512"),
  ("max_predictions_per_seq", 600, "600 is greater than the maximum of 512"),
  ("max_seq_length", 4, "4 is less than the minimum of 8"),
])
def test_out_of_bounds_preprocessing_is_named(key, value, why):
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg["preprocessing"][key] = value
  with pytest.raises(UserError, match=f"'preprocessing.{key}': {why}"):
    validate_config(cfg, SCHEMA)


def test_out_of_bounds_seed_is_named():
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg["seeds"] = [2**32]
  with pytest.raises(UserError, match="'seeds.0': 4294967296 is greater than the maximum"):
    validate_config(cfg, SCHEMA)


def test_workflow_stops_before_any_job(tmp_path):
  cfg = write_config(tmp_path / "config.yaml", Path("base"), max_seq_length=70000)
  r = snakemake(tmp_path, "-n", configfile=cfg, check=False)
  out = r.stdout + r.stderr
  assert r.returncode != 0 and "'preprocessing.max_seq_length': 70000 is greater than the maximum of 512" in out, out
  assert "Traceback" not in out and not (tmp_path / "base").exists()

"""Config and platform-file validation: unknown keys and wrong types are named. (The shipped configs and platform
files pass: test_lint_dryrun.py dry-runs each of them.)"""
from pathlib import Path

import pytest, yaml

from mlperf_bert.config import load_schema, parse_text_values, validate_config
from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import load_platform, resolve
from mlperf_bert.train.resources import train_resources

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schemas" / "config.schema.yaml"


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


def test_platform_file_is_checked_by_its_schema(tmp_path):
  bad = tmp_path / "platform.yaml"
  bad.write_text("BS: 8\nBEAM_SIZE: 2\nresources: {mem_mb: lots}\n")
  with pytest.raises(UserError) as e:
    load_platform(bad)
  msg = str(e.value)
  assert msg.startswith(f"{bad} is invalid") and "platform.schema.yaml" in msg
  assert "unknown key 'BEAM_SIZE'" in msg
  assert "key 'resources.mem_mb' must be of type integer, got string 'lots'" in msg
  # the train job's resources: the file's, else the schema's defaults; never part of the hyperparameters
  good = tmp_path / "good.yaml"
  good.write_text("GPUS: 2\nresources: {runtime: 90}\n")
  assert train_resources(good) == {"mem_mb": 2000, "runtime": 90}
  assert load_platform(good) == {"GPUS": 2}
  with pytest.raises(UserError, match="`resources` are the train job's Snakemake resources, not a setting of the run"):
    resolve(load_platform(good), {"resources": {"mem_mb": 5}}, where="--set")


def test_command_line_text_is_parsed_where_the_schema_wants_no_string():
  """Snakemake's --config hands nested values over as text: seeds=[0,1] arrives as ['0', '1']."""
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg.update(seeds=["0", "1"], eval_examples="512", basedir="123", preprocessing={**cfg["preprocessing"], "dupe_factor": "2"})
  parsed = parse_text_values(cfg, load_schema(SCHEMA))
  validate_config(parsed, SCHEMA)
  assert parsed["seeds"] == [0, 1] and parsed["eval_examples"] == 512 and parsed["preprocessing"]["dupe_factor"] == 2
  assert parsed["basedir"] == "123"  # a string key stays text
  with pytest.raises(UserError, match=r"key 'seeds.1' must be of type integer, got string 'one'"):
    validate_config(parse_text_values(dict(cfg, seeds=["0", "one"]), load_schema(SCHEMA)), SCHEMA)

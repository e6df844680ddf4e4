"""The schema carries the real bounds of the preprocessing settings: a value every shard job (or training) would
fail on stops the workflow before any job runs, naming the key and the bound."""
from pathlib import Path

import pytest, yaml

from mlperf_bert.config import check_seed_count, max_seeds, seeds_source, validate_config
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


def test_too_many_seeds_are_counted_not_listed():
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg["seeds"] = list(range(max_seeds() + 1))
  with pytest.raises(UserError) as e:
    validate_config(cfg, SCHEMA)
  assert f"'seeds' has {max_seeds() + 1:,} entries, more than the maximum of {max_seeds():,}" in str(e.value)
  assert str(max_seeds() - 1) not in str(e.value)  # the list is not printed
  cfg["seeds"] = list(range(max_seeds()))
  validate_config(cfg, SCHEMA)  # the bound itself plans


def test_seeds_source_names_where_the_seeds_come_from(tmp_path):
  a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
  a.write_text("seeds: [1, 2]\n"); b.write_text("basedir: x\n# seeds: [3]\n")
  assert seeds_source([a, b], {}, "config.yaml") == str(a)
  assert seeds_source([b], {}, "config.yaml") == "config.yaml"
  assert seeds_source([a], {"seeds": "[1]"}, "config.yaml") == "--config seeds=..."
  n = max_seeds()
  check_seed_count(list(range(n)), "f.yaml")  # the bound itself is accepted
  with pytest.raises(UserError, match=rf"^f\.yaml: {n + 1:,} seeds, more than the {n:,} .*split the seeds"):
    check_seed_count(list(range(n + 1)), "f.yaml")


def test_ten_thousand_seeds_are_refused_in_one_line_before_any_job(tmp_path):
  """A config of 10,000 seeds is refused at once (Snakemake would take minutes to plan 30,000 jobs), naming the file,
  the bound and the fix."""
  cfg = write_config(tmp_path / "many.yaml", Path("base"), seeds=list(range(10000)))
  r = snakemake(tmp_path, "-n", configfile=cfg, check=False)
  out = r.stdout + r.stderr
  line = f"{cfg}: 10,000 seeds, more than the {max_seeds():,} one workflow plans"
  assert r.returncode != 0 and line in out, out
  msg = next(l for l in out.splitlines() if l.startswith(line))
  assert "10 runs" in msg and "split the seeds over several config files" in msg, msg
  assert "Traceback" not in out and not (tmp_path / "base").exists()

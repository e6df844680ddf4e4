"""The tinybox platforms against tinygrad's v5.1 BERT scripts, key for key (tests/fixtures/tinygrad-v5.1-scripts/).

The committed table lists every KEY=VALUE of the three platforms' run_and_time.sh / dev_run.sh / dev_beam.sh, what
each key is here, and the values each resolved platform must have. Every script key must be accounted for, every
run_and_time.sh value must be the platform's, and the table's script section must be what the scripts say (checked
against tinygrad's source when the mirror is on this machine; CI has no mirror and checks the rest).
"""
import shlex, subprocess
from pathlib import Path

import pytest
import yaml

from mlperf_bert.constants import platform_path
from mlperf_bert.train.hparams import load_platform, resolve, KNOWN
from conftest import FIXTURES

REPO = Path(__file__).resolve().parents[2]
TABLE = yaml.safe_load((FIXTURES / "tinygrad-v5.1-scripts/expected.yaml").read_text())
MIRROR = Path("/work/.mirror/tinygrad+tinygrad/repo")
PLATFORMS = list(TABLE["platforms"])


def _resolved(name):
  return resolve(load_platform(platform_path(REPO, name)), seed=0).as_dict()


@pytest.mark.parametrize("name", PLATFORMS)
def test_platform_has_the_v51_values(name):
  want = dict(TABLE["platforms"][name])
  absent = want.pop("absent", [])
  hp = _resolved(name)
  for k, v in want.items():
    assert hp.get(k) == (pytest.approx(v) if isinstance(v, float) else v), (name, k, hp.get(k), v)
  raw = load_platform(platform_path(REPO, name))
  assert not set(absent) & set(raw), (name, set(absent) & set(raw))


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_script_key_is_accounted_for(name):
  keys = TABLE["keys"]
  hp = _resolved(name)
  for script, sections in TABLE["scripts"][name].items():
    for section, env in sections.items():
      for k, v in env.items():
        assert k in keys, f"{name}/{script} sets {k}: add it to the table's keys"
        target = keys[k].get("platform")
        if target is None or script != "run_and_time.sh": continue
        assert target in KNOWN
        want = keys[k].get("value_map", {}).get(v, v)
        got = hp[target]
        assert str(got) == str(want) or (isinstance(got, float) and got == pytest.approx(float(want))), \
          (name, script, section, k, v, target, got)


@pytest.mark.parametrize("name", PLATFORMS)
def test_two_commands_are_two_processes(name):
  # run_and_time.sh starts model_train.py twice (INITMLPERF, then RUNMLPERF): INIT_PROCESS separate
  assert {"init", "run"} <= set(TABLE["scripts"][name]["run_and_time.sh"])
  assert _resolved(name)["INIT_PROCESS"] == "separate"


def test_removed_tinygrad_settings_are_refused():
  from mlperf_bert.errors import UserError
  for k in ("FUSE_ARANGE", "FUSE_ARANGE_UINT"):
    with pytest.raises(UserError, match="unknown key"):
      resolve({}, {k: 1})


def _parse(text):
  out = {"export": {}, "init": {}, "run": {}}
  for line in text.splitlines():
    line = line.split("#")[0].strip()
    if line.startswith("export "):
      out["export"].update(tok.split("=", 1) for tok in shlex.split(line[7:]))
    elif "examples/mlperf/model_train.py" in line:
      env = dict(tok.split("=", 1) for tok in shlex.split(line.split("python3")[0].split("&&")[-1]))
      out["init" if env.get("INITMLPERF") else "run"] = env
  return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize("name", PLATFORMS)
def test_table_is_what_the_scripts_say(name):
  if not MIRROR.is_dir(): pytest.skip(f"{MIRROR} absent (CI): the table is checked against the committed values only")
  base = "examples/mlperf/training_submission_v5.1/tinycorp/benchmarks/bert/implementations"
  for script, sections in TABLE["scripts"][name].items():
    text = subprocess.run(["git", "-C", str(MIRROR), "show", f"{TABLE['tinygrad_commit']}:{base}/{name}/{script}"],
                          capture_output=True, text=True, check=True).stdout
    assert _parse(text) == sections, (name, script)

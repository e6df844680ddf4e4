"""Inputs a careless user can mix up, refused by the schema and the config checks before any job runs: download
bounds, a dangerous basedir, a platform name that leaves platforms/."""
import re, resource, subprocess, sys

import pytest, yaml

from mlperf_bert.config import check_basedir, parse_text_values, validate_config
from mlperf_bert.data.http import FetchPolicy
from mlperf_bert.errors import UserError
from mlperf_bert.train.hparams import load_platform
from workflow_helpers import REPO, snakemake

SCHEMA = REPO / "schemas" / "config.schema.yaml"


def _config(**changes):
  cfg = yaml.safe_load((REPO / "config.yaml").read_text())
  cfg.update(changes)
  return cfg


def test_download_bounds_are_validated_and_reach_the_policy():
  validate_config(_config(download={"deadline_s": 30, "stall_s": 5, "max_file_bytes": 1000}), SCHEMA)
  p = FetchPolicy.bounded(deadline_s=30, stall_s=5, max_file_bytes=1000)
  assert (p.deadline_s, p.stall_s, p.max_file_bytes, p.listing_deadline_s) == (30, 5, 1000, 30)
  # the bounds a config leaves out keep their defaults; the jobs get them from the plan (tests/workflow/test_plan.py)
  assert FetchPolicy.bounded() == FetchPolicy() and FetchPolicy.bounded(stall_s=5).deadline_s == FetchPolicy.deadline_s
  with pytest.raises(UserError, match="'download.stall_s': 0 is less than or equal to the minimum of 0"):
    validate_config(_config(download={"stall_s": 0}), SCHEMA)
  with pytest.raises(UserError, match="unknown key 'download.timeout'"):
    validate_config(_config(download={"timeout": 5}), SCHEMA)


@pytest.mark.parametrize("basedir,why", [
  # '..' and '../..' name a shared or system folder too when the checkout is in one (a clone in /tmp/x)
  ("/", "the filesystem root"), ("..", "above the checkout|a folder shared|a system folder"),
  ("../..", "the filesystem root|above the checkout|a folder shared|a system folder"), (".", "the checkout"),
  ("/etc/mlperf", "a system folder"),
  ("/usr", "a system folder"), ("/tmp", "a folder shared by everything"), ("/home", "a folder shared by everything"),
])
def test_a_dangerous_basedir_is_refused(basedir, why):
  with pytest.raises(UserError, match=f"basedir '{re.escape(basedir)}' is .*({why})") as e:
    check_basedir(basedir, repo=REPO, workdir=REPO)
  assert "\n" not in str(e.value)


def test_ordinary_basedirs_pass(tmp_path):
  assert check_basedir("results/demo", repo=REPO, workdir=REPO) == REPO / "results/demo"
  assert check_basedir("base", repo=REPO, workdir=tmp_path) == tmp_path / "base"
  assert check_basedir(".", repo=REPO, workdir=tmp_path) == tmp_path  # the working directory itself
  assert check_basedir(str(tmp_path / "x"), repo=REPO, workdir=REPO) == tmp_path / "x"
  with pytest.raises(UserError, match="above the working directory"):
    check_basedir("..", repo=REPO, workdir=tmp_path / "wd")


@pytest.mark.parametrize("platform", ["..", ".", ".hidden", "../cpu", "a/b"])
def test_a_platform_outside_platforms_is_refused(platform):
  with pytest.raises(UserError, match=r"key 'platform': .* does not match"):
    validate_config(_config(platform=platform), SCHEMA)
  validate_config(_config(platform="tinybox_8xMI300X"), SCHEMA)


def _laughs(levels: int, top: str = "BS") -> str:
  """"Billion laughs": each level an anchored list of ten aliases of the one before."""
  lines = ["l0: &l0 [lol]"] + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
  return "\n".join(lines) + f"\n{top}: *l{levels - 1}\n"


def test_yaml_aliases_in_a_platform_file_are_refused(tmp_path):
  bomb = tmp_path / "platform.yaml"
  bomb.write_text(_laughs(3))  # small: today's code would expand 1000 values, not a billion
  with pytest.raises(UserError, match=r"platform.yaml:2: YAML alias \*l0: aliases are refused") as e:
    load_platform(bomb)
  assert "\n" not in str(e.value)
  with pytest.raises(UserError, match="YAML alias"):
    parse_text_values("{A: &a 1, B: *a}", {"type": "object"})


def test_yaml_aliases_in_a_config_file_stop_the_workflow(tmp_path):
  cfg = tmp_path / "config.yaml"
  cfg.write_text((REPO / "config.yaml").read_text() + "\nx_anchor: &s [0]\nseeds: *s\n")
  r = snakemake(tmp_path, "-n", configfile=cfg, check=False, timeout=120)
  out = r.stdout + r.stderr
  assert r.returncode != 0 and f"{cfg}:" in out and "YAML alias *s: aliases are refused" in out, out[-3000:]
  assert "Traceback" not in out and not (tmp_path / "results").exists()


def test_a_refused_basedir_stops_the_workflow_before_anything_runs(tmp_path):
  r = snakemake(tmp_path, "-n", "--config", "basedir=../..", check=False, timeout=120)
  out = r.stdout + r.stderr
  assert r.returncode != 0 and "basedir '../..' is" in out and "to a folder of its own" in out, out[-3000:]
  assert "Traceback" not in out


def test_a_basedir_that_is_a_file_is_one_line(tmp_path):
  (tmp_path / "afile").write_text("not a folder")
  for basedir, why in (("afile", "a file, not a folder"), ("afile/sub", f"under {tmp_path / 'afile'}, which is a file")):
    with pytest.raises(UserError, match=f"basedir '{basedir}' is .*{why}") as e:
      check_basedir(basedir, repo=REPO, workdir=tmp_path)
    assert "\n" not in str(e.value)
  r = snakemake(tmp_path, "-n", "--config", "basedir=afile", check=False, timeout=120)  # was a 13-line traceback
  out = r.stdout + r.stderr
  assert r.returncode != 0 and "a file, not a folder; every artifact" in out and "Traceback" not in out, out[-3000:]
  assert "NotADirectoryError" not in out


def _mapping_bomb(path, levels: int = 9):
  """A billion laughs of mappings (10**8 leaves once expanded, at 9 levels): Snakemake's merge of a --configfile
  (snakemake.utils.update_config) copies every mapping of it."""
  lines = ["l0: &l0 {a: lol}"] + [f"l{i}: &l{i} {{" + ", ".join(f"k{j}: *l{i - 1}" for j in range(10)) + "}"
                                  for i in range(1, levels)]
  path.write_text("\n".join(lines) + f"\ntrain: *l{levels - 1}\n")
  return path


def _bomb_refused(bomb) -> str:
  return (f"error: {bomb}:2: YAML alias *l0: aliases are refused in this file (a few nested ones expand to gigabytes); "
          "write the value out instead of referring to an anchor")


def test_check_config_refuses_nested_mapping_aliases_before_snakemake_would_hang(tmp_path, capsys):
  """Snakemake merges a --configfile itself, before the Snakefile runs, and exhausts its memory on nested mapping
  aliases (docs/reliability.md I9): `python -m mlperf_bert check-config FILE` refuses them in one line, at the first
  alias."""
  import time
  from mlperf_bert.cli import main as cli_main
  bomb = _mapping_bomb(tmp_path / "bomb.yaml")
  t = time.process_time()
  assert cli_main(["check-config", str(bomb)]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [_bomb_refused(bomb)] and time.process_time() - t < 5
  ok = tmp_path / "seeds.yaml"
  ok.write_text("seeds: [0, 1, 2]\n")
  assert cli_main(["check-config", str(ok)]) == 0 and "valid over" in capsys.readouterr().out
  (tmp_path / "bad.yaml").write_text("seeds: ten\n")
  assert cli_main(["check-config", str(tmp_path / "bad.yaml")]) == 2
  assert "key 'seeds' must be of type array" in capsys.readouterr().err


def _one_gib():
  resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_the_demo_checks_the_config_files_snakemake_would_load_first(tmp_path, capsys):
  """Snakemake loads and merges every config file its arguments name (--configfile, a profile's `configfile`) while
  it reads its command line, before the Snakefile runs (docs/reliability.md I9): scripts/demo.sh runs
  `check-config --snakemake-args` on its arguments first, which finds those files with Snakemake's own parser and
  refuses a bomb in one line, in bounded memory (1 GiB of address space), and says nothing of clean files."""
  from mlperf_bert.cli import main as cli_main
  bomb = _mapping_bomb(tmp_path / "bomb.yaml")
  profile = tmp_path / "profile"
  profile.mkdir()
  (profile / "config.yaml").write_text(f"configfile: [{bomb}]\ncores: 1\n")
  p = subprocess.run([sys.executable, "-m", "mlperf_bert", "check-config", "--snakemake-args", "all", "-n",
                      "--profile", str(profile)], capture_output=True, text=True, timeout=300, cwd=REPO,
                     preexec_fn=_one_gib)
  assert p.returncode == 2 and p.stderr.strip().splitlines() == [_bomb_refused(bomb)], p.stdout + p.stderr[-3000:]
  ok = tmp_path / "ok.yaml"
  ok.write_text("seeds: [0, 1]\n")
  assert cli_main(["check-config", "--snakemake-args", "-n", "--configfile", str(ok), "--cores", "2"]) == 0
  assert capsys.readouterr() == ("", "")
  assert cli_main(["check-config", "--snakemake-args", "--configfile", str(ok), str(bomb), "-n"]) == 2
  assert capsys.readouterr().err.strip() == _bomb_refused(bomb)
  demo = (REPO / "scripts" / "demo.sh").read_text().splitlines()
  check = demo.index('.venv/bin/python -m mlperf_bert check-config --snakemake-args "${args[@]}"')
  assert demo[check + 1] == 'exec .venv/bin/snakemake "${args[@]}"' and "set -euo pipefail" in demo


def test_a_url_login_with_a_space_is_refused_before_any_job_and_written_nowhere(tmp_path, capsys):
  """`url: "http://alice:s3 cret@host/vocab.txt"` (a password with a space, which a pattern ending at a space missed):
  urllib3 reads a user-info in it, so check-config and the workflow's config load refuse it in one line naming the
  file and the key, never the secret; after the refused dry runs (a --configfile, a --config) no file under the
  working directory (.snakemake/ included) holds it."""
  from mlperf_bert.cli import main as cli_main
  secret = "s3 cret"
  cfg = tmp_path / "mirror.yaml"
  cfg.write_text(f'sources:\n  vocab.txt: {{url: "http://alice:{secret}@127.0.0.1:9/vocab.txt", md5: null}}\n')
  assert cli_main(["check-config", str(cfg)]) == 2
  out, err = capsys.readouterr()
  assert err.startswith(f"error: {cfg}: sources.vocab.txt.url gives a URL with a user name or password") and \
    "chmod 600" in err and secret not in out + err and "alice" not in out + err, err
  runs = [snakemake(tmp_path, "-n", configfile=cfg, check=False, timeout=120),
          snakemake(tmp_path, "-n", "--config", f'sources={{vocab.txt: {{url: "http://alice:{secret}@h/v.txt", '
                    'md5: null}}', check=False, timeout=120)]
  for r, where in zip(runs, (str(cfg), "--config")):
    said = r.stdout + r.stderr
    assert r.returncode != 0 and f"{where}" in said and "gives a URL with a user name or password" in said, said[-3000:]
    assert secret not in said and "s3%20cret" not in said and "Traceback" not in said, said[-3000:]
  cfg.unlink()
  assert not [p for p in tmp_path.rglob("*") if p.is_file() and (b"s3 cret" in p.read_bytes() or b"s3%20cret" in
                                                                  p.read_bytes())]

"""The lock (lock/py*.txt): it follows pyproject.toml, the conda environments follow it, and scripts/setup.sh
refuses a lock line without a hash, or a file whose hash is not the lock's, in one line (offline: a tiny wheel)."""
import base64, hashlib, os, shutil, subprocess, sys, zipfile
from pathlib import Path

import pytest

from mlperf_bert.envs import ENV_PYTHON, ENVS, env_path, env_pins
from mlperf_bert.lock import (PYTHONS, SETUP, canonical, lock_disagreements, lock_path, read_lock, requirements_of)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("py", list(PYTHONS))
def test_the_lock_follows_pyproject(py):
  path = lock_path(REPO, py)
  assert lock_disagreements(REPO / "pyproject.toml", path) == []
  lock = read_lock(path)
  assert all(l.hashes and l.groups for l in lock.values())
  assert {"uv", "setuptools"} <= {k for k, l in lock.items() if SETUP in l.groups}


def test_a_pyproject_that_asks_for_another_version_or_package_disagrees(tmp_path):
  text = (REPO / "pyproject.toml").read_text()
  assert '"numpy>=1.26",' in text and '"tqdm>=4.66",' in text
  moved = tmp_path / "pyproject.toml"
  moved.write_text(text.replace('"numpy>=1.26",', '"numpy<2",').replace('"tqdm>=4.66",', '"tqdm>=4.66", "rich-click",'))
  why = lock_disagreements(moved, lock_path(REPO, "3.11"))
  assert any("resolved from other requirements" in w for w in why)
  assert any(w.startswith("numpy ") and "asks <2" in w for w in why), why
  assert any(w.startswith("rich-click (base) is not in") for w in why), why


def test_the_conda_environments_carry_the_locks_versions():
  lock = read_lock(lock_path(REPO, ENV_PYTHON))
  assert sorted(p.stem for p in (REPO / "envs").glob("*.yaml")) == sorted(ENVS)
  for name, (_, _, top) in ENVS.items():
    py, pins = env_pins(env_path(REPO, name))
    assert py == ENV_PYTHON, name
    assert {canonical(t) for t in top} <= set(pins), name
    assert {k: v for k, v in pins.items()} == {k: lock[k].version for k in pins if k in lock}, name
    assert set(pins) <= set(lock), (name, set(pins) - set(lock))


def tiny_wheel(where: Path, name="tinypkg48", version="1.0") -> Path:
  """A pure-Python wheel built by hand (no build tools, no network)."""
  whl = where / f"{name}-{version}-py3-none-any.whl"
  info = f"{name}-{version}.dist-info"
  files = {f"{name}/__init__.py": b"X = 1\n",
           f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
           f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
  def rec(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
  record = "".join(f"{p},{rec(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
  with zipfile.ZipFile(whl, "w") as z:
    for p, d in {**files, f"{info}/RECORD": record.encode()}.items(): z.writestr(p, d)
  return whl


def run_setup(repo: Path, lock_text: str, wheels: Path, with_uv: bool):
  """scripts/setup.sh in a copy of the scripts with `lock_text` as the running Python's lock, pip and uv offline
  with `wheels` as their only source; with_uv: the venv holds this venv's uv at the version the lock names."""
  shutil.copytree(REPO / "scripts", repo / "scripts")
  shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
  (repo / "lock").mkdir()
  lock_path(repo).write_text(lock_text)
  subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if with_uv else []), str(repo / ".venv")], check=True)
  if with_uv:  # this venv's uv, installed (its record copied: uv pip sync finds the lock's uv there)
    os.symlink(Path(sys.executable).parent / "uv", repo / ".venv/bin/uv")
    from importlib.metadata import distribution
    info = Path(distribution("uv")._path)
    site = next((repo / ".venv/lib").glob("python*/site-packages"))
    shutil.copytree(info, site / info.name)
  env = {**os.environ, "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1", "PIP_EXTRA_INDEX_URL": "",
         "UV_FIND_LINKS": str(wheels), "UV_OFFLINE": "1", "UV_NO_CONFIG": "1", "PYTHON": sys.executable}
  return subprocess.run(["bash", "scripts/setup.sh"], cwd=repo, capture_output=True, text=True, env=env, timeout=300)


def uv_line() -> str:
  return read_lock(lock_path(REPO))["uv"].line()


@pytest.mark.parametrize("with_uv", [True, False], ids=["uv", "pip"])
def test_setup_refuses_a_file_whose_hash_is_not_the_locks_in_one_line(tmp_path, with_uv):
  wheels = tmp_path / "wheels"; wheels.mkdir()
  good = hashlib.sha256(tiny_wheel(wheels).read_bytes()).hexdigest()
  bad = ("0" if good[0] != "0" else "1") + good[1:]
  lock = f"tinypkg48==1.0 --hash=sha256:{bad}  # base\n" + (uv_line() + "\n" if with_uv else "")
  p = run_setup(tmp_path / "repo", lock, wheels, with_uv)
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert p.returncode == 1, p.stderr
  assert lines[-1].startswith("setup: lock/py") and "tinypkg48" in lines[-1] and "sha256 the lock names" in lines[-1], \
    p.stderr
  # every line is setup's own (no traceback, no installer's table): where uv cannot be had (the pip path) one says so
  assert all(l.startswith("setup: ") for l in lines) and len(lines) == (2 if with_uv else 3), p.stderr
  assert not (tmp_path / "repo/.venv/.mlperf-bert-installed").exists()
  assert not list((tmp_path / "repo/.venv/lib").glob("python*/site-packages/tinypkg48"))


def test_setup_refuses_a_lock_line_without_a_hash_in_one_line(tmp_path):
  wheels = tmp_path / "wheels"; wheels.mkdir()
  tiny_wheel(wheels)
  p = run_setup(tmp_path / "repo", "tinypkg48==1.0  # base\n", wheels, with_uv=True)
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert p.returncode == 1 and len(lines) == 2, p.stderr
  assert lines[1].startswith("setup: lock/py") and ":1: tinypkg48==1.0 has no --hash=sha256" in lines[1], p.stderr

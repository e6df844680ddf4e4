#!/usr/bin/env bash
# Refresh the lock (lock/py3.11.txt, lock/py3.12.txt) from pyproject.toml, then the conda environments envs/*.yaml
# from it: run it after changing a dependency in pyproject.toml, and commit what it writes. Versions already locked
# stay where pyproject.toml still allows them; to move packages on, delete their lines (or the lock) first.
# Arguments go to `python -m mlperf_bert lock` (e.g. --python 3.11, --constraint FILE). Needs the network (PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/uv ] || bash scripts/setup.sh
source scripts/uv-args.sh
# shellcheck disable=SC2046
.venv/bin/python -m mlperf_bert lock --uv .venv/bin/uv "$@" -- $(uv_args)

#!/usr/bin/env bash
# The test suite: set up (with the test and tensorflow extras), then run pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh "test,tf"
exec .venv/bin/python -m pytest -q -ra "$@" tests

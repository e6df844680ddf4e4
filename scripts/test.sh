#!/usr/bin/env bash
# The test suite: set up (with the test and tensorflow extras), then run pytest on two workers
# (MLPERF_BERT_TEST_WORKERS=N for N; 0 runs in one process). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh "test,tf"
# two workers, each test file on one worker (its module fixtures are built once)
exec .venv/bin/python -m pytest -q -ra -n "${MLPERF_BERT_TEST_WORKERS:-2}" --dist loadfile "$@" tests

#!/usr/bin/env bash
# The test suite: set up (with the test and tensorflow extras), then run pytest on two workers
# (MLPERF_BERT_TEST_WORKERS=N for N; 0 runs in one process). Extra arguments go to pytest.
#   bash scripts/test.sh          every test but the second runs of a path (marked full): each end-to-end path once (CI)
#   bash scripts/test.sh --fast   every test but the end-to-end runs (marked slow or full): minutes
#   bash scripts/test.sh --all    every test
# The 15 slowest tests are listed at the end, so a log shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
select=(-m "not full")
args=()
for a in "$@"; do
  case "$a" in
    --fast) select=(-m "not slow and not full") ;;
    --all) select=() ;;
    *) args+=("$a") ;;
  esac
done
bash scripts/setup.sh "test,tf"
# two workers, each test file on one worker (its module fixtures are built once); tests/conftest.py hands out the
# longest files first (xdist would otherwise start with the files of most tests), so neither worker idles at the end
exec .venv/bin/python -m pytest -q -ra -n "${MLPERF_BERT_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
  --durations=15 "${select[@]}" "${args[@]}" tests

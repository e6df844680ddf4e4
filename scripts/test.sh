#!/usr/bin/env bash
# The test suite: set up (with the test and tensorflow extras), then run pytest on three workers, one more than a
# 2-core machine's cores: many tests wait on a child (Snakemake, SLURM's status polls, an audit's workers), and the third
# worker uses the core they leave idle (four were slower: 19 min 23 s of tests against 18 min 38 s, EPYC-1, 2026-12-07)
# (MLPERF_BERT_TEST_WORKERS=N for N; 0 runs in one process). Extra arguments go to pytest.
#   bash scripts/test.sh          every test but the second runs of a path (marked full): each end-to-end path once (CI)
#   bash scripts/test.sh --fast   every test but the end-to-end runs (marked slow or full): minutes
#   bash scripts/test.sh --all    every test
# Without --fast (and with no pytest arguments), SLURM's packages are apt-installed in the background while the tests
# start (tests/workflow/test_slurm.py brings up a cluster from them; scripts/slurm-cluster.sh install waits for it).
# The 15 slowest tests are listed at the end, so a log shows where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
select=(-m "not full")
args=()
slurm=1
for a in "$@"; do
  case "$a" in
    --fast) select=(-m "not slow and not full"); slurm=0 ;;
    --all) select=() ;;
    *) args+=("$a") ;;
  esac
done
bash scripts/setup.sh "test,tf"
if [ "$slurm" = 1 ] && [ ${#args[@]} -eq 0 ] && ! command -v slurmctld >/dev/null && command -v apt-get >/dev/null; then
  log="${TMPDIR:-/tmp}/mlperf-bert-slurm-install.log"
  echo "test: installing SLURM in the background for tests/workflow/test_slurm.py (log: $log)" >&2
  bash scripts/slurm-cluster.sh install >"$log" 2>&1 &
fi
# each test file on one worker (its module fixtures are built once); tests/conftest.py hands out the
# longest files first (xdist would otherwise start with the files of most tests), so neither worker idles at the end
exec .venv/bin/python -m pytest -q -ra -n "${MLPERF_BERT_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
  --durations=15 "${select[@]}" "${args[@]}" tests

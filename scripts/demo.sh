#!/usr/bin/env bash
# The CPU demo: set up, then run the whole workflow on the bundled mini corpus (results under results/demo/).
# Extra arguments go to snakemake (e.g. -n for a dry run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Snakemake loads and merges every --configfile before this workflow's code runs: a file of nested YAML aliases would
# exhaust its memory there. The config files these arguments name are checked first (one line when refused).
args=(--cores "$(nproc)" all "$@")
.venv/bin/python -m mlperf_bert check-config --snakemake-args "${args[@]}"
exec .venv/bin/snakemake "${args[@]}"

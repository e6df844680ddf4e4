#!/usr/bin/env bash
# The CPU demo: set up, then run the whole workflow on the bundled mini corpus (results under results/demo/).
# Extra arguments go to snakemake (e.g. -n for a dry run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/snakemake --cores "$(nproc)" all "$@"

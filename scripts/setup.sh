#!/usr/bin/env bash
# Set up everything this project needs on a fresh Debian/Ubuntu machine with Python >= 3.11:
#   - clang (tinygrad compiles its CPU kernels with it), installed with apt when missing; with the extra `dress`,
#     Debian's libllvm19 (the dress's compiler for AMD targets);
#   - a virtual environment .venv with the mlperf_bert package and the extras named in $1 (e.g. "test,tf").
# Re-running it is cheap: pip runs again only when pyproject.toml or the extras changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-}

if ! command -v clang >/dev/null 2>&1; then
  echo "setup: installing clang (needed by tinygrad on CPU)" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang >/dev/null
fi

# the dress of the AMD platforms compiles with LLVM 19 (Debian's libllvm19; LLVM 15 cannot): with the extra
# `dress`, install it when missing (the CUDA platforms' nvrtc comes from pip with the same extra)
if [[ ",$extras," == *",dress,"* ]] && ! ls /usr/lib/llvm-19/lib/libLLVM*.so* /usr/lib/*-linux-gnu/libLLVM*19* >/dev/null 2>&1; then
  echo "setup: installing libllvm19 (the dress's compiler for AMD targets)" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libllvm19 >/dev/null
fi

py=${PYTHON:-python3}
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: $py is $("$py" --version 2>&1); mlperf-bert needs Python >= 3.11 (set PYTHON=python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$py" -m venv .venv

stamp=".venv/.mlperf-bert-installed"
want="$(sha256sum pyproject.toml | cut -c1-16) [$extras]"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing the package into .venv${extras:+ with extras [$extras]}" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # pip compiles every module's bytecode here, once: where PYTHONDONTWRITEBYTECODE is set (as on CI), Python would
  # otherwise compile each module from source again in every process (--no-compile made the suite 1.6x slower)
  .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi

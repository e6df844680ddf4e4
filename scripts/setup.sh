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

# pip's settings (pip.conf, PIP_* variables) that choose what is installed, as uv's arguments: find-links and
# constraint files that exist, index URLs (one that names no existing file is ignored, as pip ignores it), and pip's
# way of taking the best version across all indexes
uv_args() {
  local args
  args=$(.venv/bin/python -m pip config list 2>/dev/null | while IFS= read -r line; do
    key=${line%%=*}; key=${key##*.}; val=${line#*=}; val=${val#\'}; val=${val%\'}
    for v in $val; do
      case "$key" in
        find-links) [ -e "$v" ] || [[ "$v" == http* ]] && echo "--find-links $v" ;;
        constraint) [ -f "$v" ] && echo "--constraint $v" ;;
        index-url|extra-index-url)
          if [[ "$v" == http* ]] || [ -e "${v#file://}" ]; then echo "--$key $v"; fi ;;
      esac
    done
  done | sort -u || true)
  echo "$args"
  [[ "$args" == *index-url* ]] && echo "--index-strategy unsafe-best-match"
  return 0
}

stamp=".venv/.mlperf-bert-installed"
want="$(sha256sum pyproject.toml | cut -c1-16) [$extras]"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing the package into .venv${extras:+ with extras [$extras]}" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # uv (from PyPI) installs what pip would, the same versions, in 54 s where pip takes 117 s (test,tf on 2 cores,
  # empty caches, EPYC-1, 2026-12-07): it downloads, unpacks and compiles in parallel. pip's own settings that choose
  # wheels (find-links, constraint, index URLs) are handed to it; where uv cannot be had or fails, pip installs.
  # Every module's bytecode is compiled here, once: where PYTHONDONTWRITEBYTECODE is set (as on CI), Python would
  # otherwise compile each module from source again in every process (--no-compile made the suite 1.6x slower)
  if ! { .venv/bin/python -m pip install -q uv >/dev/null 2>&1 &&
         .venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode $(uv_args) -e ".${extras:+[$extras]}"; }; then
    echo "setup: uv could not install; pip installs instead" >&2
    .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
  fi
  echo "$want" > "$stamp"
fi

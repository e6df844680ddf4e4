#!/usr/bin/env bash
# Set up everything this project needs on a fresh Debian/Ubuntu machine with Python >= 3.11:
#   - clang (tinygrad compiles its CPU kernels with it), installed with apt when missing; with the extra `dress`,
#     Debian's libllvm19 (the dress's compiler for AMD targets);
#   - a virtual environment .venv with the mlperf_bert package and the extras named in $1 (e.g. "test,tf"), at
#     exactly the versions of the lock (lock/py<X.Y>.txt for the venv's Python; bash scripts/lock.sh refreshes it):
#     every file's sha256 is checked against the lock's, and a lock line without one, or a file whose hash is not the
#     lock's, is refused in one line (docs/reproducibility.md).
# Re-running it is cheap: it installs again only when pyproject.toml, the lock or the extras changed.
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
pyver=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
lock="lock/py$pyver.txt"
if [ ! -f "$lock" ]; then
  echo "setup: no lock for Python $pyver ($lock); use Python 3.11 or 3.12 (PYTHON=python3.11), or add $pyver to PYTHONS in mlperf_bert/lock.py and run bash scripts/lock.sh" >&2
  exit 1
fi
source scripts/uv-args.sh

# one line of refusal for an install that failed: a file whose sha256 is not the lock's names the package (uv's
# "Hash mismatch for `x==1`", pip's "x==1 from <url>:" under its table of mismatches)
refuse_hash() {
  local what
  [ -f "$1" ] || return 0
  what=$(grep -oE 'Hash mismatch for `[^`]+`' "$1" | head -1 | cut -d'`' -f2 || true)
  [ -n "$what" ] || what=$(grep -A1 -E 'DO NOT MATCH THE HASHES|Expected sha256' "$1" | grep -oE '^ +[A-Za-z0-9._-]+==[^ ]+' | head -1 | tr -d ' ' || true)
  if [ -n "$what" ] || grep -qiE 'hash mismatch|do not match the hashes' "$1"; then
    echo "setup: $lock: the downloaded file of ${what:-a package} does not have the sha256 the lock names; restore the lock (git checkout -- $lock) or refresh it (bash scripts/lock.sh)" >&2
    exit 1
  fi
}

stamp=".venv/.mlperf-bert-installed"
# the extras installed before stay (as pip's installs added to them): `bash scripts/setup.sh` after
# `bash scripts/setup.sh test,tf` keeps test and tf; a fresh .venv (rm -rf .venv) drops them
before=$(sed -n 's/.*\[\(.*\)\]$/\1/p' "$stamp" 2>/dev/null || true)
all=$(echo "$before,$extras" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)
want="$(cat pyproject.toml "$lock" | sha256sum | cut -c1-16) [$all]"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing $lock${all:+ with extras [$all]} into .venv" >&2
  # the lock's lines of base, setup (uv, the build backend) and each extra asked for; each must name its sha256
  sel=.venv/lock-selected.txt
  awk -v want=" base setup ${all//,/ } " -v lock="$lock" -v extras="$extras" '
    BEGIN { n = split(extras, ask, ",") }
    /^#/ || !NF { next }
    { i = index($0, "#"); groups = " " substr($0, i + 1) " "
      split(substr($0, i + 1), gs, " "); for (k in gs) seen[gs[k]] = 1
      hit = 0; split(want, ws, " "); for (k in ws) if (index(groups, " " ws[k] " ")) hit = 1
      if (!hit) next
      if (!match($0, /--hash=sha256:[0-9a-f]+/) || RLENGTH != 78) { printf "setup: %s:%d: %s has no --hash=sha256:<64 hex>; restore the lock (git checkout -- %s) or refresh it (bash scripts/lock.sh)\n", lock, NR, $1, lock > "/dev/stderr"; bad = 1; exit 1 }
      print substr($0, 1, i - 1) }
    END { if (bad) exit 1
          for (k = 1; k <= n; k++) if (!(ask[k] in seen)) { printf "setup: extra \"%s\" is not in %s (its extras: tf, test, dress, slurm)\n", ask[k], lock > "/dev/stderr"; exit 1 } }
  ' "$lock" > "$sel"
  err=.venv/setup-errors.txt; : > "$err"
  # uv (from the lock, installed by pip with its hash checked) installs the lock in 54 s where pip takes 117 s (test,tf
  # on 2 cores, empty caches, EPYC-1, 2026-12-07): it downloads, unpacks and compiles in parallel. pip's own settings
  # that choose where wheels come from (find-links, index URLs) are handed to it; where uv cannot be had, pip
  # installs the same files, hashes required. Every module's bytecode is compiled here, once: where
  # PYTHONDONTWRITEBYTECODE is set (as on CI), Python would otherwise compile each module from source again in every
  # process (--no-compile made the suite 1.6x slower)
  grep -E '^uv==' "$sel" > .venv/lock-uv.txt || true
  uv_version=$(sed -nE 's/^uv==([^ ]+).*/\1/p' .venv/lock-uv.txt)
  have_uv=""
  if [ -n "$uv_version" ] && { [ "$(.venv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" = "$uv_version" ] ||
       .venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r .venv/lock-uv.txt >/dev/null 2>"$err"; }; then
    have_uv=1
  else
    refuse_hash "$err"
  fi
  # shellcheck disable=SC2046
  if [ -n "$have_uv" ] &&
     .venv/bin/uv pip sync -q --python .venv/bin/python --require-hashes --compile-bytecode $(uv_args) "$sel" 2>"$err"; then
    .venv/bin/uv pip install -q --python .venv/bin/python --no-deps --no-build-isolation --compile-bytecode -e . 2>"$err" ||
      { echo "setup: the editable install of the package failed: $(grep -v '^\s*$' "$err" | tail -1)" >&2; exit 1; }
  else
    refuse_hash "$err"
    echo "setup: uv could not install${have_uv:+ ($(grep -v '^\s*$' "$err" | tail -1))}; pip installs instead" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$sel" 2>"$err" ||
      { refuse_hash "$err"; echo "setup: pip could not install $lock: $(grep -v '^\s*$' "$err" | tail -1)" >&2; exit 1; }
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>"$err" ||
      { echo "setup: the editable install of the package failed: $(grep -v '^\s*$' "$err" | tail -1)" >&2; exit 1; }
  fi
  echo "$want" > "$stamp"
fi

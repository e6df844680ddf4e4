# Sourced by scripts/setup.sh and scripts/lock.sh: uv_args prints pip's settings (pip.conf, PIP_* variables) that
# choose where packages come from, as uv's arguments: find-links that exist, index URLs (one that names no existing
# file is ignored, as pip ignores it), and pip's way of taking the best version across all indexes. (pip's constraint
# files are not handed on: the lock fixes every version.) Needs .venv/bin/python.
uv_args() {
  local args
  args=$(.venv/bin/python -m pip config list 2>/dev/null | while IFS= read -r line; do
    key=${line%%=*}; key=${key##*.}; val=${line#*=}; val=${val#\'}; val=${val%\'}
    for v in $val; do
      case "$key" in
        find-links) [ -e "$v" ] || [[ "$v" == http* ]] && echo "--find-links $v" ;;
        index-url|extra-index-url)
          if [[ "$v" == http* ]] || [ -e "${v#file://}" ]; then echo "--$key $v"; fi ;;
      esac
    done
  done | sort -u || true)
  echo "$args"
  [[ "$args" == *index-url* ]] && echo "--index-strategy unsafe-best-match"
  return 0
}

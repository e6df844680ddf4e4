#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for CI and for trying the SLURM workflow (docs/slurm.md):
#   bash scripts/slurm-cluster.sh up      # install (apt) when missing, configure, start munged/slurmctld/slurmd
#   bash scripts/slurm-cluster.sh install # only install the packages (scripts/test.sh runs it in the background)
#   bash scripts/slurm-cluster.sh status  # sinfo
#   bash scripts/slurm-cluster.sh down    # stop what `up` started, remove the config it wrote
# The node `localhost` has this machine's CPUs, its available memory minus 2 GB, and one fake GPU (a GRES on
# /dev/null, so `--gpus=1` requests are accepted); partitions `cpu` (default) and `gpu`, the names
# profiles/slurm/config.yaml uses. No accounting daemon: jobs are visible to `squeue --states=all` for
# MinJobAge=600 s after they end, and every finished job is appended to $SLURM_CLUSTER_DIR/jobcomp.txt.
# The config must be /etc/slurm/slurm.conf (with SLURM_CONF elsewhere, the jobstep plugin's inner srun fails);
# an existing slurm.conf not written by this script is never overwritten.
# State, spool and logs: $SLURM_CLUSTER_DIR (default /tmp/mlperf-bert-slurm). Needs root (or sudo).
set -euo pipefail
DIR=${SLURM_CLUSTER_DIR:-/tmp/mlperf-bert-slurm}
CONF=/etc/slurm/slurm.conf
GRES=/etc/slurm/gres.conf
MARK="# written by mlperf-bert scripts/slurm-cluster.sh"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

say() { echo "slurm-cluster: $*" >&2; }

install_packages() {
  # one install at a time (scripts/test.sh starts one in the background; `up` may come while it runs): wait for it
  # (opened for reading: a lock file left by root still serves a sudo user)
  local lock="${TMPDIR:-/tmp}/mlperf-bert-slurm-install.lock"
  [ -e "$lock" ] || : >"$lock"
  exec 9<"$lock"
  flock 9
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurmctld)
  command -v slurmd >/dev/null || missing+=(slurmd)
  command -v sbatch >/dev/null || missing+=(slurm-client)
  command -v munged >/dev/null || missing+=(munge)
  [ ${#missing[@]} -eq 0 ] && { exec 9>&-; return; }
  say "installing ${missing[*]} with apt"
  # the packages' scripts would start the daemons through /etc/init.d (and fail: no config yet); a temporary
  # policy-rc.d forbids that, as in containers; this script starts them itself
  local prc=/usr/sbin/policy-rc.d added="" rc=0
  if [ ! -e "$prc" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$prc" >/dev/null && $SUDO chmod 755 "$prc" && added=1
  fi
  # another apt-get on this machine (unattended-upgrades, a user's install) may hold dpkg's lock: wait, not fail
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq || rc=$?
  [ "$rc" -eq 0 ] && { DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null || rc=$?; }
  [ -n "$added" ] && $SUDO rm -f "$prc"
  exec 9>&-
  [ "$rc" -eq 0 ] || { say "apt-get failed ($rc)"; exit "$rc"; }
}

write_config() {
  if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    say "$CONF exists and was not written by this script; refusing to overwrite it (move it away or use that cluster)"
    exit 1
  fi
  local cpus mem
  cpus=$(nproc)
  mem=$(( $(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo) - 2048 ))
  [ "$mem" -lt 1024 ] && mem=1024
  $SUDO mkdir -p /etc/slurm "$DIR/state" "$DIR/spool"
  $SUDO tee "$CONF" >/dev/null <<EOF
$MARK
ClusterName=mlperfbert
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# finished jobs stay visible to squeue for 10 minutes (the executor plugin's squeue status needs >= 120 s)
MinJobAge=600
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.txt
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
EOF
  $SUDO tee "$GRES" >/dev/null <<EOF
$MARK
# a fake GPU: lets jobs request --gpus=1 on a machine without one
NodeName=localhost Name=gpu File=/dev/null
EOF
}

munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_ok; then
    say "munged already running"
    return
  fi
  [ -s /etc/munge/munge.key ] || $SUDO runuser -u munge -- mungekey --create 2>/dev/null \
    || $SUDO /usr/sbin/create-munge-key -f
  $SUDO install -d -o munge -g munge -m 0755 /run/munge
  $SUDO runuser -u munge -- /usr/sbin/munged
  touch "$DIR/munged.ours"
  for _ in $(seq 50); do munge_ok && return; sleep 0.1; done
  say "munged did not come up"; exit 1
}

up() {
  install_packages
  if sinfo -h -o %T 2>/dev/null | grep -q idle && grep -qF "$MARK" "$CONF" 2>/dev/null; then
    say "already up"; sinfo; return
  fi
  # a fresh start: no jobs, logs or job records of an earlier cluster
  $SUDO mkdir -p "$DIR"
  $SUDO rm -rf "$DIR/state" "$DIR/spool" "$DIR"/*.log "$DIR"/*.out "$DIR/jobcomp.txt"
  write_config
  start_munge
  # -D: stay in the foreground (no systemd here); setsid: own session, so a test runner's signals don't reach them
  $SUDO setsid /usr/sbin/slurmctld -D -c >"$DIR/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$DIR/slurmctld.launcher"
  $SUDO setsid /usr/sbin/slurmd -D -N localhost >"$DIR/slurmd.out" 2>&1 </dev/null &
  echo $! >"$DIR/slurmd.launcher"
  local t0=$SECONDS
  while [ $((SECONDS - t0)) -lt 60 ]; do
    if sinfo -h -o %T 2>/dev/null | grep -q '^idle'; then
      say "up in $((SECONDS - t0)) s"; sinfo; return
    fi
    sleep 0.5
  done
  say "the node did not become idle within 60 s; logs in $DIR"
  tail -n 20 "$DIR"/slurmctld.log "$DIR"/slurmd.log "$DIR"/*.out >&2 || true
  exit 1
}

stop_pidfile() {  # stop the daemon whose pid is in $1, wait up to 10 s, then kill it
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    $SUDO kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && $SUDO kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  if command -v scancel >/dev/null && sinfo -h >/dev/null 2>&1; then
    scancel --user="$(id -un)" 2>/dev/null || true
  fi
  stop_pidfile "$DIR/slurmd.pid"
  stop_pidfile "$DIR/slurmctld.pid"
  # the launchers (sudo/setsid) exit with their daemons; stop any left over
  stop_pidfile "$DIR/slurmd.launcher"
  stop_pidfile "$DIR/slurmctld.launcher"
  if [ -e "$DIR/munged.ours" ]; then
    stop_pidfile /run/munge/munged.pid
    rm -f "$DIR/munged.ours"
  fi
  for f in "$CONF" "$GRES"; do
    if [ -e "$f" ] && grep -qF "$MARK" "$f"; then $SUDO rm -f "$f"; fi
  done
  say "down"
}

case "${1:-}" in
  up) up ;;
  install) install_packages ;;
  down) down ;;
  status) sinfo ;;
  *) echo "usage: $0 up|install|down|status   (state and logs in \$SLURM_CLUSTER_DIR, default $DIR)" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# A one-node SLURM cluster on localhost for tests (Debian's slurm-wlm 22.05 + munge).
#
#   cluster.sh install                       apt-get install slurm-wlm munge (skipped if present)
#   cluster.sh start DIR CTLD_PORT SLURMD_PORT   write DIR/slurm.conf, start munged, slurmctld, slurmd
#   cluster.sh stop DIR                      stop the three daemons by the PIDs in DIR/run/*.pid
#
# Everything (config, munge socket and key, state, spool, logs, pid files) lives in DIR, which
# must be reachable by the munge user (e.g. mode 0755 under /tmp). Clients use the cluster with
# `export SLURM_CONF=DIR/slurm.conf`. Two partitions share the one node: `cpu` (default) and
# `gpu` (no GPUs: it only checks that jobs are routed to the partition the profile names).
# Needs root. Never stops anything by process name. While up, /etc/slurm/slurm.conf is a symlink
# to DIR/slurm.conf (removed by stop; start refuses to replace an existing file).
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }

do_install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        echo "cluster.sh: slurm-wlm and munge already installed"
        return
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    local t0=$SECONDS
    until "$@" >/dev/null 2>&1; do
        (( SECONDS - t0 < limit )) || die "timed out after ${limit}s waiting for $what"
        sleep 0.5
    done
}

start() {
    local dir=$1 ctld_port=$2 slurmd_port=$3
    [[ -d $dir ]] || die "no such directory: $dir"
    dir=$(cd "$dir" && pwd)
    chmod 0755 "$dir"
    mkdir -p "$dir"/{munge,state,spool,log,run}

    # munge: a private daemon with its own socket, key copy and pid file.
    local key=/etc/munge/munge.key
    [[ -s $key ]] || die "$key missing (is munge installed?)"
    # munged insists: socket directory world-executable, key and seed in a private directory.
    mkdir -p "$dir/munge/private"
    chown munge:munge "$dir/munge" "$dir/munge/private"
    chmod 0755 "$dir/munge" && chmod 0700 "$dir/munge/private"
    install -o munge -g munge -m 0400 "$key" "$dir/munge/private/munge.key"
    local sock=$dir/munge/munge.socket
    su -s /bin/sh munge -c "/usr/sbin/munged --key-file=$dir/munge/private/munge.key --socket=$sock \
        --pid-file=$dir/munge/munged.pid --log-file=$dir/munge/munged.log --seed-file=$dir/munge/private/munged.seed"
    wait_for 10 "munged" test -S "$sock"
    munge -n --socket="$sock" | unmunge --socket="$sock" >/dev/null || die "munge self-test failed"

    # slurm.conf: one node, this machine's CPUs (at least 4) and half its available memory.
    local cpus mem
    cpus=$(( $(nproc) < 4 ? 4 : $(nproc) ))  # at least 4 slots (config_overrides: more than the cores)
    mem=$(awk '/MemAvailable/ {print int($2 / 1024 / 2)}' /proc/meminfo)
    cat >"$dir/slurm.conf" <<EOF
ClusterName=csebench-ci
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=900
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$dir/slurm.conf
    # Job steps need the config at the default path: Snakemake's jobstep plugin drops SLURM_* variables
    # (SLURM_CONF too) before it calls srun inside a job. Link it there unless something else is there.
    local etc=/etc/slurm/slurm.conf
    if [[ -L $etc && $(readlink "$etc") == /tmp/csebench-slurm.* && ! -e $etc ]]; then
        rm -f "$etc"  # a stale link left by a killed test run
    fi
    [[ -e $etc || -L $etc ]] && die "$etc exists; not overwriting it (stop that cluster or move the file)"
    mkdir -p /etc/slurm && ln -s "$SLURM_CONF" "$etc"
    slurmctld -f "$SLURM_CONF"
    wait_for 20 "slurmctld" scontrol ping
    slurmd -f "$SLURM_CONF" -N localhost
    wait_for 30 "the node to become idle" bash -c '[[ $(sinfo -h -n localhost -o %T | head -1) == idle* ]]'
    echo "cluster.sh: up (SLURM_CONF=$SLURM_CONF, CPUs=$cpus, RealMemory=${mem}M)"
}

stop_pidfile() {  # stop_pidfile FILE NAME: SIGTERM, wait up to 10 s, then SIGKILL
    local file=$1 name=$2 pid
    [[ -s $file ]] || return 0
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || { echo "cluster.sh: stopped $name ($pid)"; return 0; }
        sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
    echo "cluster.sh: killed $name ($pid)"
}

stop() {
    local dir
    dir=$(cd "$1" && pwd) || return 0
    export SLURM_CONF=$dir/slurm.conf
    # Jobs first (e.g. left by a Snakemake killed on timeout): cancel them, wait, then kill the
    # PIDs SLURM itself reports for any step still alive. slurmstepd outlives a stopped slurmd.
    if [[ -s $dir/run/slurmctld.pid ]] && kill -0 "$(<"$dir/run/slurmctld.pid")" 2>/dev/null; then
        local jobs
        jobs=$(timeout 10 squeue -h -t PD,R,CG,S -o %i 2>/dev/null | tr '\n' ' ' || true)
        if [[ -n ${jobs// } ]]; then
            echo "cluster.sh: cancelling jobs $jobs"
            timeout 10 scancel $jobs || true
            for _ in $(seq 1 30); do
                [[ -z $(timeout 10 squeue -h -t PD,R,CG,S -o %i 2>/dev/null) ]] && break
                sleep 0.5
            done
        fi
    fi
    if [[ -s $dir/run/slurmd.pid ]] && kill -0 "$(<"$dir/run/slurmd.pid")" 2>/dev/null; then
        local pids
        pids=$(timeout 10 scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}' || true)
        [[ -n $pids ]] && { echo "cluster.sh: killing job processes $pids" | tr '\n' ' '; echo; kill -KILL $pids 2>/dev/null || true; }
    fi
    stop_pidfile "$dir/run/slurmd.pid" slurmd
    stop_pidfile "$dir/run/slurmctld.pid" slurmctld
    stop_pidfile "$dir/munge/munged.pid" munged
    local etc=/etc/slurm/slurm.conf
    if [[ -L $etc && $(readlink "$etc") == "$dir/slurm.conf" ]]; then rm -f "$etc"; fi
}

case ${1:-} in
    install) do_install ;;
    start) [[ $# -eq 4 ]] || die "usage: $0 start DIR CTLD_PORT SLURMD_PORT"; start "$2" "$3" "$4" ;;
    stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
    *) die "usage: $0 install | start DIR CTLD_PORT SLURMD_PORT | stop DIR" ;;
esac

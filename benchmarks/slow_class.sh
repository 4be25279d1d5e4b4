#!/usr/bin/env bash
# Run a command as the slowest CPU class the budgets must hold on (an AVX2-only CPU without bf16, such as a 2-core
# AMD EPYC Zen 3 VM) on a newer machine (BENCHMARKS.md, "The two commands by CPU class"):
#   1. the instruction set: ATen's kernels at AVX2 (ATEN_CPU_CAPABILITY), oneDNN, MKL and FBGEMM (the int8 kernels)
#      limited to AVX2, and no bf16 (CSEBENCH_CPU_BF16=0: the demo's `fast` precision is fp32);
#   2. the rest of the gap (clock, caches, memory: on that Zen 3 every rule took 1.5x what the ISA limits alone give
#      on a Zen 4) as a CPU quota: the command's cgroup gets CORES / SLOWDOWN cores' worth of time (root, cgroup v1 or v2).
#
#   benchmarks/slow_class.sh make demo                 # SLOWDOWN 1.5 (measured), all cores
#   SLOWDOWN=1 benchmarks/slow_class.sh make test      # the instruction-set limits alone
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: benchmarks/slow_class.sh COMMAND [ARGS...]" >&2; exit 2; }
slowdown=${SLOWDOWN:-1.5}
export CSEBENCH_CPU_BF16=0 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2
if [ "$slowdown" != "1" ]; then
  cores=$(nproc)
  period=100000
  quota=$(awk -v c="$cores" -v s="$slowdown" -v p="$period" 'BEGIN { printf "%d", c * p / s }')
  name="csebench-slow-class-$$"
  dir="" procs=cgroup.procs
  leave() {  # out of the cgroup again and remove it, also after a failed setup or an interrupt
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    echo $$ > "$(dirname "$dir")/$procs" 2>/dev/null || true
    rmdir "$dir" 2>/dev/null || true
  }
  trap leave EXIT
  if [ -d /sys/fs/cgroup/cpu ] && [ -w /sys/fs/cgroup/cpu ]; then  # cgroup v1
    dir=/sys/fs/cgroup/cpu/$name
    mkdir "$dir"
    echo "$period" > "$dir/cpu.cfs_period_us"
    echo "$quota" > "$dir/cpu.cfs_quota_us"
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -w /sys/fs/cgroup ]; then  # cgroup v2
    dir=/sys/fs/cgroup/$name
    mkdir "$dir"
    echo "$quota $period" > "$dir/cpu.max"
  else
    echo "slow_class.sh: no writable cgroup for a CPU quota (root and cgroup v1 or v2 needed); SLOWDOWN=1 runs with the instruction-set limits alone" >&2
    exit 2
  fi
  [ -f "$dir/cgroup.procs" ] || procs=tasks
  echo $$ > "$dir/$procs"
  echo "slow_class.sh: AVX2 only, no bf16, $cores cores at 1/$slowdown of their time (cgroup $dir)" >&2
  set +e
  "$@"
  exit $?
fi
echo "slow_class.sh: AVX2 only, no bf16 (no CPU quota)" >&2
exec "$@"

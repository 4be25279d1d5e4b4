"""How many jobs of a given size this machine runs at once: one per core this process may use (taskset, cgroup
cpusets and container limits respected), as many as fit in the memory available now at one job's peak.

The Makefile reads it before anything is installed (standard library only, run as a file):

    python3 src/csebench/core/slots.py --job-mib 1700     # the demo's model jobs at a time
    python3 src/csebench/core/slots.py --job-mib 3072     # make test's workers

A job's peak is measured, not guessed: every csebench command's clock line ends with its peak memory, and
benchmarks/build_profile.py reports each rule's largest (BENCHMARKS.md, "The two commands, measured").
"""

from __future__ import annotations

import argparse
import os


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity (taskset, cpusets), capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, int(quota)) if quota else cores)


def cgroup_cpu_quota() -> float | None:
    """Cores' worth of CPU time a cgroup quota allows (v2 cpu.max, v1 cfs_quota_us / cfs_period_us), None: no quota."""
    for path, parse in (("/sys/fs/cgroup/cpu.max", lambda t: t.split()),
                        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", None)):
        try:
            with open(path, encoding="ascii") as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if parse is not None:
            quota, period = parse(text)
        else:
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as fh:
                quota, period = text, fh.read().strip()
        if quota in ("max", "-1"):
            return None
        return int(quota) / int(period)
    return None


def available_mib() -> int | None:
    """Memory available for new work now (Linux MemAvailable), None where the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def slots(job_mib: int, cores: int | None = None, memory_mib: int | None = None) -> int:
    """min(cores, jobs of ``job_mib`` that fit in the available memory), at least 1."""
    cores = usable_cores() if cores is None else cores
    memory_mib = available_mib() if memory_mib is None else memory_mib
    fit = memory_mib // job_mib if memory_mib is not None and job_mib > 0 else cores
    return max(1, min(cores, fit))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--job-mib", type=int, required=True, help="one job's peak resident memory, MiB")
    print(slots(ap.parse_args(argv).job_mib))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

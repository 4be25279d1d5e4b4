"""How many jobs of a given size this machine runs at once: one per core this process may use (taskset, cgroup
cpusets and container limits respected), as many as fit in the memory available now at one job's peak.

The Makefile reads it before anything is installed (standard library only, run as a file):

    python3 src/csebench/core/slots.py --job-mib 1900     # the demo's model jobs at a time
    python3 src/csebench/core/slots.py --job-mib 4096     # make test's workers

A job's peak is measured, not guessed: every csebench command's clock line ends with its peak memory, and
benchmarks/build_profile.py reports each rule's largest (BENCHMARKS.md, "The two commands by CPU class").
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity (taskset, cpusets), capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota)) if quota else cores)  # 1.5 cores' quota: two jobs still overlap


def cgroup_cpu_quota() -> float | None:
    """Cores' worth of CPU time the quota of this process's cgroup allows (v2 cpu.max, v1 cpu.cfs_quota_us over
    cpu.cfs_period_us), None: no quota (or none readable)."""
    v2, v1 = "", None
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    v2 = path
                elif "cpu" in controllers.split(","):
                    v1 = path
    except (OSError, ValueError):
        pass
    try:
        if v1 is not None:
            base = Path("/sys/fs/cgroup/cpu") / v1.lstrip("/")
            quota = int((base / "cpu.cfs_quota_us").read_text())
            return None if quota < 0 else quota / int((base / "cpu.cfs_period_us").read_text())
        quota, period = (Path("/sys/fs/cgroup") / v2.lstrip("/") / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
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

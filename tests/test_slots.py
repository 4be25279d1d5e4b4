"""The machine decides how many jobs run at once: `make demo`'s model jobs and `make test`'s workers follow the cores
the command may use (taskset, cpusets, a cgroup quota) and the memory available at one job's measured peak."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from runhelpers import ROOT


def test_slots_are_the_cores_capped_by_the_memory_at_one_job_s_peak():
    from csebench.core.slots import slots

    assert slots(1700, cores=8, memory_mib=64_000) == 8
    assert slots(1700, cores=8, memory_mib=6_000) == 3  # 3 jobs of 1.7 GB fit in 6 GB
    assert slots(1700, cores=2, memory_mib=500) == 1  # never none
    assert slots(1700, cores=4, memory_mib=None) == 4  # memory unknown: the cores


def _make_n(target: str, *prefix: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DEMO_SLOTS", "TEST_WORKERS", "MAKEFLAGS")}
    proc = subprocess.run([*prefix, "make", "-n", target], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2, reason="needs taskset, 2 cores")
def test_make_demo_and_make_test_follow_the_cores_they_are_given():
    from csebench.core.slots import slots

    cores = len(os.sched_getaffinity(0))
    demo = re.search(r"--resources gpu=(\d+)", _make_n("demo")).group(1)
    workers = re.search(r"pytest -q -ra -n (\d+)", _make_n("test")).group(1)
    assert int(demo) == slots(1900) and 1 <= int(demo) <= cores
    assert int(workers) == slots(4096)
    one = _make_n("demo", "taskset", "-c", "0")  # one core given: one model job at a time
    assert "--resources gpu=1" in one and "pytest" not in one
    assert re.search(r"pytest -q -ra -n 1 ", _make_n("test", "taskset", "-c", "0"))

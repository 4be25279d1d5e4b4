"""CPU-seconds of each test: a pytest plugin, and the report of what it wrote.

Wall-clock on a shared machine says little; the CPU time a test costs (its process's own user+sys, and that of the
children it started and waited for: a `python -m csebench`, a Snakemake build and its jobs) is what decides how long
the suite takes on a quiet host. Each test process (xdist's workers, or pytest without -n) appends one JSON line per
test to a file of its own in $CSEBENCH_TEST_CPU:

    CSEBENCH_TEST_CPU=/tmp/cpu PYTEST_ADDOPTS="-p pytest_cpu" PYTHONPATH=benchmarks make test
    python benchmarks/pytest_cpu.py /tmp/cpu [--top 40] [--compare /tmp/cpu-before]

A test's cost includes the fixtures it set up (a module's fixture is counted at the module's first test) and its
teardown. getrusage counts a child once it has been waited for: a daemon that detaches (DVC's queue worker, a server
a fixture leaves running) is counted by nobody. As root, on cgroup v1, the plugin also puts each test process in a
cpuacct cgroup of its own, which every process it starts inherits, detached or not: `cgroup` is that group's CPU time
during the test, everything the test cost, and the report uses it where present. Each process's row `session` holds
its own start (imports, collection) and whatever no test owned.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _join_cgroup(name: str) -> Path | None:
    """A cpuacct cgroup (v1) of this process's own, which its children inherit; None where it cannot be made."""
    group = CPUACCT / name
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
        return group
    except OSError:
        try:
            group.rmdir()
        except OSError:
            pass
        return None


def _leave_cgroup(group: Path | None) -> None:
    if group is None:
        return
    try:
        (group.parent / "cgroup.procs").write_text(f"{os.getpid()}\n")
        group.rmdir()  # fails while a detached child still runs in it: left for the next boot
    except OSError:
        pass


class _Recorder:
    def __init__(self, folder: Path):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{worker}-{os.getpid()}.jsonl"
        self.fh = open(self.path, "a", encoding="utf-8")
        self.in_tests = [0.0, 0.0, 0.0]
        self.group = _join_cgroup(f"csebench-tests-{worker}-{os.getpid()}")

    def group_cpu(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e9 if self.group else 0.0

    def write(self, row: dict) -> None:
        self.fh.write(json.dumps(row) + "\n")
        self.fh.flush()


_rec: _Recorder | None = None


def pytest_configure(config):
    global _rec
    folder = os.environ.get("CSEBENCH_TEST_CPU")
    if folder and not (getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ):
        _rec = _Recorder(Path(folder))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _rec is None:
        yield
        return
    own0, kids0 = _cpu()
    group0 = _rec.group_cpu()
    t0 = time.monotonic()
    yield
    own1, kids1 = _cpu()
    own, kids, group = own1 - own0, kids1 - kids0, _rec.group_cpu() - group0
    _rec.in_tests[0] += own
    _rec.in_tests[1] += kids
    _rec.in_tests[2] += group
    row = {"test": item.nodeid, "file": item.nodeid.split("::")[0], "own": round(own, 3), "children": round(kids, 3),
           "wall": round(time.monotonic() - t0, 3)}
    if _rec.group:
        row["cgroup"] = round(group, 3)
    _rec.write(row)


def pytest_sessionfinish(session):
    if _rec is None:
        return
    own, kids = _cpu()
    row = {"test": "session", "file": "session", "own": round(own - _rec.in_tests[0], 3),
           "children": round(kids - _rec.in_tests[1], 3), "wall": 0.0}
    if _rec.group:
        row["cgroup"] = round(_rec.group_cpu() - _rec.in_tests[2], 3)
    _rec.write(row)
    _rec.fh.close()


def pytest_unconfigure(config):
    if _rec is not None:
        _leave_cgroup(_rec.group)


# ----------------------------------------------------------------------------- the report


def load(folder: Path) -> list[dict]:
    rows = []
    for f in sorted(Path(folder).glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def cost(row: dict) -> float:
    """A row's CPU-seconds: its cgroup's where measured, else its own and its waited-for children's."""
    return row["cgroup"] if "cgroup" in row else row["own"] + row["children"]


def by_file(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = defaultdict(lambda: {"cpu": 0.0, "own": 0.0, "wall": 0.0, "tests": 0})
    for r in rows:
        s = out[r["file"]]
        s["cpu"] += cost(r)
        s["own"] += r["own"]
        s["wall"] += r["wall"]
        s["tests"] += r["test"] != "session"
    return out


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--top", type=int, default=30, help="the N costliest tests")
    ap.add_argument("--compare", type=Path, help="an earlier folder: its CPU-seconds per file beside these")
    args = ap.parse_args(argv)
    rows = load(args.folder)
    files = by_file(rows)
    before = by_file(load(args.compare)) if args.compare else {}
    total = sum(v["cpu"] for v in files.values())
    print(f"{len(rows)} rows, {total:.0f} CPU-s in all" +
          (f" (before: {sum(v['cpu'] for v in before.values()):.0f})" if before else ""))
    print("| file | tests | CPU-s | of which the test process | wall-s |" + (" CPU-s before |" if before else ""))
    print("|---|---:|---:|---:|---:|" + ("---:|" if before else ""))
    for name in sorted(set(files) | set(before), key=lambda k: -files[k]["cpu"] if k in files else 0):
        v = files.get(name) or {"cpu": 0.0, "own": 0.0, "wall": 0.0, "tests": 0}
        line = f"| {name} | {v['tests']} | {v['cpu']:.1f} | {v['own']:.1f} | {v['wall']:.1f} |"
        if before:
            line += f" {before[name]['cpu']:.1f} |" if name in before else " |"
        print(line)
    print(f"\nthe {args.top} costliest tests (CPU-s, of which the test process; wall-s):")
    for r in sorted((r for r in rows if r["test"] != "session"), key=lambda r: -cost(r))[:args.top]:
        print(f"{cost(r):8.1f} {r['own']:7.1f}  wall {r['wall']:6.1f}  {r['test']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

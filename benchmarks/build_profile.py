"""Where a Snakemake build's time went: job-seconds per rule, the share spent starting processes, idle cores.

    python benchmarks/build_profile.py                      # the newest log in .snakemake/log/
    python benchmarks/build_profile.py .snakemake/log/X.snakemake.log --markdown
    python benchmarks/build_profile.py --slots 2 4 8        # also: the same jobs replayed on N cores

Reads Snakemake's own log (each job's start and finish, one-second stamps, its threads and its log
file). Each csebench command ends its log with one line saying how long it ran and how much of that
was start-up (the interpreter, then every module imported while the command ran: torch, transformers,
matplotlib, ...; `csebench.cli._report_clock`); those lines give the start-up share and finer job times
than the log's one-second stamps. A core is idle when fewer job threads run than the build has cores
(`Provided cores`), between the first job's start and the last job's end (Snakemake's planning comes before
its log's first line: the build's own wall time, e.g. from /usr/bin/time, holds it).

`--slots N ...` replays the build's jobs on N cores (one one-thread job per core, as `make demo` runs them):
each job takes the time it measured, starts when the jobs whose outputs it reads have ended and a core is
free, the job with the longest chain of work still behind it first. It answers "what would this build take
with more cores" from one measured build; it assumes a job runs as fast beside N-1 others as beside one.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?rule (\S+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)")
CLOCK = re.compile(r"csebench \S+: ran ([\d.]+) s, of which start-up ([\d.]+) s")
PEAK = re.compile(r"csebench \S+: ran .*, peak memory (\d+) MiB")


@dataclass
class Job:
    rule: str
    jobid: int = -1
    start: float = 0.0
    end: float | None = None
    threads: int = 1
    log: str | None = None
    ran: float | None = None  # the command's own clock (its log's last line)
    startup: float | None = None
    peak_mib: float | None = None  # the command's peak resident memory (its clock line)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """The job's wall time: the command's own clock where its log has it, else the log's stamps."""
        if self.ran is not None:
            return self.ran
        return max((self.end or self.start) - self.start, 0.0)


@dataclass
class Build:
    cores: int = 1
    began: float | None = None  # Snakemake's first stamp
    jobs: list[Job] = field(default_factory=list)
    last: float = 0.0


def _stamp(text: str) -> float:
    return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y").timestamp()


def parse_log(path: Path, workdir: Path | None = None) -> Build:
    """A Snakemake log read into jobs; each job's own log read for csebench's clock line."""
    build, now, current = Build(), None, None
    running: dict[int, Job] = {}
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if m := STAMP.match(line):
            now = _stamp(m.group(1))
            build.began = now if build.began is None else build.began
            build.last = now
        elif line.startswith("Provided cores:"):
            build.cores = int(line.split(":")[1])
        elif (m := START.match(line)) and now is not None:
            current = Job(rule=m.group(1), start=now)
            build.jobs.append(current)
        elif current is not None and line.startswith("jobid:"):
            current.jobid = int(line.split(":")[1])
            running[current.jobid] = current
        elif current is not None and line.startswith("threads:"):
            current.threads = int(line.split(":")[1])
        elif current is not None and line.startswith(("input:", "output:")):
            files = [f.strip() for f in line.split(":", 1)[1].split(",") if f.strip()]
            (current.inputs if line.startswith("input:") else current.outputs).extend(files)
        elif current is not None and line.startswith("log:"):
            current.log = line.split(":", 1)[1].strip().split(",")[0].strip()
        elif (m := FINISHED.match(line)) and now is not None:
            job = running.pop(int(m.group(1)), None)
            if job is not None:
                job.end = now
    base = workdir or path.resolve().parents[2]  # .snakemake/log/X.log -> the working directory
    for job in build.jobs:
        if job.log and (base / job.log).is_file():
            clock = CLOCK.findall((base / job.log).read_text(encoding="utf-8", errors="replace"))
            if clock:
                job.ran, job.startup = (float(x) for x in clock[-1])
            peak = PEAK.findall((base / job.log).read_text(encoding="utf-8", errors="replace"))
            if peak:
                job.peak_mib = float(peak[-1])
    return build


def profile(build: Build) -> dict:
    """Per rule: jobs, job-seconds, the longest job, start-up seconds; the build's wall time and idle cores."""
    done = [j for j in build.jobs if j.end is not None]
    rules: dict[str, dict] = {}
    for j in done:
        r = rules.setdefault(j.rule, {"jobs": 0, "seconds": 0.0, "longest": 0.0, "startup": 0.0, "timed": 0, "peak_mib": None})
        r["jobs"] += 1
        if j.peak_mib is not None:
            r["peak_mib"] = max(r["peak_mib"] or 0.0, j.peak_mib)
        r["seconds"] += j.seconds * j.threads
        r["longest"] = max(r["longest"], j.seconds)
        if j.startup is not None:
            r["startup"] += j.startup * j.threads
            r["timed"] += 1
    first = min((j.start for j in done), default=build.began or 0.0)
    last = max((j.end for j in done), default=first)
    # cores busy per second from the stamps: the job's threads from its start to its end
    busy = 0.0
    events = sorted([(j.start, j.threads) for j in done] + [(j.end, -j.threads) for j in done])
    level, t_prev = 0, first
    for t, delta in events:
        busy += min(level, build.cores) * (t - t_prev)
        level, t_prev = level + delta, t
    span = last - first
    return {
        "rules": dict(sorted(rules.items(), key=lambda kv: -kv[1]["seconds"])),
        "jobs": len(done),
        "job_seconds": sum(r["seconds"] for r in rules.values()),
        "startup_seconds": sum(r["startup"] for r in rules.values()),
        "timed_jobs": sum(r["timed"] for r in rules.values()),
        "peak_mib": max((r["peak_mib"] for r in rules.values() if r["peak_mib"] is not None), default=None),
        "cores": build.cores,
        "planning_seconds": first - (build.began or first),
        "span_seconds": span,
        "wall_seconds": build.last - (build.began or build.last),
        "idle_core_seconds": build.cores * span - busy,
    }


def replay(build: Build, slots: int) -> float:
    """The build's finished jobs on ``slots`` cores (see the module's docstring): the seconds from the first
    start to the last end. A job's threads take as many cores (at most ``slots``)."""
    import heapq

    jobs = [j for j in build.jobs if j.end is not None]
    made_by = {o: i for i, j in enumerate(jobs) for o in j.outputs}
    after = [sorted({made_by[f] for f in j.inputs if f in made_by and made_by[f] != i}) for i, j in enumerate(jobs)]
    before: list[list[int]] = [[] for _ in jobs]
    for i, deps in enumerate(after):
        for d in deps:
            before[d].append(i)
    tail = [0.0] * len(jobs)  # the work on the longest chain from a job to the end, itself included
    for i in sorted(range(len(jobs)), key=lambda i: -jobs[i].start):  # dependants started later: done first
        tail[i] = jobs[i].seconds + max((tail[k] for k in before[i]), default=0.0)
    waiting = [len(d) for d in after]
    ready = [(-tail[i], i) for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []  # (end, job)
    now, free = 0.0, slots
    while ready or running:
        while ready and min(jobs[ready[0][1]].threads, slots) <= free:
            _, i = heapq.heappop(ready)
            free -= min(jobs[i].threads, slots)
            heapq.heappush(running, (now + jobs[i].seconds, i))
        now, i = heapq.heappop(running)
        free += min(jobs[i].threads, slots)
        for k in before[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, (-tail[k], k))
    return now


def render(p: dict, markdown: bool = False) -> str:
    rows = [(rule, r["jobs"], r["seconds"], r["longest"], r["startup"], r.get("peak_mib")) for rule, r in p["rules"].items()]
    mib = lambda v: f"{v:.0f}" if v is not None else "-"  # noqa: E731
    total = p["job_seconds"] or 1.0
    timed = p["timed_jobs"] > 0  # a build of a csebench without the clock line: start-up unknown, not zero

    def startup(st: float, of: float) -> tuple[str, str]:
        return (f"{st:.0f}", f"{100 * st / of if of else 0:.0f}%") if timed else ("-", "-")

    lines = []
    if markdown:
        lines += ["| rule | jobs | job-seconds | share | longest job (s) | start-up (s) | start-up share | peak memory (MiB) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for rule, n, s, longest, st, peak in rows:
            lines.append(f"| {rule} | {n} | {s:.0f} | {100 * s / total:.0f}% | {longest:.1f} | {' | '.join(startup(st, s))} | {mib(peak)} |")
        a, b = startup(p["startup_seconds"], total)
        lines.append(f"| **all** | **{p['jobs']}** | **{p['job_seconds']:.0f}** | 100% | | **{a}** | **{b}** | {mib(p['peak_mib'])} |")
    else:
        lines.append(f"{'rule':<30} {'jobs':>5} {'job-s':>8} {'share':>6} {'longest':>8} {'start-up':>9} {'share':>6} {'peak MiB':>9}")
        for rule, n, s, longest, st, peak in rows:
            a, b = startup(st, s)
            lines.append(f"{rule:<30} {n:>5} {s:>8.0f} {100 * s / total:>5.0f}% {longest:>8.1f} {a:>9} {b:>6} {mib(peak):>9}")
        a, b = startup(p["startup_seconds"], total)
        lines.append(f"{'all':<30} {p['jobs']:>5} {p['job_seconds']:>8.0f} {100:>5}% {'':>8} {a:>9} {b:>6} {mib(p['peak_mib']):>9}")
    lines.append("")
    lines.append(f"jobs ran {p['span_seconds']:.0f} s (first start to last end); {p['cores']} cores; idle core-seconds while jobs ran "
                 f"{p['idle_core_seconds']:.0f} ({100 * p['idle_core_seconds'] / max(p['cores'] * p['span_seconds'], 1):.0f}% "
                 f"of {p['cores']} x {p['span_seconds']:.0f} s); start-up measured in {p['timed_jobs']} of {p['jobs']} jobs")
    return "\n".join(lines)


def newest_log(workdir: Path) -> Path:
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        raise SystemExit(f"build_profile: no Snakemake log in {workdir}/.snakemake/log (run snakemake first, or name the log)")
    return logs[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", nargs="?", help="a Snakemake log (default: the newest in .snakemake/log/)")
    ap.add_argument("--workdir", default=".", help="the folder Snakemake ran in (job logs are relative to it)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (BENCHMARKS.md)")
    ap.add_argument("--slots", type=int, nargs="+", default=[], metavar="N",
                    help="also replay the build's jobs on N cores each (one one-thread job per core)")
    args = ap.parse_args(argv)
    if any(n < 1 for n in args.slots):
        raise SystemExit("build_profile: --slots takes whole numbers of at least 1")
    workdir = Path(args.workdir)
    log = Path(args.log) if args.log else newest_log(workdir)
    if not log.is_file():
        raise SystemExit(f"build_profile: no such log: {log}")
    build = parse_log(log, workdir.resolve())
    p = profile(build)
    print(render(p, args.markdown))
    for n in args.slots:
        print(f"replayed on {n} cores: jobs run {replay(build, n):.0f} s (measured on {p['cores']}: {p['span_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

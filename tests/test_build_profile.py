"""benchmarks/build_profile.py: job-seconds per rule, start-up share and idle cores from a Snakemake log;
the csebench clock line it reads (csebench.core.startup)."""

import subprocess
import sys

from runhelpers import BIN, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import build_profile  # noqa: E402

LOG = """\
Provided cores: 2
Rules claiming more threads will be scaled down.
Select jobs to execute...
[Fri Nov 27 13:00:00 2026]
Select jobs to execute...
[Fri Nov 27 13:00:10 2026]
localrule train:
    output: results/runs/a/seed1/train.json
    log: logs/train.a.log
    jobid: 4
    resources: tmpdir=/tmp, gpu=1
[Fri Nov 27 13:00:10 2026]
localrule view_trained:
    log: logs/view.a.log
    jobid: 5
[Fri Nov 27 13:00:12 2026]
Finished jobid: 5 (Rule: view_trained)
[Fri Nov 27 13:00:40 2026]
Finished jobid: 4 (Rule: train)
[Fri Nov 27 13:00:40 2026]
rule embed:
    log: logs/embed.a.log
    jobid: 6
    threads: 2
[Fri Nov 27 13:01:00 2026]
Finished jobid: 6 (Rule: embed)
"""


def test_profile_adds_job_seconds_per_rule_startup_and_idle_cores(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs/train.a.log").write_text("13:00:40 INFO csebench: csebench train: ran 29.50 s, of which start-up 4.25 s "
                                                "(before the command 0.25 s, imports 4.00 s), peak memory 812 MiB\n")
    (tmp_path / "logs/embed.a.log").write_text("no clock line: the stamps count\n")
    log = tmp_path / "x.snakemake.log"
    log.write_text(LOG)
    p = build_profile.profile(build_profile.parse_log(log, tmp_path))
    rules = p["rules"]
    assert rules["train"] == {"jobs": 1, "seconds": 29.5, "longest": 29.5, "startup": 4.25, "timed": 1, "peak_mib": 812.0}
    assert rules["embed"]["peak_mib"] is None and p["peak_mib"] == 812.0  # a log without the clock line: unknown
    assert rules["embed"]["seconds"] == 40.0  # 20 s on 2 threads
    assert rules["view_trained"]["seconds"] == 2.0 and rules["view_trained"]["timed"] == 0
    assert list(rules) == ["embed", "train", "view_trained"]  # costliest first
    assert p["planning_seconds"] == 10 and p["span_seconds"] == 50 and p["wall_seconds"] == 60
    # 13:00:10-12 two jobs, 12-40 one job (one core idle), 40-60 embed on both cores
    assert p["idle_core_seconds"] == 2 * 50 - (2 * 2 + 28 + 2 * 20)
    text = build_profile.render(p, markdown=True)
    assert "| train | 1 | 30 |" in text and "idle core-seconds while jobs ran 28" in text and "| 812 |" in text
    for job in p["rules"].values():  # a build without the clock lines: start-up unknown, shown as such
        job["timed"] = 0
    p["timed_jobs"] = 0
    assert "| train | 1 | 30 | 41% | 29.5 | - | - | 812 |" in build_profile.render(p, markdown=True)


def _job(rule: str, jobid: int, start: str, outputs: list[str], inputs: list[str]) -> str:
    return (f"[Fri Nov 27 {start} 2026]\nlocalrule {rule}:\n" + (f"    input: {', '.join(inputs)}\n" if inputs else "")
            + f"    output: {', '.join(outputs)}\n    jobid: {jobid}\n")


def test_a_build_replayed_on_more_cores_keeps_its_dependencies(tmp_path):
    """Four 10-s trainings, each followed by a 5-s embedding, then one 1-s table of all four: on 2 cores the jobs
    take 31 s, on 4 cores 16 s (each chain on its own core), on 8 still 16 (the chains bound it); on 1, 61 s."""
    lines, jobid = ["Provided cores: 2"], 0
    clock = {}  # second -> what started and finished then, in the 2-core build as it ran
    for i in range(4):
        t0 = 10 * (i // 2)  # two trainings at a time
        clock.setdefault(t0, []).append(("train", i, [f"m{i}"], []))
        clock.setdefault(20 + 5 * (i // 2), []).append(("embed", 10 + i, [f"e{i}"], [f"m{i}"]))
    clock.setdefault(30, []).append(("table", 20, ["t"], [f"e{i}" for i in range(4)]))
    ends = {**{i: 10 * (i // 2) + 10 for i in range(4)}, **{10 + i: 25 + 5 * (i // 2) for i in range(4)}, 20: 31}
    events = sorted([(t, 1, job) for t, jobs in clock.items() for job in jobs] + [(e, 0, j) for j, e in ends.items()],
                    key=lambda x: (x[0], x[1]))
    for t, kind, job in events:
        stamp = f"13:00:{t:02d}"
        if kind == 1:
            lines.append(_job(job[0], job[1], stamp, job[2], job[3]).rstrip("\n"))
        else:
            lines += [f"[Fri Nov 27 {stamp} 2026]", f"Finished jobid: {job} (Rule: x)"]
    log = tmp_path / "x.snakemake.log"
    log.write_text("\n".join(lines) + "\n")
    build = build_profile.parse_log(log, tmp_path)
    assert build_profile.profile(build)["span_seconds"] == 31
    embed = next(j for j in build.jobs if j.jobid == 10)
    assert embed.inputs == ["m0"] and embed.outputs == ["e0"]
    assert [round(build_profile.replay(build, n)) for n in (1, 2, 4, 8)] == [61, 31, 16, 16]
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/build_profile.py"), str(log), "--workdir", str(tmp_path),
                          "--slots", "4"], capture_output=True, text=True, check=True).stdout
    assert "replayed on 4 cores: jobs run 16 s (measured on 2: 31 s)" in out


def test_the_command_line_ends_with_its_clock(tmp_path):
    """A csebench command run as a program logs its wall time and start-up last: the line the profile reads."""
    proc = subprocess.run([str(BIN / "csebench"), "show-config", "--suite", "ci", "--run", "simcse", "--seed", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ran, startup = (float(x) for x in build_profile.CLOCK.findall(proc.stderr)[-1])
    assert 0 < startup <= ran
    assert "csebench show-config: ran" in proc.stderr.strip().splitlines()[-1]
    assert 10 < float(build_profile.PEAK.findall(proc.stderr)[-1]) < 4000  # its peak memory, in MiB


def test_a_command_started_by_a_large_parent_reports_its_own_peak(tmp_path):
    """A test worker or a scheduler that holds gigabytes and forks a command: the command's peak is its own, not the
    parent's (getrusage's ru_maxrss carries the parent's size across fork and exec)."""
    ballast = bytearray(768 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # resident, not only reserved
    proc = subprocess.run([str(BIN / "csebench"), "show-config", "--suite", "ci", "--run", "simcse", "--seed", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: None)  # a real fork (no vfork), as a busy parent would do
    del ballast
    assert proc.returncode == 0, proc.stderr
    assert 10 < float(build_profile.PEAK.findall(proc.stderr)[-1]) < 500


def test_the_import_clock_counts_outermost_imports_only():
    import importlib
    import time

    from csebench.core.startup import ImportClock

    clock = ImportClock().install()
    try:
        t0 = time.perf_counter()
        import json.decoder  # noqa: F401  (cached: a few microseconds)
        importlib.invalidate_caches()
        import csv  # noqa: F401
    finally:
        clock.uninstall()
    assert 0 <= clock.seconds <= time.perf_counter() - t0
    import builtins

    assert builtins.__import__ is not clock._hook

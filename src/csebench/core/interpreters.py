"""Which Python `make` builds `.venv` on: the fastest build of python3's own version that this machine has.

A host often has more than one build of the same Python: pyenv's, compiled by default without profile-guided
optimisation and with libpython as a shared library, beside the distribution's (Debian 12's python3.11: optimised,
libpython linked in). Every process of a build and of the test suite imports torch, transformers, Snakemake or DVC,
which is interpreter work: on a 2-core Zen 4 VM importing torch and transformers' model code took 4.7-5.6 CPU-s on
Debian's 3.11.2 against 6.6-7.3 on pyenv's 3.11.7, and `make test` 589 s against 682-692 s (BENCHMARKS.md).

Only builds of python3's X.Y are candidates: the wheels `make` installs are chosen for it (the CPU build of torch
on disk is for that version; another would download a multi-GB CUDA build). A candidate must make a venv with pip
(venv and ensurepip) and have the standard modules the tools need. The Makefile runs this file before anything is
installed (standard library only), once, when `.venv` does not exist yet; `PYTHON=...` skips it:

    python3 src/csebench/core/interpreters.py        # prints the path; says on stderr which and why
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

# what venv, pip and the tools import from the standard library (DVC's state is SQLite; archives; ctypes for numpy's
# and torch's loaders): a build without one of them is no candidate
NEEDED = ("venv", "ensurepip", "ssl", "sqlite3", "ctypes", "lzma", "bz2", "zlib")
# another build must be this much faster to be chosen over python3 itself (the timing's noise stays below it)
MARGIN = 1.05
# a pure-Python workload like an import's (dicts, strings, calls, attribute lookups) on a fixed working set: one that
# kept allocating timed the VM's page faults more than the interpreter. CPU seconds, best of REPEATS runs after one
# to warm up; each build is timed in ROUNDS processes, the builds taking turns (first, then last), and its fastest
# run counts: on a shared 2-core VM a build's runs may all be slow for a second or two while another's are not, and a
# single process per build (or one timed after the other) picked the slower build now and then
BENCH = """
import time
def work(n):
    d = {}
    total = 0
    for i in range(n):
        k = str(i %% 1000)
        d[k] = (k.upper(), len(k), [i, i + 1])
        total += d[k][1]
    return total
work(20000)
best = None
for _ in range(%d):
    t = time.process_time(); work(150000); t = time.process_time() - t
    best = t if best is None else min(best, t)
print(best)
"""
REPEATS = 3
ROUNDS = 7


def _ask(python: str, code: str, timeout: float = 60) -> str | None:
    try:
        proc = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def _identify(python: str) -> tuple[str, str, str] | None:
    """(X.Y, X.Y.Z, the executable it runs, links followed) of a usable build, asked once per name: None if it
    cannot run or lacks a module of NEEDED. (A pyenv shim is a script: the interpreter itself says what it is.)"""
    code = ("import importlib, os, sys\n"
            f"for m in {NEEDED!r}: importlib.import_module(m)\n"
            "print('%d.%d %d.%d.%d' % (sys.version_info[:2] + sys.version_info[:3]), os.path.realpath(sys.executable))")
    out = _ask(python, code)
    parts = out.split(maxsplit=2) if out else []
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def describe(python: str) -> tuple[str, str] | None:
    """(X.Y, X.Y.Z) of a usable build, None if it cannot run or lacks a module of NEEDED."""
    info = _identify(python)
    return info[:2] if info is not None else None


def candidates(default: str = "python3", path: str | None = None) -> list[str]:
    """python3 first, then the other builds of its X.Y: on PATH (pythonX.Y) and in the system's folders; one
    per executable (links followed); only usable builds besides python3 itself."""
    first = shutil.which(default, path=path)
    if first is None:
        return []
    out, info = [first], _identify(first)
    if info is None:
        return out
    minor, seen = info[0], {info[2]}
    for name in (shutil.which(f"python{minor}", path=path), *(str(Path(d) / f"python{minor}") for d in ("/usr/bin", "/usr/local/bin"))):
        if not name or not os.access(name, os.X_OK) or (other := _identify(name)) is None or other[2] in seen:
            continue
        seen.add(other[2])
        out.append(name)
    return out


def speed(python: str) -> float | None:
    """Seconds of the best run of BENCH (lower is faster), None if it did not run."""
    out = _ask(python, BENCH % REPEATS)
    try:
        return float(out) if out else None
    except ValueError:
        return None


def pick(default: str = "python3", timer=speed, describer=describe, found: list[str] | None = None) -> tuple[str, str]:
    """(the interpreter to build .venv on, a line saying which and why)."""
    names = found if found is not None else candidates(default)
    if not names:
        return default, f"{default}: not found on PATH"
    base = names[0]
    base_info = describer(base)
    if base_info is None:
        return base, f"{base}: kept (it does not say its version or lacks one of {', '.join(NEEDED)})"
    infos = {name: describer(name) if name != base else base_info for name in names}
    same = [name for name in names if infos[name] is not None and infos[name][0] == base_info[0]]
    best_seen: dict[str, float] = {}
    failed: set[str] = set()  # a build whose timing did not run: out, and not asked again (a hung one costs a timeout)
    for turn in range(ROUNDS):
        for name in same if turn % 2 == 0 else same[::-1]:
            if name in failed:
                continue
            t = timer(name)
            if t is None:
                failed.add(name)
            else:
                best_seen[name] = min(t, best_seen.get(name, t))
    timed = {name: (t, infos[name][1]) for name, t in best_seen.items() if name not in failed}
    if base not in timed:
        return base, f"{base} ({base_info[1]}): kept"
    best = min(timed, key=lambda n: timed[n][0])
    ratio = timed[base][0] / timed[best][0]
    if best == base or ratio < MARGIN:
        return base, f"{base} ({base_info[1]}): the fastest build of Python {base_info[0]} here"
    return best, (f"{best} ({timed[best][1]}): {ratio:.2f}x the speed of {default} ({base}, {base_info[1]}) at "
                  f"pure-Python work; PYTHON={default} make setup builds on that one instead")


def main() -> int:
    python, why = pick()
    print(f"make: .venv on {why}", file=sys.stderr)
    print(python)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

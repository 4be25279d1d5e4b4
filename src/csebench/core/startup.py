"""What a command's process spends before and beside its work: the interpreter's start and the modules
it imports (torch alone takes seconds). A build runs a couple of hundred short commands, so this is
where much of a small build's time goes; `csebench` ends each command's log with one line of it, which
benchmarks/build_profile.py adds up per rule:

    csebench embed: ran 61.2 s, of which start-up 4.1 s (before the command 0.3 s, imports 3.8 s), peak memory 812 MiB

The import clock times the outermost ``import`` statement in progress (nested imports are inside it);
modules that a library imports lazily outside any import statement are not counted, so the figure is
a lower bound.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import importlib
import os
import threading
import time


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc), None where that cannot be read."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()  # after "pid (comm)": field 3 is index 0
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 0.0)  # field 22: start time in ticks
    except (OSError, ValueError, IndexError):
        return None


class ImportClock:
    """Seconds spent in import statements since ``install`` (outermost statements only, main thread)."""

    def __init__(self):
        self.seconds = 0.0
        self._inside = False
        self._original = self._hook = None
        self._thread = threading.get_ident()

    def install(self) -> "ImportClock":
        self._original = builtins.__import__
        self._hook = self._import  # one bound method: uninstall finds it by identity
        builtins.__import__ = self._hook
        return self

    def uninstall(self) -> None:
        """Put the import function back, unless someone installed another over this one since."""
        if self._original is not None and builtins.__import__ is self._hook:
            builtins.__import__ = self._original
            self._original = None

    def _import(self, *args, **kwargs):
        if self._inside or threading.get_ident() != self._thread:
            return self._original(*args, **kwargs)
        self._inside = True
        t0 = time.perf_counter()
        try:
            return self._original(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self._inside = False


class CommandClock:
    """A command's wall time from its process's start, and how much of it was start-up."""

    def __init__(self):
        self.before = process_age() or 0.0  # the interpreter and csebench.cli's own imports
        self.t0 = time.perf_counter()
        self.imports = ImportClock().install()

    def line(self, command: str) -> str:
        self.imports.uninstall()
        ran = self.before + time.perf_counter() - self.t0
        peak = peak_memory_mib()
        return (f"{command}: ran {ran:.2f} s, of which start-up {self.before + self.imports.seconds:.2f} s "
                f"(before the command {self.before:.2f} s, imports {self.imports.seconds:.2f} s)"
                + (f", peak memory {peak:.0f} MiB" if peak is not None else ""))


@contextlib.contextmanager
def frozen_imports(*modules: str):
    """Within the block, what is loaded by its start (``modules`` imported first) is left out of the garbage
    collector's passes (gc.freeze), and given back after it. For a process that runs a full collection between
    pieces of work (a rehearsal's runs, a benchmark's sections, freeing their models): each pass would rescan every
    object torch and transformers made at import, 0.2-0.3 s a pass."""
    for name in modules:
        importlib.import_module(name)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def peak_memory_mib() -> float | None:
    """This process's peak resident memory (Linux and macOS), None where the platform does not say: how many model
    jobs fit beside each other (the Makefile's demo slots) is read from it.

    On Linux it is VmHWM, the high-water mark of this process's own address space: getrusage's ru_maxrss survives
    fork and exec, so a command started by a large parent (a test worker holding models) would report the parent's
    size instead of its own."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1024 ** 2 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux
    except (ImportError, OSError, ValueError):
        return None

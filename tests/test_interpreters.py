"""`make` builds .venv on the fastest build of python3's version found here (src/csebench/core/interpreters.py),
once, before anything is installed; PYTHON=... overrides it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from csebench.core import interpreters
from runhelpers import ROOT


def _pick(times: dict, versions: dict) -> tuple[str, str]:
    return interpreters.pick("python3", timer=times.get, describer=versions.get, found=list(times))


def test_another_build_of_the_same_version_is_chosen_only_when_clearly_faster():
    same = {"py3": ("3.11", "3.11.7"), "deb": ("3.11", "3.11.2"), "new": ("3.12", "3.12.1")}
    python, why = _pick({"py3": 1.0, "deb": 0.8, "new": 0.5}, same)  # 3.12 is faster still: not python3's version
    assert python == "deb" and why.startswith("deb (3.11.2): 1.25x the speed of python3 (py3, 3.11.7)")
    assert "PYTHON=python3 make setup" in why
    assert _pick({"py3": 1.0, "deb": 0.97}, same)[0] == "py3"  # within the timing's noise: python3 kept
    assert _pick({"py3": 1.0, "deb": 1.3}, same)[0] == "py3"
    # a build that cannot say its version or lacks a module (venv, ensurepip, ssl, ...) is no candidate
    assert _pick({"py3": 1.0, "deb": 0.5}, {"py3": ("3.11", "3.11.7")})[0] == "py3"
    # python3 itself silent or not timed: kept, and said
    assert _pick({"py3": 1.0, "deb": 0.5}, {"deb": ("3.11", "3.11.2")}) == (
        "py3", "py3: kept (it does not say its version or lacks one of venv, ensurepip, ssl, sqlite3, ctypes, lzma, bz2, zlib)")
    assert _pick({"py3": None, "deb": 0.5}, same)[0] == "py3"


def test_the_builds_take_turns_and_each_counts_its_fastest_process():
    """A shared VM slows one build's processes for a second or two: timed one build after the other, or once each,
    the slower build won now and then. The builds alternate over ROUNDS processes (first, then last) and each
    build's fastest counts: a build slowed in most turns but not all still wins."""
    same = {"py3": ("3.11", "3.11.7"), "deb": ("3.11", "3.11.2")}
    calls = []
    slowed = iter([1.6, 1.5, 1.4] + [0.8] * interpreters.ROUNDS)  # deb's first three processes fall in a slow spell

    def timer(name):
        calls.append(name)
        return 1.0 if name == "py3" else next(slowed)

    python, why = interpreters.pick("python3", timer=timer, describer=same.get, found=["py3", "deb"])
    assert python == "deb" and why.startswith("deb (3.11.2): 1.25x the speed")
    assert len(calls) == 2 * interpreters.ROUNDS and calls[:4] == ["py3", "deb", "deb", "py3"]
    # a build whose timing fails once is out, and not timed again: its earlier runs do not count
    calls.clear()
    answers = iter([0.5, None])

    def failing(name):
        calls.append(name)
        return 1.0 if name == "py3" else next(answers)

    assert interpreters.pick("python3", timer=failing, describer=same.get, found=["py3", "deb"])[0] == "py3"
    assert calls.count("deb") == 2 and calls.count("py3") == interpreters.ROUNDS


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("python3") is None, reason="make and python3 needed")
def test_make_picks_once_before_the_venv_exists_and_never_over_python(tmp_path):
    """The Makefile as written, in a folder with no .venv: the plan builds the venv on the interpreter the script
    names (python3's version), the line saying which on stderr; with .venv there, or PYTHON given, no pick."""
    (tmp_path / "src/csebench/core").mkdir(parents=True)
    shutil.copy2(ROOT / "Makefile", tmp_path)
    (tmp_path / "pyproject.toml").write_text("")  # what the venv's install depends on
    shutil.copy2(ROOT / "src/csebench/core/interpreters.py", tmp_path / "src/csebench/core")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL")}
    plan = subprocess.run(["make", "-n", "setup"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    said = [line for line in plan.stderr.splitlines() if line.startswith("make: .venv on ")]
    assert len(said) == 1, plan.stderr
    chosen = plan.stdout.split("(test -x .venv/bin/python || ", 1)[1].split(" -m venv .venv)", 1)[0]
    assert said[0].startswith(f"make: .venv on {chosen} (")
    version = "import sys; print(sys.version_info[:2])"
    assert subprocess.run([chosen, "-c", version], capture_output=True, text=True).stdout == \
        subprocess.run(["python3", "-c", version], capture_output=True, text=True).stdout
    given = subprocess.run(["make", "-n", "setup", f"PYTHON={sys.executable}"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert f"|| {sys.executable} -m venv .venv" in given.stdout and "make: .venv on" not in given.stderr
    (tmp_path / ".venv/bin").mkdir(parents=True)
    (tmp_path / ".venv/bin/python").write_text("")
    there = subprocess.run(["make", "-n", "setup"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "make: .venv on" not in there.stderr

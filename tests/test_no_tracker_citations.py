"""No comment, docstring or page cites this project's issue tracker by number: a clone (or a fork on
another host, where the same number is someone else's thread) cannot follow such a reference, so the
code and the docs say the reason, the behaviour or the source instead. Another project's thread is
cited by its URL (``.../issues/N``), which the search below does not match."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ["src", "tests", "docs", "README.md", "params.yaml", "Snakefile", "workflow"]
# the word, optionally plural, a space, an optional '#' and a number; split so that this file does not match itself
CITATION = re.compile(r"\b" + "issue" + r"s? #?[0-9]+", re.IGNORECASE)


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", *SEARCHED], cwd=ROOT, capture_output=True,
                                check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout: {e}")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_file_cites_an_issue_of_this_project_by_number():
    files = tracked_files()
    assert any(f.name == "params.yaml" for f in files), "git ls-files listed none of the searched paths"
    found = []
    for path in files:
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):  # deleted but not yet committed; a submodule
            continue
        if b"\0" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, ("issue-tracker numbers (say what they stand for instead):\n" + "\n".join(found))

"""benchmarks/pytest_cpu.py: each test's CPU-seconds (its process's and its children's, or its cgroup's where one was
made), per file and per test, beside an earlier run's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import pytest_cpu  # noqa: E402


def _rows(folder: Path, name: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_the_report_sums_each_file_and_prefers_the_cgroup(tmp_path, capsys):
    now = _rows(tmp_path / "now", "gw0-1.jsonl", [
        {"test": "tests/test_a.py::one", "file": "tests/test_a.py", "own": 1.0, "children": 2.0, "wall": 4.0},
        {"test": "tests/test_a.py::two", "file": "tests/test_a.py", "own": 0.5, "children": 9.0, "wall": 1.0, "cgroup": 12.0},
        {"test": "session", "file": "session", "own": 3.0, "children": 0.0, "wall": 0.0}])
    _rows(now, "gw1-2.jsonl", [{"test": "tests/test_b.py::x", "file": "tests/test_b.py", "own": 0.25, "children": 0.0,
                                "wall": 0.5}])
    before = _rows(tmp_path / "before", "gw0-3.jsonl", [
        {"test": "tests/test_a.py::one", "file": "tests/test_a.py", "own": 1.0, "children": 29.0, "wall": 30.0},
        {"test": "tests/test_gone.py::y", "file": "tests/test_gone.py", "own": 5.0, "children": 0.0, "wall": 5.0}])
    files = pytest_cpu.by_file(pytest_cpu.load(now))
    assert files["tests/test_a.py"] == {"cpu": 15.0, "own": 1.5, "wall": 5.0, "tests": 2}  # 1 + 2, then the cgroup's 12
    assert files["session"]["tests"] == 0 and files["session"]["cpu"] == 3.0
    assert pytest_cpu.main([str(now), "--top", "2", "--compare", str(before)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 rows, 18 CPU-s in all (before: 35)\n")
    assert "| tests/test_a.py | 2 | 15.0 | 1.5 | 5.0 | 30.0 |" in out
    assert "| tests/test_gone.py | 0 | 0.0 | 0.0 | 0.0 | 5.0 |" in out  # a file of the earlier run only
    top = out.split("costliest tests")[1].splitlines()[1:]
    assert [line.split()[-1] for line in top] == ["tests/test_a.py::two", "tests/test_a.py::one"]


def test_the_plugin_writes_a_row_per_test_and_the_process_s_own_start(tmp_path, monkeypatch):
    """The recorder as a test process runs it (no cgroup here: its CPU time and its waited-for children's)."""
    monkeypatch.setattr(pytest_cpu, "_join_cgroup", lambda name: None)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    rec = pytest_cpu._Recorder(tmp_path / "out")
    monkeypatch.setattr(pytest_cpu, "_rec", rec)

    class Item:
        nodeid = "tests/test_x.py::test_y"

    hook = pytest_cpu.pytest_runtest_protocol(Item(), None)
    next(hook)
    sum(i * i for i in range(200_000))  # some CPU time of this process's own
    try:
        next(hook)
    except StopIteration:
        pass
    pytest_cpu.pytest_sessionfinish(None)
    rows = pytest_cpu.load(tmp_path / "out")
    assert [r["test"] for r in rows] == ["tests/test_x.py::test_y", "session"]
    assert rows[0]["file"] == "tests/test_x.py" and rows[0]["own"] > 0 and "cgroup" not in rows[0]
    assert rec.path.name.startswith("gw7-")

"""The README is a newcomer's guide: prerequisites and the two commands on its first screen, no table
cell too long to read, every path and link it names exists, and the facts it states (the terms, the
protocol's task counts, the measured times) agree with the code and BENCHMARKS.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINES = README.splitlines()


def _table_rows(after: str) -> list[list[str]]:
    start = next(i for i, line in enumerate(LINES) if after in line)
    rows, i = [], next(i for i in range(start, len(LINES)) if LINES[i].startswith("|"))
    while i < len(LINES) and LINES[i].startswith("|"):
        rows.append([c.strip() for c in LINES[i].strip().strip("|").split("|")])
        i += 1
    return rows[2:]  # without the header and its rule


def test_the_first_screen_holds_the_prerequisites_and_the_two_commands():
    first = "\n".join(LINES[:60])
    for needed in ("../shared", "CSEBENCH_SHARED", "Python 3.11", "`make demo`", "`make test`", "results/demo/"):
        assert needed in first, needed
    # each command with one measured time, not a placeholder
    rows = {r[0]: r for r in _table_rows("## The two commands")}
    for command in ("`make demo`", "`make test`"):
        assert re.search(r"\d+ min", rows[command][2]), rows[command]


def test_no_table_cell_is_over_400_characters():
    cells = [c for line in LINES if line.startswith("|") for c in line.strip("|").split("|")]
    assert cells and max(len(c) for c in cells) <= 400


def test_every_path_of_the_layout_block_and_every_linked_file_exists():
    start = LINES.index("## Layout")
    begin = next(i for i in range(start, len(LINES)) if LINES[i].startswith("```"))
    end = next(i for i in range(begin + 1, len(LINES)) if LINES[i].startswith("```"))
    named = []
    base = ""
    for line in LINES[begin + 1:end]:
        first = "" if line.startswith(" ") else line.split()[0]  # an indented line goes on with the entry above
        named += [p for p in first.split(",") if p]
        # sub-folders named in the description, e.g. "objectives/", "rules/" (not a file's path, docs/x.md)
        if first:
            base = first.rstrip("/") if first.endswith("/") else ""
        named += [f"{base}/{m}" for m in re.findall(r"(?<![\w/.])([a-z_]+/)(?![\w.])", line[len(first):]) if base]
    missing = [p for p in named if not (ROOT / p.rstrip("/").replace(",", "")).exists()
               and not p.startswith(("data", "results"))]
    assert not missing, missing
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    assert not [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]


def test_the_terms_table_lists_every_registered_term():
    from csebench.objectives import TERMS

    keys = {r[0].strip("`") for r in _table_rows("## Methods are objective terms")} - {"*(none)*"}
    assert keys == set(TERMS.names())


def test_the_protocol_counts_it_states_are_the_code_s():
    from csebench.evaluation import STS_TASKS, TRANSFER_TASKS

    assert f"{len(STS_TASKS)} STS tasks" in README
    assert f"{len(TRANSFER_TASKS)} SentEval transfer tasks" in README


def test_the_measured_times_are_benchmarks_md_s():
    """The README's two times are the ones BENCHMARKS.md's measured-builds section reports."""
    bench = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    section = bench[bench.index("<!-- builds-measured:begin"): bench.index("<!-- builds-measured:end")]
    rows = {r[0]: r for r in _table_rows("## The two commands")}
    for command in ("`make demo`", "`make test`"):
        for t in re.findall(r"\d+ min \d+ s", rows[command][2]):
            assert t in section, (command, t)

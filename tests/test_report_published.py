"""published.yaml against the papers' text: every number re-read from the table it names."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from csebench.results.published import load_published
from csebench.results.runs import KINDS

ROOT = Path(__file__).resolve().parents[1]
PAPERS = Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared")) / "papers"
PUB = load_published()
ENTRIES = [(kind, e) for kind in ("sts", "transfer") for e in PUB[kind]]
BACKBONES = {"bert-base", "bert-large", "roberta-base", "roberta-large"}


def paper_lines(paper: str) -> list[str]:
    path = PAPERS / PUB["papers"][paper]["text"]
    if not path.is_file():
        pytest.skip(f"paper text not found: {path}")
    return path.read_text(encoding="utf-8").splitlines()


def row_numbers(line: str) -> list[float]:
    """Numbers of a table row after its label cell (markdown pipes or tab-separated), tags removed."""
    line = re.sub(r"<[^>]+>", "", line)
    if line.lstrip().startswith("|"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")][1:]
    elif "\t" in line:
        cells = line.split("\t")[1:]
    else:
        return []
    return [float(x) for c in cells for x in re.findall(r"-?\d+\.\d+|-?\d+", c)]


def labelled_row(paper: str, label: str, after: str | None = None) -> list[float]:
    lines = paper_lines(paper)
    start = next(i for i, ln in enumerate(lines) if after in ln) if after else 0
    return row_numbers(next(ln for ln in lines[start:] if ln.replace("\t", " ").strip().startswith(label)))


def values(kind: str, e: dict) -> list[float]:
    return [e["scores"][c] for c in KINDS[kind].columns] + [e["scores"]["Avg"]]


def test_schema():
    for kind, e in ENTRIES:
        assert e["paper"] in PUB["papers"]
        assert e["backbone"] in BACKBONES
        assert set(e["scores"]) == set(KINDS[kind].columns) | {"Avg"}, e
        assert re.fullmatch(r"Table \d+", e["table"])
        for pattern in e.get("runs", []):
            re.compile(pattern)
    keys = [(k, e["paper"], e["backbone"], e["method"]) for k, e in ENTRIES]
    assert len(keys) == len(set(keys)), "duplicate published entry"


@pytest.mark.parametrize("kind,entry", ENTRIES, ids=[f"{k}-{e['paper']}-{e['backbone']}-{e['method']}" for k, e in ENTRIES])
def test_entry_is_a_row_of_its_table(kind, entry):
    """The 8 numbers are exactly the numbers of one row of the paper, and the named table exists."""
    lines = paper_lines(entry["paper"])
    assert any(ln.startswith(f"{entry['table']}:") for ln in lines), f"no caption '{entry['table']}:'"
    want = values(kind, entry)
    rows = [row_numbers(ln) for ln in lines]
    hits = [i for i, r in enumerate(rows) if r == want]
    assert hits, f"{entry['row']}: {want} is not a row of {entry['paper']}"

    def table_of(i: int) -> str:  # the first caption after the row
        return next(ln.split(":")[0] for ln in lines[i:] if re.match(r"Table \d+:", ln))

    assert entry["table"] in {table_of(i) for i in hits}, f"row found only in {[table_of(i) for i in hits]}"


@pytest.mark.parametrize("paper,label,after,kind,backbone,method", [
    ("is-cse", "| IS-CSE-BERT <sub>base</sub>", None, "sts", "bert-base", "iscse"),
    ("is-cse", "| SimCSE-RoBERTa <sub>large</sub> *", None, "sts", "roberta-large", "simcse"),
    ("is-cse", "| IS-CSE-RoBERTa <sub>large</sub>", "| Model                           | MR", "transfer", "roberta-large", "iscse"),
    ("gs-infonce-v2", "+ GS-InfoNCE", "SimCSE-BERT <sub>large</sub> ♣", "sts", "bert-large", "gs_infonce"),
    ("gs-infonce-v1", "+ GS-InfoNCE", "SimCSE-RoBERTa _{large}", "sts", "roberta-large", "gs_infonce"),
    ("sscl", "SSCL-SimCSE _{large}", None, "sts", "bert-large", "sscl"),
    ("sscl", "$SSCL-SimCSE_{large}$", None, "transfer", "bert-large", "sscl"),
    ("distillcse", "Vanilla-Distill-RoBERTa <sub>base</sub>", None, "sts", "roberta-base", "distill_vanilla"),
    ("distillcse", "*DistillCSE-BERT <sub>large</sub> (2nd Round)", None, "sts", "bert-large", "distillcse_round2"),
])
def test_rows_reparsed_by_label(paper, label, after, kind, backbone, method):
    entry = next(e for e in PUB[kind] if e["paper"] == paper and e["backbone"] == backbone and e["method"] == method)
    assert labelled_row(paper, label, after) == values(kind, entry)


@pytest.mark.parametrize("kind,entry", ENTRIES, ids=[f"{k}-{e['paper']}-{e['backbone']}-{e['method']}" for k, e in ENTRIES])
def test_avg_notes_are_truthful(kind, entry):
    """A note marks exactly the rows whose printed Avg is not the mean of the printed tasks."""
    v = values(kind, entry)
    off = abs(np.mean(v[:7]) - v[7]) > 0.011
    assert off == ("note" in entry), (entry["row"], np.mean(v[:7]), v[7])


def test_coverage_of_main_tables():
    by = {(k, e["paper"], e["method"]) for k, e in ENTRIES}
    for paper, method in [("is-cse", "iscse"), ("gs-infonce-v2", "gs_infonce"), ("gs-infonce-v1", "gs_infonce"),
                          ("sscl", "sscl"), ("distillcse", "distillcse"), ("distillcse", "distill_vanilla")]:
        assert ("sts", paper, method) in by
    backbones = lambda paper, method: {e["backbone"] for k, e in ENTRIES if k == "sts" and e["paper"] == paper and e["method"] == method}
    assert backbones("is-cse", "iscse") == BACKBONES
    assert backbones("gs-infonce-v2", "gs_infonce") == BACKBONES
    assert backbones("distillcse", "distillcse") == BACKBONES
    assert backbones("sscl", "sscl") == {"bert-base", "bert-large"}
    # GS-InfoNCE v1 and v2 differ only in two printed averages
    v1 = {e["backbone"]: e["scores"] for e in PUB["sts"] if e["paper"] == "gs-infonce-v1" and e["method"] == "gs_infonce"}
    v2 = {e["backbone"]: e["scores"] for e in PUB["sts"] if e["paper"] == "gs-infonce-v2" and e["method"] == "gs_infonce"}
    assert {b for b in v1 if v1[b] != v2[b]} == {"bert-large", "roberta-large"}

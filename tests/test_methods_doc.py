"""docs/methods.md against params.yaml: the page never calls a method that params.yaml defines "not yet a
method" (a line left behind when the method was added)."""

from __future__ import annotations

import re
from pathlib import Path

from csebench.study.params import load_params

ROOT = Path(__file__).resolve().parents[1]
PHRASE = re.compile(r"not\s+yet\s+a\s+method", re.IGNORECASE)


def method_names(params: dict) -> dict[str, str]:
    """Every way the page may name a method of params.yaml -> its key: the key, its label, and the label before
    a parenthesis or comma ("GS-InfoNCE (released code)" is GS-InfoNCE's)."""
    names = {}
    for key, method in params["methods"].items():
        names[key] = key
        label = (method or {}).get("label")
        if label:
            names[label] = key
            names[re.split(r" \(|,", label)[0].strip()] = key
    return names


def subjects(text: str) -> list[str]:
    """What each "not yet a method" is said of: a table row's first cell (the row's subject), else the sentence
    that says it."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("|") and PHRASE.search(line):
            out.append(line.strip().strip("|").split("|")[0])
    prose = " ".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("|"))
    out += [s for s in re.split(r"(?<=[.:;])\s+", prose) if PHRASE.search(s)]
    return out


def stale(text: str, names: dict[str, str]) -> list[tuple[str, str]]:
    """(method key, what the page says) for each "not yet a method" said of a method of params.yaml."""
    found = []
    for subject in subjects(text):
        for name, key in names.items():
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", subject, re.IGNORECASE):
                found.append((key, " ".join(subject.split())))
                break
    return found


def test_methods_md_calls_no_method_of_params_yaml_not_yet_a_method():
    names = method_names(load_params(ROOT / "params.yaml"))
    text = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    assert not stale(text, names), stale(text, names)


def test_the_check_finds_such_a_line_in_a_table_and_in_prose():
    names = method_names(load_params(ROOT / "params.yaml"))
    row = "| DiffCSE | BERT base and RoBERTa base, every column (item listed, not rebuilt: not yet a method) | reprint |"
    assert stale(row, names) == [("diffcse", "DiffCSE")]
    prose = "Some words first. RankCSE is\nnot yet a method here. Later words."
    assert stale(prose, names) == [("rankcse", "RankCSE is not yet a method here.")]
    assert stale("| WhiteningBERT | every column (not yet a method) |", names) == []  # not one of params.yaml's

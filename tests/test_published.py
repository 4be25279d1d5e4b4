"""One source of published values (issue 20 point 11): the registry's rows, re-read from the paper texts,
and their row -> run bindings, which the per-suite tables read (no regex or prefix rules)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from csebench.results.published import Published, for_run
from csebench.results.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
PAPERS = Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared")) / "papers"
REG = load_registry()
BACKBONES = ["bert-base", "bert-large", "roberta-base", "roberta-large"]


def row(item: str, label) -> dict:
    return next(r for b in REG.item(item).blocks() for r in b["rows"] if r["label"] == label)


def paper_lines(name: str) -> list[str]:
    path = PAPERS / name
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


def labelled_rows(paper: str, label: str, after: str | None = None) -> list[list[float]]:
    """Every row of the paper starting with ``label`` (after the first line containing ``after``)."""
    lines = paper_lines(paper)
    start = next(i for i, ln in enumerate(lines) if after in ln) if after else 0
    return [row_numbers(ln) for ln in lines[start:] if ln.replace("\t", " ").strip().startswith(label)]


def test_the_registry_is_the_only_source():
    assert not (ROOT / "src/csebench/resources/published.yaml").exists()
    code = [p for p in (ROOT / "src/csebench").rglob("*.py") if "published.yaml" in p.read_text(encoding="utf-8")]
    assert code == []
    text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "src/csebench/resources/reproduction").glob("*.yaml"))
    assert "published_ref" not in text


@pytest.mark.parametrize("item,label,paper,printed,after", [
    ("is-cse/table-1", "IS-CSE-BERT base", "is-cse.md", "| IS-CSE-BERT <sub>base</sub>", None),
    ("is-cse/table-1", "SimCSE-RoBERTa large", "is-cse.md", "| SimCSE-RoBERTa <sub>large</sub> *", None),
    ("is-cse/table-8", "IS-CSE-RoBERTa large", "is-cse.md", "| IS-CSE-RoBERTa <sub>large</sub>", "| Model                           | MR"),
    ("gs-infonce/table-2", "+ GS-InfoNCE (BERT large)", "gs-infonce-v2.md", "+ GS-InfoNCE", "SimCSE-BERT <sub>large</sub> ♣"),
    ("sscl/table-2", "SSCL-SimCSE large", "sscl.md", "SSCL-SimCSE _{large}", None),
    ("sscl/table-3", "SSCL-SimCSE large", "sscl.md", "$SSCL-SimCSE_{large}$", None),
    ("distillcse/table-4", "Vanilla-Distill-RoBERTa base", "distillcse.md", "Vanilla-Distill-RoBERTa <sub>base</sub>", None),
    ("distillcse/table-4", "*DistillCSE-BERT large (2nd Round)", "distillcse.md", "*DistillCSE-BERT <sub>large</sub> (2nd Round)", None),
])
def test_rows_reparsed_by_label(item, label, paper, printed, after):
    """The row's values are the numbers the paper prints on the row with that label."""
    assert labelled_rows(paper, printed, after)[0] == row(item, label)["published"]


def test_simcse_table_is_the_rows_the_papers_reprint():
    """SimCSE's own text is not shipped: its rows must equal the SimCSE rows IS-CSE, GS-InfoNCE and DistillCSE reprint."""
    names = {"bert-base": "BERT base", "bert-large": "BERT large", "roberta-base": "RoBERTa base", "roberta-large": "RoBERTa large"}
    for bb, name in names.items():
        ours = row("simcse/table-main", f"SimCSE-{name}")["published"]
        assert ours == row("is-cse/table-1", f"SimCSE-{name}")["published"] == row("distillcse/table-4", f"SimCSE-{name}")["published"]
        assert ours == row("gs-infonce/table-2", f"SimCSE-{name} ♣")["published"]


def test_gs_infonce_versions_differ_in_the_two_averages_the_registry_names():
    v1 = labelled_rows("gs-infonce-v1.md", "+ GS-InfoNCE")
    v2 = [row("gs-infonce/table-2", f"+ GS-InfoNCE ({n})")["published"] for n in ("BERT base", "BERT large", "RoBERTa base", "RoBERTa large")]
    assert [a[:7] for a in v1] == [b[:7] for b in v2]
    differ = [(a[7], b[7]) for a, b in zip(v1, v2) if a[7] != b[7]]
    assert differ == [(79.13, 78.96), (79.18, 79.21)]
    source = REG.papers["gs-infonce"]["source"]
    assert "79.13 in v1, 78.96 in v2" in source and "79.18 in v1, 79.21 in v2" in source


@pytest.mark.parametrize("item,suite,method", [("is-cse/table-1", "paper-iscse", "iscse"),
                                               ("gs-infonce/table-2", "paper-gs-infonce", "gs_infonce"),
                                               ("distillcse/table-4", "paper-distillcse", "distillcse"),
                                               ("simcse/table-main", "paper", "simcse")])
def test_main_tables_bind_a_row_to_each_backbone_run(item, suite, method):
    source = f"{REG.papers[item.split('/')[0]]['short']} {REG.item(item).number}"
    for bb in BACKBONES:
        assert any(source in p.sources for p in for_run("sts", suite, f"{bb}-{method}")), (item, bb)


def test_a_printed_average_off_the_mean_of_its_tasks_is_noted():
    sscl = Published(row("sscl/table-2", "SSCL-SimCSE")["published"])
    assert sscl.note == "reported Avg differs from the mean of the 7 tasks (77.75)"
    assert Published(row("is-cse/table-1", "IS-CSE-BERT base")["published"]).note == ""
    assert Published([None] * 7 + [77.63]).note == ""  # an average alone: nothing to compare


AVG_ONLY = [None] * 7


@pytest.mark.parametrize("kind,suite,run,expected", [
    # the row of the setting the printed number comes from (issue 20 point 1)
    ("sts", "paper-sscl", "sscl_bert-256", [(row("sscl/table-2", "SSCL-BERT (cls.)")["published"], ["SSCL Table 2"], "SSCL-BERT (cls.)")]),
    # an ablation run is bound to its table's cell, not to a main-table row of the same method
    ("sts", "ablation-sscl-dim", "sscl_bert-128", [(AVG_ONLY + [61.30], ["SSCL Table 5"], "SSCL-BERT / 128")]),
    ("sts", "ablation-gs-infonce-m", "m-3x", [(AVG_ONLY + [77.63], ["GS-InfoNCE Table 3"], "BERT base")]),
    # identical printed rows merge, naming every source
    ("sts", "paper", "bert-base-simcse", [(row("is-cse/table-1", "SimCSE-BERT base")["published"],
                                           ["SimCSE Table (unsup. STS)", "IS-CSE Table 1", "GS-InfoNCE Table 2", "SSCL Table 2"],
                                           "SimCSE-BERT base")]),
    # a backbone prefix no longer pulls in another paper's SimCSE large row (SSCL's 77.53)
    ("sts", "paper-distillcse", "bert-large-simcse", [(row("distillcse/table-4", "SimCSE-BERT large")["published"],
                                                       ["DistillCSE Table 4"], "SimCSE-BERT large")]),
    ("transfer", "paper-iscse", "bert-base-iscse", [(row("is-cse/table-8", "IS-CSE-BERT base")["published"], ["IS-CSE Table 8"], "IS-CSE-BERT base")]),
    ("sts", "demo", "simcse", []),  # the demo's runs are bound at demo scale only: its suite table shows none
])
def test_suite_tables_read_the_rows_bound_to_each_run(kind, suite, run, expected):
    assert [(p.values, p.sources, p.label) for p in for_run(kind, suite, run)] == expected


def test_an_ablation_suite_table_shows_the_value_of_its_own_setting(tmp_path):
    """ablation-sscl-dim/sscl_bert-128 beside SSCL Table 5's 128-dimensional 61.30, not beside Table 2's
    256-dimensional 62.42 (which the backbone and method rules of resources/published.yaml attached)."""
    from csebench.config import load_params
    from csebench.results.render import render_item

    tasks = {t: 60.0 for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]}
    d = tmp_path / "ablation-sscl-dim" / "runs" / "sscl_bert-128" / "seed42"  # the suite's other runs: not yet run
    d.mkdir(parents=True)
    (d / "sts.json").write_text(json.dumps({"tasks": tasks, "avg": 60.0, "run_info": {"method": "sscl_bert", "backbone": "bert-base"}}))
    render_item("suite/ablation-sscl-dim", load_params(ROOT / "params.yaml"), str(tmp_path))
    md = (tmp_path / "ablation-sscl-dim" / "tables" / "sts.md").read_text()
    assert "↳ published: SSCL Table 5 | “SSCL-BERT / 128” |  | – | – | – | – | – | – | – | 61.30 |" in md
    assert "62.42" not in md and "↳ Δ ours − published |  |  | – | – | – | – | – | – | – | -1.30 |" in md

"""One source of published values: the registry's rows, re-read from the paper texts,
and their row -> run bindings, which the per-suite tables read (no regex or prefix rules)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from csebench.study.params import load_params
from csebench.study.resolve import resolve_run, suite_runs
from csebench.results.published import Published, for_run
from csebench.results.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
PAPERS = Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared")) / "papers"
REG = load_registry()
P = load_params(ROOT / "params.yaml")
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
    # the row of the setting the printed number comes from
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
    # a study's row names the paper item its values are copied from, not the study
    ("sts", "zoo", "bert-base-esimcse", [(row("esimcse/table-main", "ESimCSE-BERT base")["published"],
                                          ["ESimCSE Table (unsup. STS)"], "ESimCSE-BERT base")]),
    ("sts", "zoo", "roberta-base-sncse", [(row("sncse/table-main", "SNCSE-RoBERTa base")["published"], ["SNCSE Table (unsup. STS)"],
                                           "SNCSE-RoBERTa base")]),
    ("sts", "zoo", "bert-base-mixcse", [(row("mixcse/table-main", "MixCSE-BERT base")["published"], ["MixCSE Table (unsup. STS)"],
                                         "MixCSE-BERT base")]),
    ("sts", "zoo", "roberta-base-mixcse", []),  # no MixCSE RoBERTa row is printed where it can be read
    ("sts", "paper-esimcse", "bert-base-esimcse", [(row("esimcse/table-main", "ESimCSE-BERT base")["published"],
                                                    ["ESimCSE Table (unsup. STS)"], "ESimCSE-BERT base")]),
])
def test_suite_tables_read_the_rows_bound_to_each_run(kind, suite, run, expected):
    assert [(p.values, p.sources, p.label) for p in for_run(kind, suite, run)] == expected


def test_an_ablation_suite_table_shows_the_value_of_its_own_setting(tmp_path):
    """ablation-sscl-dim/sscl_bert-128 beside SSCL Table 5's 128-dimensional 61.30, not beside Table 2's
    256-dimensional 62.42 (which the backbone and method rules of resources/published.yaml attached)."""
    from csebench.study.params import load_params
    from csebench.results.render import render_item

    tasks = {t: 60.0 for t in ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]}
    d = tmp_path / "ablation-sscl-dim" / "runs" / "sscl_bert-128" / "seed42"  # the suite's other runs: not yet run
    d.mkdir(parents=True)
    (d / "sts.json").write_text(json.dumps({"tasks": tasks, "avg": 60.0, "run_info": {"method": "sscl_bert", "backbone": "bert-base"}}))
    render_item("suite/ablation-sscl-dim", load_params(ROOT / "params.yaml"), str(tmp_path))
    md = (tmp_path / "ablation-sscl-dim" / "tables" / "sts.md").read_text()
    assert "↳ published: SSCL Table 5 | “SSCL-BERT / 128” |  | – | – | – | – | – | – | – | 61.30 |" in md
    assert "62.42" not in md and "↳ Δ ours − published |  |  | – | – | – | – | – | – | – | -1.30 |" in md


# ------------------------------------------------------- each registry row in the setting its printed number comes from


def test_iscse_table_4_avg_sts_is_the_development_average():
    from csebench.results.registry import load_registry

    it = load_registry().item("is-cse/table-4")
    cols = {c["name"]: c["metric"] for c in it.layout["columns"]}
    assert cols == {"STS-B": "stsb_dev", "Avg. STS": "avg_sts_dev"}


def _reg():
    from csebench.results.registry import load_registry

    return load_registry()


def _row_run(item_id: str, label: str) -> tuple[str, str]:
    it = _reg().item(item_id)
    row = next(r for b in it.blocks() for r in b["rows"] if r["label"] == label)
    suite, _, run = row["run"].rpartition("/")
    return suite or it.suites[0], run


def test_sscl_rows_run_in_the_dimension_of_their_printed_number():
    """SSCL Table 5 ties each printed Avg. to a dimension: SSCL-BERT 62.42 is 256-d, SSCL-SimCSE 77.90 is
    768-d (no head). Tables 2 and 7 print the same averages: their runs must use the same dimension."""
    table5 = {}
    model = None
    for row in _reg().item("sscl/table-5").layout["rows"]:
        model = row["label"][0] or model
        table5[(model, row["published"][0] if row.get("published") else None)] = int(row["label"][1])
    dims = {"SSCL-BERT": table5[("SSCL-BERT", 62.42)], "SSCL-SimCSE": table5[("SSCL-SimCSE", 77.90)]}
    assert dims == {"SSCL-BERT": 256, "SSCL-SimCSE": 768}
    avg = {r["label"]: r["published"][-1] for r in _reg().item("sscl/table-2").layout["rows"] if r.get("published")}
    assert avg["SSCL-BERT (cls.)"] == 62.42 and avg["SSCL-SimCSE"] == 77.90
    for item, label, model in [("sscl/table-2", "SSCL-BERT (cls.)", "SSCL-BERT"), ("sscl/table-2", "SSCL-SimCSE", "SSCL-SimCSE"),
                               ("sscl/table-7", ["SSCL-BERT (cls.)", "64"], "SSCL-BERT"),
                               ("sscl/table-7", ["SSCL-SimCSE", "64"], "SSCL-SimCSE")]:
        suite, run = _row_run(item, label)
        got = resolve_run(P, suite, run, 42).training.projection_dim or 768
        assert got == dims[model], (item, label, got)
        assert resolve_run(P, suite, run, 42).training.projection_head == "linear"  # the paper's head


def test_untrained_rows_are_evaluation_only_runs():
    """Every row that prints an untrained backbone has a run with train: false (no "not a training run")."""
    rows = [(it, b, r) for it in _reg().items for b in it.blocks() for r in b.get("rows") or []]
    assert not [r["label"] for _, _, r in rows if "untrained backbone" in str(r.get("missing", ""))]
    expected = {("sscl/table-2", "BERT (cls.)"), ("sscl/table-2", "BERT (avg.)"), ("sscl/table-2", "BERT large (cls.)"),
                ("sscl/table-3", "BERT base (cls.)"), ("sscl/table-3", "BERT base (avg.)"), ("sscl/table-3", "BERT large (cls.)"),
                ("sscl/table-4", "BERT"), ("is-cse/table-1", "BERT base (first-last avg.)"),
                ("is-cse/table-1", "RoBERTa base (first-last avg.)"), ("is-cse/table-8", "Avg. BERT embeddings"),
                ("is-cse/table-8", "BERT-[CLS] embedding"), ("distillcse/table-4", "BERT base (first-last avg.)")}
    untrained = set()
    for it, _, r in rows:
        if r.get("run"):
            suite, _, run = r["run"].rpartition("/")
            if not resolve_run(P, suite or it.suites[0], run, 42).train:
                untrained.add((it.id, str(r["label"]) if not isinstance(r["label"], list) else r["label"][0] or "BERT"))
    assert expected <= untrained
    t5 = [r for r in _reg().item("sscl/table-5").layout["rows"] if r.get("run", "").startswith("paper-backbones/")]
    assert [resolve_run(P, "paper-backbones", r["run"].split("/")[1], 42).training.projection_dim for r in t5] == [128, 256, None]
    assert not resolve_run(P, "demo", "minilm", 42).train  # the packaged MiniLM at demo scale
    # MiniLM pools with its own mean: the demo's untrained row stands for BERT (avg.)
    assert _reg().item("sscl/table-2").demo["runs"]["paper-backbones/bert-base-avg"] == "demo/minilm"


def test_gs_infonce_released_settings_are_a_selectable_variant():
    """caskcsg/sentemb gsInfoNCE/run.sh: random_size 192, dropout 0.2 (BERT), fp16, RoBERTa-large bs 128 lr 2e-5."""
    def cfg(method_suite, backbone, method):
        return resolve_run(P, method_suite, f"{backbone}-{method}", 42)

    for bb, lr, bs, drop in [("bert-base", 3e-5, 64, 0.2), ("bert-large", 1e-5, 64, 0.2), ("roberta-base", 1e-5, 64, 0.1),
                             ("roberta-large", 2e-5, 128, 0.1)]:
        c = cfg("paper-gs-infonce-released", bb, "gs_infonce_released")
        g = c.objectives["gaussian_negatives"]
        assert (c.training.learning_rate, c.training.batch_size, c.training.dropout, c.training.precision) == (lr, bs, drop, "fp16")
        assert g["num_negatives"] == 192 and g["weight"] == 1.0 and g["mean"] == 0.0
        paper = cfg("paper-gs-infonce", bb, "gs_infonce")  # the paper's setting stays the default
        assert paper.objectives["gaussian_negatives"]["num_negatives"] is None and paper.objectives["gaussian_negatives"]["ratio"] == 3
        assert (paper.training.batch_size, paper.training.dropout, paper.training.precision) == (64, None, "auto")


def test_distillcse_released_schedule_is_selectable_and_the_paper_schedule_the_default():
    paper = resolve_run(P, "paper-distillcse", "bert-base-distillcse", 42).training
    released = resolve_run(P, "paper-distillcse", "bert-base-distillcse-released-schedule", 42)
    assert (paper.epochs, paper.max_steps, paper.precision) == (1, None, "auto")
    assert (released.training.max_steps, released.training.precision) == (5000, "fp16")
    student = resolve_run(P, "paper-distillcse", "bert-base-distillcse", 42)
    assert released.objectives == student.objectives  # only the schedule differs


def test_distillcse_figure_2_draws_both_pairs_and_table_2_prints_the_spearman_x100(tmp_path):
    from csebench.results.render import render_item

    series = {s["run"] for s in _reg().item("distillcse/figure-2").layout["series"]}
    assert series == {"bert-base-vanilla-distill", "bert-base-group-p", "bert-base-teacher-components", "bert-base-distillcse"}
    results = tmp_path / "results"
    f = results / "paper-distillcse" / "analysis" / "teacher_logits.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"across_teachers": {"top12_spearman": 0.5}}))
    render_item("distillcse/table-2", P, str(results), "paper", tmp_path / "out")
    md = (tmp_path / "out" / "table-2.md").read_text()
    assert "| **t_ij** | ours | 50.00 |" in md and "|  | published | 48.56 |" in md and "| Δ ours − published | +1.44 |" in md


def test_every_paper_scale_suite_feeds_a_registry_item():
    """No suite trains runs that no table or figure reads (the removed
    ablation-distillcse-rounds / -components retrained paper-distillcse's runs)."""
    used = set(_reg().suites(rebuilt_only=False))
    idle = [s for s, spec in P["suites"].items() if spec.get("data") == "wiki1m" and s not in used]
    assert idle == []
    assert "ablation-distillcse-rounds" not in P["suites"] and "ablation-distillcse-components" not in P["suites"]


def test_gs_infonce_figure_2_says_its_published_points_come_from_table_3(tmp_path):
    import csv

    from csebench.results.render import render_item
    from csebench.results.pages import reproduction_md

    render_item("gs-infonce/figure-2", P, str(tmp_path / "empty"), "paper", tmp_path / "out")
    header = next(csv.reader(open(tmp_path / "out" / "figure-2.csv")))
    assert "published (from Table 3)" in header
    assert "published (from Table 3)" in (tmp_path / "out" / "figure-2.md").read_text()
    line = next(ln for ln in reproduction_md().splitlines() if ln.startswith("| Figure 2 |") and "against M" in ln)
    assert "8 printed (from Table 3)" in line


# -------------------------------------------------------------------------------- rows that compared another experiment


def _bound(item_id: str, label):
    suite, run = _row_run(item_id, label)
    return resolve_run(P, suite, run, 42)


def test_sscl_table_7_bert_cls_at_batch_64_is_the_untrained_backbone():
    """Its printed values are Table 2's untrained BERT (cls.) row, column for column: the same
    evaluation-only run, not a trained model beside an untrained number."""
    t7 = next(r for r in _reg().item("sscl/table-7").layout["rows"] if r["label"] == ["BERT (cls.)", "64"])
    t2 = next(r for r in _reg().item("sscl/table-2").layout["rows"] if r["label"] == "BERT (cls.)")
    assert t7["published"] == t2["published"]
    cfg = _bound("sscl/table-7", ["BERT (cls.)", "64"])
    assert cfg.train is False and cfg.key() == _bound("sscl/table-2", "BERT (cls.)").key()
    assert "paper-backbones" in _reg().item("sscl/table-7").suites
    assert _bound("sscl/table-7", ["BERT (cls.)", "128"]).train  # 47.89 is not the untrained row


def test_distillcse_vanilla_rows_run_the_temperatures_of_their_printed_77_03():
    """DistillCSE's vanilla baseline prints 77.03 (Tables 3, 4, 5); by its own Table 7 that is the
    tau_s 0.05 / tau_t 0.02 cell (0.02 / 0.01, the temperatures it says it fixes, gives 77.13)."""
    t7 = _reg().item("distillcse/table-7").blocks()[0]
    cells = {float(r["label"]): dict(zip((float(c["name"]) for c in t7["columns"]), r["published"])) for r in t7["rows"]}
    rows = [("distillcse/table-3", "SimCSE + Vanilla Distill"), ("distillcse/table-4", "Vanilla-Distill-BERT base"),
            ("distillcse/table-5", "SimCSE + Distill")]
    for item, label in rows:
        avg = next(r for b in _reg().item(item).blocks() for r in b["rows"] if r["label"] == label)["published"][-1]
        printed_at = [(ts, tt) for ts, row in cells.items() for tt, v in row.items() if v == avg]
        assert printed_at == [(0.05, 0.02)], (item, printed_at)
        d = _bound(item, label).objectives["distillation"]
        assert (d["student_temperature"], d["teacher_temperature"]) == printed_at[0], item
        assert d["shuffle"] == "none" and d["teachers"]["seeds"] == [1]
    # one experiment: Tables 3-5's vanilla rows and Table 7's cell are trained once
    keys = {_bound(item, label).key() for item, label in rows}
    assert keys == {resolve_run(P, "ablation-distillcse-temperature", "ts-0.05-tt-0.02", 42).key()}
    # the stated temperatures stay beside them, marked as no row of the paper
    for item, label in rows:
        extra = next(r for b in _reg().item(item).blocks() for r in b["rows"] if r["label"] == f"{label}, τs 0.02 / τt 0.01")
        assert "published" not in extra and "not a row" in extra["note"]


def test_one_printed_row_is_bound_to_one_backbone():
    """A row printed identically in several items (a paper reprinting another's numbers) is one experiment:
    every row carrying those values is bound to runs of the same backbone and pooler, trained or not alike.
    The case that showed it: SimCSE's BERT-[CLS] transfer row (Avg 84.66) was bound to BERT base in IS-CSE
    Table 8 and to BERT large in SSCL Table 3."""
    seen: dict[tuple, dict] = {}
    for it in _reg().items:
        for b in it.blocks():
            for r in b.get("rows") or []:
                pub = r.get("published")
                if not r.get("run") or not pub or len(pub) < 7 or None in pub:
                    continue
                suite, _, run = r["run"].rpartition("/")
                cfg = resolve_run(P, suite or it.suites[0], run, 42)
                seen.setdefault(tuple(pub), {})[(it.id, str(r["label"]))] = (cfg.backbone.model, cfg.backbone.pooler, cfg.train)
    shared = {values: binds for values, binds in seen.items() if len(binds) > 1}
    assert len(shared) >= 5  # SimCSE's base rows, SSCL's rows repeated in Table 7, DistillCSE's vanilla row, ...
    for values, binds in shared.items():
        assert len(set(binds.values())) == 1, (values, binds)
    cls = seen[(78.68, 84.85, 94.21, 88.23, 84.13, 91.40, 71.13, 84.66)]
    assert set(cls) == {("is-cse/table-8", "BERT-[CLS] embedding"), ("sscl/table-3", "BERT large (cls.)")}
    assert set(cls.values()) == {("bert-base-uncased", "cls", False)}


def test_sscl_table_3_marks_each_trained_row_as_a_different_checkpoint_selection(tmp_path):
    """The paper selects its transfer checkpoints by the 7 transfer tasks' dev average, ours by STS-B dev:
    the table itself (Markdown and LaTeX), not only its notes, says so on every trained row."""
    from csebench.results.render import render_item

    item = _reg().item("sscl/table-3")
    trained = [r for r in item.layout["rows"] if _bound("sscl/table-3", r["label"]).train]
    untrained = [r for r in item.layout["rows"] if not _bound("sscl/table-3", r["label"]).train]
    assert len(trained) >= 7 and untrained
    assert all("different selection" in r.get("note", "") for r in trained)
    assert not any("different selection" in r.get("note", "") for r in untrained)
    render_item("sscl/table-3", P, str(tmp_path / "empty"), "paper", tmp_path / "out")
    md = (tmp_path / "out" / "table-3.md").read_text()
    table = [ln for ln in md.splitlines() if ln.startswith("| **")]
    assert sum("different selection" in ln for ln in table) == len(trained)
    assert "different selection" in md.split("| Model")[0]  # the block's title above the table
    tex = (tmp_path / "out" / "table-3.tex").read_text()
    assert tex.count("different selection") == len(trained)


def test_no_note_leaves_out_a_row_the_item_rebuilds_and_figure_2_shows_both_pairs():
    """No note goes stale against what its item draws. The two that did: IS-CSE Table 1 listed RoBERTa base
    (first-last avg.) as left out while rebuilding it; DistillCSE Figure 2's `shows` named one of the two pairs
    it draws."""
    import re

    for it in _reg().items:
        rebuilt = {str(r["label"]) for b in it.blocks() for r in b.get("rows") or [] if r.get("run") or r.get("runs")}
        for note in it.notes:
            if "Left out" not in note:
                continue
            left_out = note.split("Left out", 1)[1].split(":", 1)[-1]  # after "(methods we do not implement):"
            named = {x.strip(" .") for x in re.split(r", | and ", left_out)}
            assert not rebuilt & named, (it.id, rebuilt & named)
    shows = _reg().item("distillcse/figure-2").shows
    assert "one teacher" in shows and "16 teacher components" in shows


def _sscl_rows():
    """(item, label, run config) of every SSCL table row with published values bound to a layer-negatives run."""
    out = []
    for it in _reg().items:
        if not it.id.startswith("sscl/table"):
            continue
        for b in it.blocks():
            for r in b.get("rows") or []:
                runs = [r["run"]] if r.get("run") else list(r.get("runs") or [])
                runs = runs or [c["run"] for c in b.get("columns") or [] if c.get("run")]  # Table 1: a run per column
                for ref in runs:
                    suite, _, run = ref.rpartition("/")
                    cfg = resolve_run(P, suite or it.suites[0], run, 42)
                    if r.get("published") and "layer_negatives" in cfg.objectives:
                        out.append((it.id, str(r["label"]), cfg))
    return out


def test_every_printed_sscl_row_runs_two_negative_layers():
    """SSCL Table 2's SSCL-SimCSE 77.90 (again in Tables 5, 6, 7) is Fig. 3b's 2-layer result, not
    Fig. 3a's single-layer best (77.80), and the released code's hard_negative_layers defaults to 2. Every
    printed SSCL row (SSCL-SimCSE and SSCL-BERT, Tables 1-7) runs layers 11 and 10 (BERT large: 23, 22) with the
    paper's Eq. 4 and dropout positives."""
    from csebench.objectives.layer_negatives import LayerNegatives, LayerNegativesSettings

    rows = _sscl_rows()
    assert {item for item, _, _ in rows} == {f"sscl/table-{n}" for n in range(1, 8)}
    for item, label, cfg in rows:
        ln = cfg.objectives["layer_negatives"]
        layers = 24 if cfg.backbone.model == "bert-large-uncased" else 12
        got = LayerNegatives(LayerNegativesSettings(**ln), 8, layers).intermediate_layers()
        assert got == [layers - 1, layers - 2], (item, label, got)
        assert (ln["variant"], ln["positives"]) == ("paper", "dropout"), (item, label)
    fig3b = next(p for p in _reg().item("sscl/figure-3b").published_text)
    assert "2 layers" in fig3b["quote"] and "77.90" in fig3b["value"]
    assert resolve_run(P, "ablation-sscl-stacked", "stacked-2", 42).key() == resolve_run(P, "paper-sscl", "sscl", 42).key()


def test_sscl_one_layer_and_released_rows_sit_beside_the_printed_ones():
    """The one-layer reading stays selectable where the paper's text describes it (Sec. 3, the captions of
    Figs. 1 and 4, Fig. 3a), and the released code's settings are rows beside Table 2's SSCL-SimCSE and
    SSCL-BERT (cls.), not rows of the paper."""
    def row(label):
        return next(r for r in _reg().item("sscl/table-2").layout["rows"] if r["label"] == label)

    for label, method in [("SSCL-SimCSE, one layer", "sscl_one_layer"), ("SSCL-SimCSE, released code", "sscl_released"),
                          ("SSCL-BERT (cls.), released code", "sscl_bert_released")]:
        assert "published" not in row(label) and "not a row" in row(label)["note"]
        assert _bound("sscl/table-2", label).method == method
    one = _bound("sscl/table-2", "SSCL-SimCSE, one layer").objectives["layer_negatives"]
    assert (one["layer"], one["stacked"], one["variant"]) == (None, 1, "paper")
    for fig in ("sscl/figure-1", "sscl/figure-4"):
        assert "penultimate layer" in _reg().item(fig).shows
        sscl = [s["run"] for s in _reg().item(fig).layout["series"] if "SSCL" in s["label"]]
        assert sscl == ["paper-sscl/sscl_one_layer"], fig
    assert resolve_run(P, "ablation-sscl-layer", "layer-11", 42).key() == resolve_run(P, "paper-sscl", "sscl_one_layer", 42).key()
    released = _bound("sscl/table-2", "SSCL-SimCSE, released code").objectives["layer_negatives"]
    assert (released["variant"], released["stacked"], released["positives"]) == ("released", 2, "dropout")


def test_sscl_bert_released_is_the_anchor_as_its_own_positive_with_dropout_on():
    """nuochenpku/SSCL 8c97d82 computes sim(z1, z1), the SSCL-BERT version by the authors' reply
    (https://github.com/nuochenpku/SSCL/issues/1). Ours by default reads the paper ("no augmentation": dropout 0,
    so the two views coincide); the released version is selectable: self positives, dropout left on."""
    paper = _bound("sscl/table-2", "SSCL-BERT (cls.)")
    released = _bound("sscl/table-2", "SSCL-BERT (cls.), released code")
    assert paper.training.dropout == 0.0 and paper.objectives["layer_negatives"]["positives"] == "dropout"
    assert released.training.dropout is None  # the backbone's own dropout, as the released code trains
    ln = released.objectives["layer_negatives"]
    assert (ln["positives"], ln["variant"], ln["stacked"]) == ("self", "released", 2)
    assert (released.training.projection_dim, released.training.projection_head) == (256, "linear_tanh")
    assert paper.training.projection_dim == 256 and paper.training.projection_head == "linear"


# -------------------------------------------------------------- the zoo methods' own papers

PRINTED = ROOT / "src/csebench/resources/printed"
ZOO_PAPERS = ("esimcse", "promptbert", "sncse", "dclr", "mixcse", "rankcse", "diffcse")


def test_each_zoo_paper_names_where_its_printed_values_come_from():
    """A paper whose text is not shipped names its source; a printed file keeps labels, numbers and the URL."""
    for name in ZOO_PAPERS:
        meta = REG.papers[name]
        assert meta["text"] is None and meta["source"], name
        if meta.get("printed"):
            text = (PRINTED / meta["printed"]).read_text(encoding="utf-8")
            assert re.search(r"Source: .*https://", text), name
            assert "Table (unsup. STS):" in text, name
    # MixCSE's and RankCSE's items are rebuilt from the zoo's runs, DiffCSE's from its own suite
    assert [(it.id, it.status, it.suites) for it in REG.items if it.paper in ("mixcse", "rankcse", "diffcse")] == [
        ("diffcse/table-main", "rebuilt", ["paper-diffcse"]), ("mixcse/table-main", "rebuilt", ["zoo"]),
        ("rankcse/table-main", "rebuilt", ["zoo"])]


def test_printed_averages_agree_with_the_abstracts_improvements_over_simcse():
    """ESimCSE's abstract: +2.02 on BERT base; PromptBERT's: +2.29 (BERT), +2.58 (RoBERTa); SNCSE's abstract
    prints its averages: the README values (or the abstract's) are these, to the printed digit."""
    simcse = {bb: row("simcse/table-main", f"SimCSE-{bb}")["published"][-1] for bb in ("BERT base", "RoBERTa base")}
    assert round(simcse["BERT base"] + 2.02, 2) == row("esimcse/table-main", "ESimCSE-BERT base")["published"][-1]
    assert round(simcse["BERT base"] + 2.29, 2) == row("promptbert/table-main", "PromptBERT (BERT base)")["published"][-1]
    assert round(simcse["RoBERTa base"] + 2.58, 2) == row("promptbert/table-main", "PromptRoBERTa (RoBERTa base)")["published"][-1]
    for name, quote in [("esimcse.md", "by an average Spearman correlation of 2.02% on BERT-base"),
                        ("promptbert.md", "2.29 and 2.58 points of improvement"),
                        ("sncse.md", "78.97% on BERTbase and 79.23% on RoBERTabase")]:
        assert quote in " ".join((PRINTED / name).read_text(encoding="utf-8").split()), name


def test_dclr_rows_are_the_rows_is_cse_and_distillcse_reprint():
    """DCLR's text is not shipped: its rows must equal IS-CSE Table 1's DCLR rows taken from the paper (not
    "(ours)") and DistillCSE Table 4's, parsed from the paper texts."""
    for size in ("base", "large"):
        for fam in ("BERT", "RoBERTa"):
            ours = row("dclr/table-main", f"DCLR-{fam} {size}")["published"]
            iscse = [r for r in labelled_rows("is-cse.md", f"| DCLR-{fam} <sub>{size}</sub>") if r]
            distill = labelled_rows("distillcse.md", f"DCLR-{fam} <sub>{size}</sub>")
            assert iscse[0] == ours == distill[0], (fam, size)


def test_each_zoo_row_carries_its_own_papers_row_and_names_it():
    """zoo/table-1: a row with published values names, in its source, its method's own paper item, and carries
    that item's row for the same backbone; a row without any says why."""
    own = {"SimCSE": "simcse/table-main", "GS-InfoNCE": "gs-infonce/table-2", "IS-CSE": "is-cse/table-1",
           "SSCL": "sscl/table-2", "DistillCSE": "distillcse/table-4", "ESimCSE": "esimcse/table-main",
           "PromptBERT": "promptbert/table-main", "SNCSE": "sncse/table-main", "DCLR": "dclr/table-main",
           "MixCSE": "mixcse/table-main", "RankCSE": "rankcse/table-main", "DiffCSE": "diffcse/table-main"}
    zoo = REG.item("zoo/table-1")
    with_values = 0
    for r in REG.item("zoo/table-1").blocks()[0]["rows"]:
        pub = r.get("published")
        if not pub:
            assert r["note"].startswith("no published value: ") and "source" not in r, r["label"]
            continue
        method, backbone = r["label"].split("-BERT base")[0].split("-RoBERTa base")[0], r["label"].rsplit("-", 1)[1]
        item = own[method]
        assert r["source"].startswith(f"{REG.papers[item.split('/')[0]]['short']} {REG.item(item).number}"), r["label"]
        rows = [x for b in REG.item(item).blocks() for x in b["rows"] if x.get("published") == pub]
        assert rows, (r["label"], item)
        # the copied row's source kind travels with it (a reprint stays marked as one in the zoo)
        assert REG.source_kind(zoo, r) == REG.source_kind(REG.item(item), rows[0]), r["label"]
        label = str(rows[0]["label"])
        assert backbone in label or (item, label) == ("sscl/table-2", "SSCL-SimCSE"), (r["label"], label)  # SSCL: BERT base only
        with_values += 1
    assert with_values == 22  # all 24 but MixCSE and SSCL on RoBERTa base


def test_each_zoo_paper_suite_trains_the_zoos_seed_42_runs():
    """The papers' suites are the zoo's runs at seed 42 (same fingerprints: trained once, docs/runs.md)."""
    for suite in ("paper-esimcse", "paper-promptbert", "paper-sncse", "paper-dclr"):
        for run in (r["name"] for r in suite_runs(P, suite)):
            assert resolve_run(P, suite, run, 42).fingerprint() == resolve_run(P, "zoo", run, 42).fingerprint(), (suite, run)


# -------------------------------------------------------------- where each published row was read: its source kind

LEADERBOARD = "github.com/Doragd/Awesome-Sentence-Embedding/blob/335c1d9ca715b026af367d175099b5b209549c94/README.md"
# the rows read from the third-party leaderboard: (item, label)
REPRINTED = [("mixcse/table-main", "MixCSE-BERT base"), ("mixcse/table-main", "MixCSE-BERT large"),
             ("rankcse/table-main", "RankCSE_listNet-BERT base"), ("rankcse/table-main", "RankCSE_listMLE-BERT base"),
             ("rankcse/table-main", "RankCSE_listMLE-RoBERTa base"), ("rankcse/table-main", "RankCSE_listNet-RoBERTa base"),
             ("sncse/table-main", "SNCSE-BERT base"), ("sncse/table-main", "SNCSE-RoBERTa base"),
             ("esimcse/table-main", "ESimCSE-RoBERTa base")]


def _printed_rows(name: str, method: str) -> dict[str, list[float]]:
    """Backbone -> numbers of the printed file's leaderboard rows of ``method`` (means of "mean±std")."""
    out = {}
    for line in (PRINTED / name).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[1] == method:
            out[cells[0]] = [float(c.split("±")[0]) for c in cells[2:]]
    return out


def test_every_published_row_has_a_source_kind():
    """Each row with published values says where they were read: the paper, the authors' README or a third-party
    reprint; a paper's default needs its text shipped, else a row or paper ``source_kind``."""
    from csebench.results.registry import SOURCE_KINDS

    kinds = {}
    for it in REG.items:
        for b in it.blocks():
            for r in b.get("rows") or []:
                if any(v is not None for v in r.get("published") or []):
                    kinds[(it.id, str(r["label"]))] = REG.source_kind(it, r)
    assert set(kinds.values()) == set(SOURCE_KINDS)
    assert kinds[("is-cse/table-1", "IS-CSE-BERT base")] == "paper"  # the paper's text is shipped
    assert kinds[("promptbert/table-main", "PromptBERT (BERT base)")] == "readme"
    assert kinds[("esimcse/table-main", "ESimCSE-BERT base")] == "readme"
    assert kinds[("simcse/table-main", "SimCSE-BERT base")] == kinds[("dclr/table-main", "DCLR-BERT base")] == "reprint"
    for key in REPRINTED:
        assert kinds[key] == "reprint", key
    for name in ("mixcse", "rankcse", "sncse", "esimcse"):
        assert LEADERBOARD in (PRINTED / REG.papers[name]["printed"]).read_text(encoding="utf-8"), name
        assert "Doragd/Awesome-Sentence-Embedding" in REG.papers[name]["sources"]["reprint"], name
    for bb in ("BERT base", "RoBERTa base"):  # the authors' own output, not the leaderboard's reprint of it
        assert kinds[("diffcse/table-main", f"DiffCSE-{bb}")] == "notebook"


def test_a_published_row_without_a_source_kind_is_refused():
    from csebench.core.errors import ConfigError
    from csebench.results.registry import parse_registry

    item = {"id": "x/table-1", "number": "Table 1", "kind": "table", "title": "t", "shows": "s", "metric": "m",
            "status": "not-rebuilt", "reason": "r", "layout": {"columns": [{"name": "Avg."}], "rows": [{"label": "A", "published": [1.0]}]}}
    with pytest.raises(ConfigError, match="published values without a source kind"):
        parse_registry({"x": {"paper": {"short": "X", "text": None}, "items": [item]}})
    with pytest.raises(ConfigError, match="source_kind 'blog'"):
        parse_registry({"x": {"paper": {"short": "X", "text": None, "source_kind": "paper"},
                              "items": [{**item, "layout": {"columns": [{"name": "Avg."}],
                                                            "rows": [{"label": "A", "published": [1.0], "source_kind": "blog"}]}}]}})
    assert parse_registry({"x": {"paper": {"short": "X", "text": "x.md"}, "items": [item]}}).items  # a shipped text: the paper


def test_each_leaderboard_row_is_printed_and_its_mean_is_its_average():
    """Every row read from the leaderboard is its printed row (labels and numbers, resources/printed/), and its 7 tasks'
    mean is its printed average to the printed 0.01, except where the item notes the printed average is off it."""
    files = {"mixcse": ("mixcse.md", "MixCSE"), "diffcse": ("diffcse.md", "DiffCSE"), "sncse": ("sncse.md", "SNCSE"),
             "esimcse": ("esimcse.md", "ESimCSE")}
    off = []
    for item, label in REPRINTED:
        pub = row(item, label)["published"]
        paper = item.split("/")[0]
        backbone = label.rsplit("-", 1)[1].replace(" ", "-")
        if paper == "rankcse":
            printed = _printed_rows("rankcse.md", label.split("-")[0])[backbone]
        else:
            name, method = files[paper]
            printed = _printed_rows(name, method)[backbone]
        assert printed == pub, (item, label)
        mean = sum(pub[:7]) / 7
        if abs(mean - pub[7]) > 0.011:
            off.append(label)
            assert any(n.startswith("Printed average off the mean") and f"(tasks: {mean:.2f})" in n
                       for n in REG.item(item).notes), (item, label, mean)
    assert off == ["MixCSE-BERT large"]  # 78.80 printed, its tasks' mean 78.79 (a mean of per-seed averages)


def test_each_reprinted_row_equals_the_registrys_other_sources():
    """Where the leaderboard overlaps a source the registry already holds, it prints the same numbers: SNCSE's
    averages are the abstract's, ESimCSE's rows the authors' README's, DiffCSE BERT base DistillCSE Table 4's reprint."""
    text = (PRINTED / "sncse.md").read_text(encoding="utf-8")
    abstract = {m.group(1): float(m.group(2)) for m in re.finditer(r"\| SNCSE-(\w+) base \| (\d+\.\d+) \|", text)}
    assert abstract == {"BERT": 78.97, "RoBERTa": 79.23}
    for fam, avg in abstract.items():
        assert row("sncse/table-main", f"SNCSE-{fam} base")["published"][-1] == avg
        assert f"{avg}% on {fam}base" in " ".join(text.split())
    readme = {r["label"]: r["published"] for r in REG.item("esimcse/table-main").blocks()[0]["rows"]}
    board = _printed_rows("esimcse.md", "ESimCSE")
    assert board["BERT-base"] == readme["ESimCSE-BERT base"]  # the README's evaluation output, every column
    for bb in ("BERT-large", "RoBERTa-base", "RoBERTa-large"):  # the README's Model List averages
        assert board[bb][-1] == readme[f"ESimCSE-{bb.replace('-', ' ')}"][-1], bb
    assert "| unsup-esimcse-roberta-base | 77.44 |" in (PRINTED / "esimcse.md").read_text(encoding="utf-8")
    distill = labelled_rows("distillcse.md", "DiffCSE-BERT <sub>base</sub>")
    assert distill[0] == row("diffcse/table-main", "DiffCSE-BERT base")["published"]


NOTEBOOK = "github.com/voidism/DiffCSE/blob/f724b2cc921efdfb4e4bd85cd7ca13a8f0d1f0cf/diffcse_evaluation.ipynb"


def test_diffcse_rows_are_the_authors_notebooks_output():
    """DiffCSE's rows are the authors' own: their notebook's evaluation of the released checkpoints, which it calls
    the paper's Table 1 (named with its commit); the leaderboard's reprint and DistillCSE Table 4's equal them."""
    text = (PRINTED / "diffcse.md").read_text(encoding="utf-8")
    assert NOTEBOOK in text and "You should get the results on Table 1 in our paper" in text
    assert "a reprint" not in text and "not the authors'" not in text
    meta = REG.papers["diffcse"]
    assert meta["source_kind"] == "notebook" and set(meta["sources"]) == {"notebook"}
    assert "diffcse_evaluation.ipynb at f724b2c" in meta["sources"]["notebook"] and "notebook" in meta["source"]
    notebook = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].startswith("voidism/diffcse-"):
            notebook[cells[0]] = [float(c) for c in cells[1:]]
    board = _printed_rows("diffcse.md", "DiffCSE")
    for bb, model in (("BERT base", "voidism/diffcse-bert-base-uncased-sts"), ("RoBERTa base", "voidism/diffcse-roberta-base-sts")):
        pub = row("diffcse/table-main", f"DiffCSE-{bb}")["published"]
        assert notebook[model] == pub == board[bb.replace(" ", "-")], bb
        assert abs(sum(pub[:7]) / 7 - pub[7]) <= 0.011, bb
    assert all(r.get("source_kind") == "notebook" for r in REG.item("zoo/table-1").blocks()[0]["rows"]
               if str(r["label"]).startswith("DiffCSE-"))


def _published_lines_after(text: str, label: str) -> list[str]:
    """The line after each line that names a row starting with ``label``: that row's published line."""
    lines = text.splitlines()
    return [lines[i + 1] for i, ln in enumerate(lines[:-1]) if re.search(r"(\*\*|^)" + re.escape(label), ln)]


def test_diffcse_rows_say_the_authors_notebook_in_every_rendering(tmp_path):
    """The paper item's Markdown (published lines, footnote), CSV and LaTeX; the zoo table's; the suite tables'."""
    import csv

    from csebench.results.render import render_item

    for item, name in (("diffcse/table-main", "table-main"), ("zoo/table-1", "table-1")):
        out = tmp_path / item.replace("/", "-")
        render_item(item, P, str(tmp_path / "empty"), "paper", out)
        md = (out / f"{name}.md").read_text()
        lines = _published_lines_after(md, "DiffCSE-")
        assert len(lines) == 2 and all(ln.startswith("|  | published") and "authors' notebook" in ln for ln in lines), lines
        assert "**authors' notebook**: DiffCSE: the authors' notebook github.com/voidism/DiffCSE diffcse_evaluation.ipynb at f724b2c" in md
        cells = list(csv.DictReader(open(out / f"{name}.csv")))
        diffcse = [c for c in cells if c["row"].startswith("DiffCSE") and c["published"]]
        assert len(diffcse) == 16 and {c["published_source_kind"] for c in diffcse} == {"notebook"}
        lines = _published_lines_after((out / f"{name}.tex").read_text(), "DiffCSE-")
        assert len(lines) == 2 and all("published" in ln and "authors' notebook" in ln for ln in lines), lines
    for suite in ("zoo", "paper-diffcse"):
        for bb in ("bert-base", "roberta-base"):
            (pub,) = for_run("sts", suite, f"{bb}-diffcse")
            assert pub.kinds == ["notebook"] and pub.source_text.endswith("(authors' notebook)"), (suite, bb)


def test_rankcse_rows_say_which_version_printed_them():
    """The leaderboard's RankCSE rows predate the ACL 2023 paper: they are the withdrawn ICLR 2023 submission's."""
    text = " ".join((PRINTED / "rankcse.md").read_text(encoding="utf-8").split())
    assert "ICLR2023 withdrawn" in text and "openreview.net/pdf?id=y_sZyxuuFh3" in text
    assert "whether the ACL 2023 table prints the same values is not readable here" in text
    assert "withdrawn ICLR 2023 submission" in REG.papers["rankcse"]["source"]
    assert any("ICLR 2023" in n and "ACL 2023" in n for n in REG.item("rankcse/table-main").notes)


def test_the_source_kind_is_shown_wherever_a_published_row_is_printed(tmp_path):
    """Paper item (Markdown line and footnote, CSV column, LaTeX), and the suite tables' published lines and CSV."""
    import csv

    from csebench.results.render import render_item
    from csebench.results.renderers.suite import render_csv_rows

    render_item("mixcse/table-main", P, str(tmp_path / "empty"), "paper", tmp_path / "out")
    md = (tmp_path / "out" / "table-main.md").read_text()
    published = [ln for ln in md.splitlines() if ln.startswith("|  | published")]
    assert len(published) == 2 and all(ln.startswith("|  | published (third-party reprint) |") for ln in published)
    assert "- **third-party reprint**: MixCSE: the third-party leaderboard github.com/Doragd/Awesome-Sentence-Embedding" in md
    cells = list(csv.DictReader(open(tmp_path / "out" / "table-main.csv")))
    assert {c["published_source_kind"] for c in cells if c["published"]} == {"reprint"}
    assert {c["published_source_kind"] for c in cells if not c["published"]} == {""}
    assert (tmp_path / "out" / "table-main.tex").read_text().count("third-party reprint") >= 2
    # a paper's own row stays unmarked
    render_item("is-cse/table-1", P, str(tmp_path / "empty"), "paper", tmp_path / "iscse")
    iscse = (tmp_path / "iscse" / "table-1.md").read_text()
    assert "|  | published | 72.86 |" in iscse and "third-party" not in iscse.split("Published values, by source kind")[0]
    # the suite tables: each source with its kind; merged identical rows keep each source's kind
    simcse = for_run("sts", "paper", "bert-base-simcse")[0]
    assert simcse.kinds == ["reprint", "paper", "paper", "paper"]
    assert simcse.source_text.startswith("SimCSE Table (unsup. STS) (third-party reprint); IS-CSE Table 1; ")
    mix = for_run("sts", "zoo", "bert-base-mixcse")[0]
    assert mix.source_text == "MixCSE Table (unsup. STS) (third-party reprint)"

    class Row:  # the fields render_csv_rows reads of a suite table's row
        backbone, method, run, seeds, same_run, is_baseline, test, std = "bert-base", "mixcse", "bert-base-mixcse", [42], "", False, None, None
        records: list = []
        mean = __import__("numpy").full(8, 70.0)
        published = [mix]

    header, out = render_csv_rows([Row()], "sts", "zoo")
    line = dict(zip(header, out[1]))
    assert (line["kind"], line["source"], line["source_kind"]) == ("published", "MixCSE Table (unsup. STS)", "reprint")

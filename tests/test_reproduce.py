"""The reproduction registry and its renderers: coverage, published values against the paper texts,
layouts resolved against params.yaml, each renderer on small synthetic result files, the pages."""

from __future__ import annotations

import copy
import csv
import json
import math
import os
import re
from pathlib import Path

import pytest

from csebench.study.params import load_params
from csebench.study.typed import Params
from csebench.core.errors import ConfigError
from csebench.results.registry import Item, default_suites, load_registry, parse_registry
from csebench.results.render import context, get, input_files, item_outputs, render_item
from csebench.results.tables import latex_escape

ROOT = Path(__file__).resolve().parents[1]
PAPERS = Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared")) / "papers"
REG = load_registry()
PARAMS = load_params(ROOT / "params.yaml")

EXPECTED = {  # every table and figure of the four papers and SimCSE's main table
    "simcse": ["table-main"],
    "is-cse": [f"table-{i}" for i in range(1, 10)] + [f"figure-{i}" for i in range(1, 6)],
    "gs-infonce": ["table-1", "table-2", "table-3", "figure-1", "figure-2"],
    "sscl": [f"table-{i}" for i in range(1, 8)] + ["figure-1", "figure-2", "figure-3a", "figure-3b", "figure-4", "figure-5", "figure-6"],
    "distillcse": [f"table-{i}" for i in range(1, 10)] + ["figure-1", "figure-2"],
    "combinations": ["table-1", "figure-1"],  # beyond the papers: csebench's own study
    "zoo": ["table-1", "figure-1"],  # beyond the papers: every method on one core
    # the zoo methods' own papers: their main STS tables
    **{p: ["table-main"] for p in ("esimcse", "promptbert", "sncse", "dclr", "mixcse", "rankcse", "diffcse")},
}
PRINTED = ROOT / "src/csebench/resources/printed"


def test_registry_lists_every_table_and_figure():
    got = {p: sorted(it.slug for it in items) for p, items in REG.by_paper().items()}
    assert got == {p: sorted(v) for p, v in EXPECTED.items()}


def test_coverage_reaches_the_issue_target():
    c = REG.coverage()
    assert c["rebuilt"] >= 37, c
    for it in REG.items:
        if it.status == "not-applicable":
            assert it.kind == "figure" and it.reason


def test_coverage_counts_measured_items_configuration_tables_and_not_applicable_apart():
    """Hyperparameter tables echo params.yaml (Δ is = or ≠) and are not measurements."""
    from csebench.results.pages import coverage_line

    c = REG.coverage()
    assert {it.id for it in REG.items if it.configuration} == {"is-cse/table-2", "gs-infonce/table-1"}
    assert c["measured"] + c["configuration"] == c["rebuilt"] and c["measured"] >= 37
    line = coverage_line(REG)
    assert f"**Coverage: {c['measured']} measured tables and figures**" in line
    assert f"**{c['configuration']} configuration tables**" in line and f"**{c['not-applicable']} not applicable**" in line
    assert "GS-InfoNCE Figure 2 re-plots Table 3's values" in line


def test_docs_page_is_current():
    from csebench.results.pages import reproduction_md

    assert (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8") == reproduction_md(), \
        "docs/reproduction.md is stale: run `csebench results docs`"


# ------------------------------------------------------------------------ published values

def _numbers(text: str) -> list[float]:
    text = re.sub(r"<[^>]+>", " ", text)
    return [float(x) for x in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE]-?\d+)?", text)]


def _paper_lines(item: Item) -> list[str] | None:
    """The paper's text (../shared/papers), else its printed values kept in the project (``printed:``)."""
    meta = REG.papers.get(item.paper) or {}
    if meta.get("printed"):
        return (PRINTED / meta["printed"]).read_text(encoding="utf-8").splitlines()
    text = meta.get("text")
    if not text:
        return None
    path = PAPERS / text
    if not path.is_file():
        pytest.skip(f"paper text not found: {path}")
    return path.read_text(encoding="utf-8").splitlines()


def _table_block(lines: list[str], number: str) -> str:
    """The text between the caption of ``number`` and the previous caption (where its rows are)."""
    caps = [i for i, ln in enumerate(lines) if re.match(r"\s*(Table|Figure) \d+[a-z]?:", ln)]
    mine = [i for i in caps if lines[i].lstrip().startswith(f"{number}:")]
    assert mine, f"no caption '{number}:' in the paper"
    end = mine[0]
    start = max([i for i in caps if i < end], default=-1) + 1
    return "\n".join(lines[start:end + 1])


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _published_rows(item: Item) -> list[list[list[float]]]:
    """Per block, per row, the published values carried for it, in column order."""
    return [[r for r in ([v for v in row.get("published") or [] if _num(v)] for row in b.get("rows") or []) if r]
            for b in item.blocks()]


def _series_values(item: Item) -> list[float]:
    lay = item.layout or {}
    vals = [p["published"] for s in lay.get("series") or [] for p in s.get("points") or [] if p.get("published") is not None]
    return vals + [v["published"] for v in lay.get("values") or [] if _num(v.get("published"))]


def _stream(text_lines: list[str]) -> list[tuple[int, float]]:
    """Every number of the text in reading order, with the index of its line."""
    return [(i, n) for i, ln in enumerate(text_lines) for n in _numbers(ln)]


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _match_in_order(stream, values, after: int, one_line: bool) -> int | None:
    """The stream position of values[0] of the first place after ``after`` where ``values`` occur in
    this order (other numbers may come between), all on one line if ``one_line``; None if nowhere."""
    for k in range(after + 1, len(stream)):
        if not _same(stream[k][1], values[0]):
            continue
        j = k
        for v in values[1:]:
            j = next((m for m in range(j + 1, len(stream)) if _same(stream[m][1], v)
                      and (not one_line or stream[m][0] == stream[k][0])), None)
            if j is None:
                break
        else:
            return k
    return None


WITH_VALUES = [it for it in REG.items if any(_published_rows(it)) or _series_values(it)]


@pytest.mark.parametrize("item", WITH_VALUES, ids=[it.id for it in WITH_VALUES])
def test_published_values_are_printed_in_order(item):
    """Within the item's own table (between its caption and the previous one): each row's values on
    one printed line, in the printed column order, and the rows of a block in the printed row order
    (a row may share a line with the next, as SSCL Table 7's interleaved batch-64/128 cells do). A
    swapped row or column fails. Figure points: in order within the table they come from
    (``published_from``), else anywhere in the paper (figures print their numbers in the text)."""
    lines = _paper_lines(item)
    if lines is None:
        pytest.skip("no paper text or printed file (SimCSE, DCLR: their rows are reprints, checked in tests/test_published.py; a study: none)")
    if item.kind == "table":
        printed = (REG.papers.get(item.paper) or {}).get("printed")  # a printed file holds the one table
        stream = _stream(lines if printed else _table_block(lines, item.number).splitlines())
        for b, rows in enumerate(_published_rows(item)):
            cursor = -1
            for values in rows:
                at = _match_in_order(stream, values, cursor, one_line=True)
                assert at is not None, f"{item.id}, block {b + 1}: {values} not printed in this order on one line after the previous row"
                cursor = at
    values = _series_values(item)
    if values:
        source = (item.layout or {}).get("published_from")
        text = _table_block(lines, source).splitlines() if source else lines
        assert _match_in_order(_stream(text), values, -1, one_line=False) is not None, \
            f"{item.id}: {values} not printed in this order in {source or 'the paper'}"


def test_the_order_check_catches_a_swapped_row_or_column():
    it = REG.item("is-cse/table-4")
    stream = _stream(_table_block(_paper_lines(it), it.number).splitlines())
    rows = _published_rows(it)[0]
    assert _match_in_order(stream, rows[0], -1, one_line=True) is not None
    assert _match_in_order(stream, rows[0][::-1], -1, one_line=True) is None  # columns swapped
    first = _match_in_order(stream, rows[1], -1, one_line=True)
    assert _match_in_order(stream, rows[0], first, one_line=True) is None  # row 256 after row 512: rows swapped


QUOTED = [it for it in REG.items if it.published_text]


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@pytest.mark.parametrize("item", QUOTED, ids=[it.id for it in QUOTED])
def test_quoted_values_are_verbatim(item):
    text = _norm("\n".join(_paper_lines(item) or []))
    for p in item.published_text:
        assert _norm(p["quote"]) in text, f"{item.id}: quote not in the paper: {p['quote']}"
        assert str(p["value"]).rstrip("%") in p["quote"], f"{item.id}: value {p['value']} not in its quote"


def test_published_values_align_with_their_columns():
    """A row's printed values are one per column of its block (the grid and the suite tables read them by position)."""
    for it in REG.items:
        for b in it.blocks():
            for row in b.get("rows") or []:
                assert set(row) - {"label", "run", "runs", "metric", "metrics", "published", "source", "source_kind", "note", "missing", "digits", "scale"} == set(), (it.id, row)
                if row.get("published") is not None:
                    assert len(row["published"]) == len(b["columns"]), (it.id, row["label"])


# ----------------------------------------------------------------------------- layouts

REBUILT = [it for it in REG.items if it.rebuilt]


@pytest.mark.parametrize("item", REBUILT, ids=[it.id for it in REBUILT])
def test_layout_resolves_against_params(item):
    """Every suite and run the item reads exists, and its input files are listed (paper scale)."""
    from csebench.study.resolve import find_run

    for s in item.suites:
        assert s in PARAMS["suites"], f"{item.id}: no suite {s}"
    refs = [r for b in item.blocks() for row in b.get("rows") or [] for r in [row.get("run"), *(row.get("runs") or [])] if r]
    refs += [c["run"] for b in item.blocks() for c in b.get("columns") or [] if c.get("run")]
    refs += [p["run"] for s in (item.layout or {}).get("series") or [] for p in [s, *(s.get("points") or [])] if p.get("run")]
    for r in refs:
        suite, _, run = r.rpartition("/")
        find_run(PARAMS, suite or item.suites[0], run)  # raises ConfigError for a run params.yaml lacks
    files = input_files(item, PARAMS)
    assert files or item.renderer == "grid" and all("config:" in json.dumps(b) for b in item.blocks()), item.id
    for f in files:
        assert f.startswith("results/"), f
    if item.demo:
        demo_files = input_files(item, PARAMS, scale="demo")
        assert demo_files, f"{item.id}: its demo section maps no run"


def test_every_registry_suite_builds_its_items():
    default = default_suites(PARAMS)
    assert default[0] == "paper"
    assert set(REG.suites()) <= set(default)


# ---------------------------------------------------------------- renderers, synthetic results

def _params_with_suite() -> dict:
    p = copy.deepcopy(PARAMS)
    p["suites"]["t"] = {"data": "ci", "seeds": [1, 2], "runs": [
        {"name": "a", "backbone": "tiny", "method": "simcse"},
        {"name": "b", "backbone": "tiny", "method": "gs_infonce"},
        {"name": "c", "backbone": "tiny", "method": "simcse", "seeds": [1]}]}
    return p


def _write_run(results: Path, run: str, seed: int, stsb: float, avg: float, extra_curve: float = 0.0) -> None:
    d = results / "t" / "runs" / run / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "train.json").write_text(json.dumps({"stsb_dev_best": stsb, "method": "simcse"}))
    tasks = {t: avg + i - 3 for i, t in enumerate(["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"])}
    (d / "sts.json").write_text(json.dumps({"tasks": tasks, "avg": avg}))
    (d / "train_curve.csv").write_text("step,loss\n1,2.0\n2,1.5\n")
    (d / "dev_curve.csv").write_text(f"step,stsb_dev\n1,{50 + extra_curve}\n2,{60 + extra_curve}\n")


def _item(**kw) -> Item:
    base = {"id": "is-cse/table-99", "paper": "is-cse", "number": "Table 99", "kind": "table", "title": "t", "shows": "s",
            "metric": "m", "status": "rebuilt", "renderer": "grid", "suites": ["t"]}
    base.update(kw)
    return Item(**base)


@pytest.fixture()
def results(tmp_path):
    r = tmp_path / "results"
    _write_run(r, "a", 1, 80.0, 70.0)
    _write_run(r, "a", 2, 82.0, 72.0, 5)
    _write_run(r, "b", 1, 84.0, 75.0)  # seed 2 of b: not yet run
    return r


def test_grid_table_layout_published_delta(results, tmp_path):
    it = _item(layout={"corner": "Setting", "columns": [{"name": "STS-B", "metric": "stsb_dev"}, {"name": "Avg.", "metric": "sts:Avg"}],
                       "rows": [{"label": "A", "run": "a", "published": [81.5, 70.0]},
                                {"label": "B", "run": "b", "published": [83.0, None]},
                                {"label": "C", "run": "c"}]})
    ctx = context(it, _params_with_suite(), str(results), "paper", tmp_path / "out")
    written = get("grid").render(ctx)
    assert [p.suffix for p in written] == [".md", ".csv", ".tex"]
    md = (tmp_path / "out" / "table-99.md").read_text()
    assert "| Setting |  | STS-B | Avg. |" in md
    assert "| **A** | ours | 81.00 ± 1.41 | 71.00 ± 1.41 |" in md  # mean ± sample std over seeds 1, 2
    assert "|  | published | 81.50 | 70.00 |" in md
    assert "|  | Δ ours − published | -0.50 | +1.00 |" in md
    assert "| **B** | ours | 84.00 | 75.00 |" in md  # one seed present: no ±
    assert "| **C** | ours | not yet run | not yet run |" in md and "`t/c`" in md
    rows = list(csv.DictReader(open(tmp_path / "out" / "table-99.csv")))
    a = next(r for r in rows if r["row"] == "A" and r["column"] == "STS-B")
    assert float(a["ours_mean"]) == 81.0 and a["seeds"] == "1 2" and float(a["delta"]) == -0.5
    assert "\\toprule" in (tmp_path / "out" / "table-99.tex").read_text()
    files = get("grid").inputs(ctx)
    assert str(results / "t/runs/b/seed2/train.json") in files and str(results / "t/runs/c/seed1/sts.json") in files


def test_grid_columns_as_runs_and_config_cells(results, tmp_path):
    it = _item(layout={"corner": "k", "columns": [{"name": "A", "run": "a"}, {"name": "B", "run": "b"}, {"name": "AB", "missing": "not implemented"}],
                       "rows": [{"label": "STS-B", "metric": "stsb_dev", "published": [80.0, 85.0, 86.0]},
                                {"label": "batch", "metric": "config:training.batch_size", "published": [64, 32, None]}]})
    ctx = context(it, _params_with_suite(), str(results), "paper", tmp_path)
    get("grid").render(ctx)
    md = (tmp_path / "table-99.md").read_text()
    assert "| **STS-B** | ours | 81.00 ± 1.41 | 84.00 | n/a (not implemented) |" in md
    assert "|  | Δ ours − published | +1.00 | -1.00 | – |" in md
    assert "| **batch** | ours | 64 | 64 |" in md and "| = | ≠ |" in md


def test_demo_scale_maps_runs_and_drops_unmapped(results, tmp_path):
    it = _item(layout={"columns": [{"name": "Avg.", "metric": "sts:Avg"}],
                       "rows": [{"label": "A", "run": "big/a1", "published": [70.0]}, {"label": "B", "run": "big/b1", "published": [75.0]}]},
               suites=["big"], demo={"runs": {"big/a1": "t/a"}})
    ctx = context(it, _params_with_suite(), str(results), "demo", tmp_path)
    assert ctx.ref("big/a1").run == "a" and ctx.ref("big/b1") is None
    get("grid").render(ctx)
    md = (tmp_path / "table-99.md").read_text()
    assert "Demo scale" in md and "| **A** | ours | 71.00 ± 1.41 |" in md
    assert "| **B** | ours: n/a (no demo-scale run) | – |" in md  # a row without any run says why once
    assert "|  | published | 75.00 |" in md and md.count("Δ ours − published") == 1  # Δ only where ours exists
    tex = (tmp_path / "table-99.tex").read_text()
    assert tex.count(r" & $\Delta$ & ") == 1 and "ours: n/a (no demo-scale run)" in tex


def test_a_paper_item_of_capped_results_carries_the_caveat_everywhere(results, tmp_path, monkeypatch):
    """A paper item drawn from capped STS results (the demo's max_sts_pairs) carries the caveat with the number of
    pairs in its Markdown (under the scale note), its LaTeX caption, its CSV's caveat column and, for a figure, the
    PNG's caption and its companion CSV; the same item of full-protocol results carries none."""
    from csebench.results.renderers import figures

    table = _item(layout={"columns": [{"name": "Avg.", "metric": "sts:Avg"}], "rows": [{"label": "A", "run": "a", "published": [70.0]}]})
    sweep = _item(id="is-cse/figure-99", number="Figure 99", kind="figure", renderer="sweep",
                  layout={"metric": "sts:Avg", "series": [{"label": "S", "points": [{"x": 0, "run": "a"}, {"x": 1, "run": "b"}]}]})
    caveats = []
    real = figures.save_png
    monkeypatch.setattr(figures, "save_png", lambda fig, path, **kw: (caveats.append(kw.get("caveat")), real(fig, path, **kw)))

    def rendered(out):
        get("grid").render(context(table, _params_with_suite(), str(results), "paper", out))
        get("sweep").render(context(sweep, _params_with_suite(), str(results), "paper", out))
        tex = (out / "table-99.tex").read_text()
        return ((out / "table-99.md").read_text(), tex[tex.index(r"\caption{"):],
                {r["caveat"] for name in ("table-99.csv", "figure-99.csv") for r in csv.DictReader(open(out / name))},
                (out / "figure-99.md").read_text())

    md, caption, columns, figure_md = rendered(tmp_path / "full")
    assert "Capped" not in md + caption + figure_md and columns == {""} and caveats == [""]
    for f in results.glob("t/runs/*/seed*/sts.json"):
        res = json.loads(f.read_text())
        f.write_text(json.dumps({**res, "protocol": "capped", "max_sts_pairs": 200, "n_pairs": dict.fromkeys(res["tasks"], 200)}))
    caveat = ("Capped evaluation, not comparable with published numbers: STS tasks each scored on a seeded subset of about "
              "200 pairs (200 pairs a task).")
    md, caption, columns, figure_md = rendered(tmp_path / "capped")
    assert f"**{caveat}**" in md and f"**{caveat}**" in figure_md and columns == {caveat} and caveats[-1] == caveat
    assert latex_escape(caveat) in caption


def test_sweep_curves_seeds_figures(results, tmp_path):
    p = _params_with_suite()
    sweep = _item(id="is-cse/figure-99", number="Figure 99", kind="figure", renderer="sweep",
                  layout={"metric": "sts:Avg", "x_label": "M", "series": [{"label": "S", "points": [
                      {"x": 0, "run": "a", "published": 70.5}, {"x": 1, "run": "b", "published": 76.0}, {"x": 2, "run": "c"}]}]})
    get("sweep").render(context(sweep, p, str(results), "paper", tmp_path))
    assert (tmp_path / "figure-99.png").stat().st_size > 1000
    rows = list(csv.DictReader(open(tmp_path / "figure-99.csv")))
    assert [r["ours_mean"] for r in rows] == ["71.0", "75.0", ""] and rows[0]["delta"] == "0.5"
    curves = _item(id="is-cse/figure-98", number="Figure 98", kind="figure", renderer="curves",
                   layout={"series": [{"label": "A", "run": "a"}, {"label": "B", "run": "b"}], "panels": ["loss", "stsb_dev"]})
    get("curves").render(context(curves, p, str(results), "paper", tmp_path))
    best = list(csv.DictReader(open(tmp_path / "figure-98.csv")))
    assert {(r["series"], r["seed"], r["best_stsb_dev"]) for r in best} == {("A", "1", "60.0"), ("A", "2", "65.0"), ("B", "1", "60.0")}
    seeds = _item(id="is-cse/figure-97", number="Figure 97", kind="figure", renderer="seeds",
                  layout={"series": [{"label": "A", "run": "a"}, {"label": "B", "run": "b"}]})
    get("seeds").render(context(seeds, p, str(results), "paper", tmp_path))
    rows = list(csv.DictReader(open(tmp_path / "figure-97.csv")))
    avg_a = next(r for r in rows if r["method"] == "A" and r["task"] == "Avg")
    assert avg_a["seeds"] == "2" and float(avg_a["min"]) == 70.0 and float(avg_a["max"]) == 72.0


def test_model_analysis_align_uniform(results, tmp_path):
    for run, (al, un) in {"a": (0.2, -2.0), "b": (0.25, -2.5)}.items():
        d = results / "t" / "analysis" / run / "seed1"
        d.mkdir(parents=True)
        (d / "align_uniform.json").write_text(json.dumps({"alignment": al, "uniformity": un}))
    it = _item(id="is-cse/figure-96", number="Figure 96", kind="figure", renderer="model_analysis",
               layout={"analysis": "align_uniform", "series": [{"label": "A", "run": "a"}, {"label": "B", "run": "b"}]})
    ctx = context(it, _params_with_suite(), str(results), "paper", tmp_path)
    assert str(results / "t/runs/a/seed1/sts.json") in get("model_analysis").inputs(ctx)
    get("model_analysis").render(ctx)
    md = (tmp_path / "figure-96.md").read_text()
    assert "| A | t/a | 0.2000 | -2.0000 | 70.0000 |" in md


def test_not_yet_run_items_still_render(tmp_path):
    """Every rebuilt item writes its files from an empty results folder (cells say "not yet run")."""
    for it in REBUILT:
        out = tmp_path / it.paper
        written = render_item(it.id, PARAMS, str(tmp_path / "empty"), "paper", out)
        assert all(Path(w).is_file() for w in written), it.id
        assert [Path(w).name for w in written] == [Path(p).name for p in item_outputs(it, str(tmp_path))]


def test_bad_registry_entries_are_rejected():
    good = {"id": "x/table-1", "number": "Table 1", "kind": "table", "title": "t", "shows": "s", "metric": "m",
            "status": "rebuilt", "renderer": "grid", "suites": ["paper"]}
    parse_registry({"x": {"items": [good]}})
    for change, msg in [({"status": "done"}, "status"), ({"renderer": None}, "renderer"), ({"id": "y/table-1"}, "must start"),
                        ({"status": "not-rebuilt"}, "reason"), ({"colour": 1}, "unknown keys"), ({"id": "x/figure-1"}, "table-")]:
        with pytest.raises(ConfigError, match=msg):
            parse_registry({"x": {"items": [{**good, **change}]}})
    for paper, item_id in (("x", "x/table-1/../../../../y"), ("../x", "../x/table-1")):  # results/papers/<paper>/<slug>.md
        with pytest.raises(ConfigError, match="use letters, digits, . _ [+] - only, starting with a letter or digit"):
            parse_registry({paper: {"items": [{**good, "id": item_id}]}})
    with pytest.raises(ConfigError, match="unknown item 'is-cse/table-42': give a paper item"):
        REG.item("is-cse/table-42")
    with pytest.raises(ConfigError, match="unknown renderer"):
        get("nope")


# ------------------------------------------------------------------------------- pages

def test_front_page_links_built_items_and_costs_the_rest(tmp_path):
    from csebench.results.pages import front_page

    results = tmp_path / "results"
    it = REG.item("is-cse/table-4")
    for f in item_outputs(it, str(results)):
        Path(f).parent.mkdir(parents=True, exist_ok=True)
        Path(f).write_text("x")
    page = front_page(str(results), PARAMS, out_path=results / "README.md")
    line4 = next(ln for ln in page.splitlines() if ln.startswith("| Table 4 |") and "Buffer" in ln)
    assert "[md](papers/is-cse/table-4.md)" in line4
    line5 = next(ln for ln in page.splitlines() if ln.startswith("| Table 5 |") and "neighbo" in ln.lower())
    assert "not yet run: `ablation-iscse-k`" in line5 and "GPU-h" in line5
    assert "Coverage:" in page


def test_front_page_costs_a_suite_given_what_is_built(tmp_path):
    """A run already on disk (ablation-iscse-k/k-16 is paper-iscse's IS-CSE run, trained and evaluated)
    is not counted again in the suites that list it: Table 5's cost drops by that run's GPU-hours."""
    from csebench.study.jobs import Runs
    from csebench.results.plan import GPU_PEAKS, suite_plan
    from csebench.results.pages import front_page

    def table5(page: str) -> float:
        line = next(ln for ln in page.splitlines() if ln.startswith("| Table 5 |") and "neighbo" in ln.lower())
        return float(re.search(r"`ablation-iscse-k` \(([\d.]+) GPU-h\)", line)[1])

    results = tmp_path / "results"
    alone = table5(front_page(str(results), PARAMS))
    folder = results / "runs" / Runs(PARAMS).key("ablation-iscse-k", "k-16") / "seed42"
    for f in ("train.json", "eval-fp32/sts.json"):
        (folder / f).parent.mkdir(parents=True, exist_ok=True)
        (folder / f).write_text("{}")
    page = front_page(str(results), PARAMS)
    plan = suite_plan(Params.of(PARAMS).suite("ablation-iscse-k"))
    key = Runs(PARAMS).key("ablation-iscse-k", "k-16")
    shared = plan.gpu_hours(GPU_PEAKS["H100"]) - plan.gpu_hours(GPU_PEAKS["H100"], done={("train", key, 42), ("eval", key, 42, "eval-fp32")})
    assert alone == pytest.approx(plan.gpu_hours(GPU_PEAKS["H100"]), abs=0.06) and shared > 0.1
    assert table5(page) == pytest.approx(alone - shared, abs=0.06)
    assert re.search(r"Everything not yet run: \d+ suites, [\d.]+ GPU-hours", page)
















def test_a_new_study_or_renderer_is_one_file(tmp_path, monkeypatch):
    """A registry file beside the papers' is read after them; a renderer module under
    csebench.results.renderers is found by its name: the example of docs/results.md, run as it is."""
    import shutil

    import csebench.results.renderers as renderers
    from csebench.results.registry import PAPER_FILES, read_registry

    root = tmp_path / "reproduction"
    shutil.copytree(ROOT / "src/csebench/resources/reproduction", root)
    (root / "extra.yaml").write_text(
        "paper: {short: Extra, title: an extra study}\nitems:\n"
        "  - {id: extra/table-1, number: Table 1, kind: table, title: t, shows: s, metric: m, status: rebuilt,"
        " renderer: seedavg, suites: [t], layout: {run: a}}\n", encoding="utf-8")
    reg = read_registry(root)
    others = sorted(f.stem for f in (ROOT / "src/csebench/resources/reproduction").glob("*.yaml") if f.stem not in PAPER_FILES)
    assert list(reg.papers) == [*PAPER_FILES, *sorted([*others, "extra"])] and "extra/table-1" in {it.id for it in reg.items}
    example = (ROOT / "docs" / "results.md").read_text(encoding="utf-8").split("```python\n")[1].split("```")[0]
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "seedavg.py").write_text(example, encoding="utf-8")
    monkeypatch.setattr(renderers, "__path__", [*renderers.__path__, str(tmp_path / "mods")])
    results = tmp_path / "results"
    _write_run(results, "a", 1, 80.0, 70.0)
    ctx = context(reg.item("extra/table-1"), _params_with_suite(), str(results), "paper", tmp_path / "out")
    assert ctx.renderer.inputs(ctx) == [str(results / "t/runs/a/seed1/sts.json"), str(results / "t/runs/a/seed2/sts.json")]
    assert [p.name for p in ctx.renderer.render(ctx)] == ["table-1.md", "table-1.csv", "table-1.tex"]
    assert "| 1 | 70.00 |" in (tmp_path / "out" / "table-1.md").read_text()

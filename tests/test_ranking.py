"""The zoo's one fair table (zoo/table-1) and its ranking figure (zoo/figure-1, renderers/ranking.py)
rendered from result files of every method of the zoo suite, three seeds each."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scipy import stats

from csebench.study.params import load_params
from csebench.evaluation.sts import TEST_TASKS
from csebench.core.io import write_json
from csebench.results.registry import load_registry
from csebench.results.render import input_files, render_item
from runhelpers import PARAMS

SEEDS = (42, 43, 44)


def _write_zoo(results, rows, skip=()) -> dict[tuple[str, int], float]:
    """sts.json of every row's run and seed (a level per run, noise per task); returns each Avg."""
    rng = np.random.default_rng(1)
    avg = {}
    for i, row in enumerate(rows):
        if row["run"] in skip:
            continue
        for seed in SEEDS:
            scores = 70 + 0.3 * i + rng.normal(0, 0.4, len(TEST_TASKS))
            path = results / "zoo" / "runs" / row["run"] / f"seed{seed}" / "sts.json"
            write_json(path, {"tasks": dict(zip(TEST_TASKS, scores.tolist())), "avg": float(np.mean(scores))})
            avg[row["run"], seed] = float(np.mean(scores))
    return avg


def test_the_zoo_table_and_its_ranking_figure_render_with_t_intervals(tmp_path):
    reg = load_registry()
    table, figure = reg.item("zoo/table-1"), reg.item("zoo/figure-1")
    assert reg.is_study("zoo") and figure.renderer == "ranking" and figure.suites == table.suites == ["zoo"]
    rows = table.blocks()[0]["rows"]
    params, results, out = load_params(PARAMS), tmp_path / "results", tmp_path / "out"
    avg = _write_zoo(results, rows, skip={"roberta-base-sncse"})
    # the figure reads every row's sts.json of every seed (its Snakemake inputs)
    assert len(input_files(figure, params, str(results))) == len(rows) * len(SEEDS)

    render_item("zoo/table-1", params, str(results), "paper", out)
    md = (out / "table-1.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| **SimCSE-BERT base** | ours |"))
    simcse = [avg["bert-base-simcse", s] for s in SEEDS]
    assert line.rstrip(" |").endswith(f"{np.mean(simcse):.2f} ± {np.std(simcse, ddof=1):.2f}")
    # beside each row its own paper's number, the item it is copied from named on the published line
    lines = md.splitlines()
    at = lines.index(line)
    # ... with its source kind where it is not the paper's own text (SimCSE's rows: the papers' reprints)
    assert lines[at + 1].startswith("|  | published (SimCSE Table (unsup. STS); third-party reprint) | 68.40 |")
    assert lines[at + 1].rstrip(" |").endswith("76.25")
    assert lines[at + 2].startswith("|  | Δ ours − published |")
    assert any(ln.startswith("|  | published (GS-InfoNCE Table 2) | 70.12 |") for ln in lines)  # the paper's own: unmarked
    assert any(ln.startswith("|  | published (ESimCSE Table (unsup. STS); authors' README) | 73.40 |") for ln in lines)
    sncse = next(ln for ln in lines if ln.startswith("|  | published (SNCSE Table (unsup. STS); third-party reprint) |"))
    assert sncse.rstrip(" |").endswith("78.97") and "–" not in sncse  # every task: the leaderboard's row
    mix = lines.index(next(ln for ln in lines if ln.startswith("| **MixCSE-RoBERTa base** | ours (no published value: ")))
    assert lines[mix + 1].startswith("| **PromptBERT-RoBERTa base** | ours |")
    foot = md.split("Published values, by source kind", 1)[1].split("\n\n", 1)[0]
    assert "**third-party reprint**" in foot and "Doragd/Awesome-Sentence-Embedding" in foot and "**authors' README**" in foot
    cells = list(csv.DictReader(open(out / "table-1.csv")))
    dclr = [c for c in cells if c["run"] == "zoo/bert-base-dclr"]
    assert {c["published_source"] for c in dclr} == {"DCLR Table (unsup. STS)"} and dclr[-1]["published"] == "77.22"
    assert {c["published_source_kind"] for c in dclr} == {"reprint"}
    assert {c["published_source_kind"] for c in cells if c["run"] == "zoo/bert-base-gs-infonce"} == {"paper"}
    assert {(c["published_source"], c["published_source_kind"]) for c in cells if c["run"] == "zoo/roberta-base-mixcse"} == {("", "")}

    render_item("zoo/figure-1", params, str(results), "paper", out)
    assert (out / "figure-1.png").stat().st_size > 5000
    got = list(csv.DictReader(open(out / "figure-1.csv")))
    assert {r["panel"] for r in got} == {"BERT base", "RoBERTa base"}
    assert len(got) == len(rows) - 1  # the run not yet run is left out, and named
    assert "Not yet run: `zoo/roberta-base-sncse`." in (out / "figure-1.md").read_text()
    for panel in ("BERT base", "RoBERTa base"):
        ranked = [r for r in got if r["panel"] == panel]
        means = [float(r["mean"]) for r in ranked]
        assert means == sorted(means, reverse=True) and [int(r["rank"]) for r in ranked] == list(range(1, len(ranked) + 1))
        base = next(r for r in ranked if r["run"].endswith("-simcse"))
        assert base["delta_baseline"] == ""
        for r in ranked:
            vals = [avg[r["run"], s] for s in SEEDS]
            half = stats.t.ppf(0.975, 2) * np.std(vals, ddof=1) / math.sqrt(3)  # the interval, computed directly
            assert float(r["mean"]) == pytest.approx(np.mean(vals), abs=1e-4)
            assert float(r["ci_low"]) == pytest.approx(np.mean(vals) - half, abs=1e-4)
            assert float(r["ci_high"]) == pytest.approx(np.mean(vals) + half, abs=1e-4)
            if r is not base:
                assert float(r["delta_baseline"]) == pytest.approx(np.mean(vals) - float(base["mean"]), abs=1e-4)
    best = got[0]
    assert f"| BERT base | 1 | {best['label']} | 3 | {float(best['mean']):.2f} | [{float(best['ci_low']):.2f}, " \
           f"{float(best['ci_high']):.2f}] |" in (out / "figure-1.md").read_text()


def test_one_seed_draws_a_point_without_an_interval_and_a_bad_layout_is_one_message(tmp_path):
    from csebench.core.errors import ConfigError
    from csebench.results.renderers.ranking import Ranked, _layout
    from csebench.results.render import context

    assert Ranked("p", "x", "x", [77.0], [42]).interval is None
    lo, hi = Ranked("p", "x", "x", [76.0, 78.0], [42, 43]).interval
    assert (lo + hi) / 2 == pytest.approx(77.0) and hi - 77.0 == pytest.approx(stats.t.ppf(0.975, 1) * math.sqrt(2) / math.sqrt(2))
    item = load_registry().item("zoo/figure-1")
    broken = type(item)(**{**item.__dict__, "layout": {"metric": "sts:Avg"}})
    with pytest.raises(ConfigError, match="needs rows_of, baselines"):
        _layout(context(broken, load_params(PARAMS), str(tmp_path)))


def test_the_demo_scale_draws_the_demo_zoo_runs_in_the_bert_panel_with_one_seed(tmp_path):
    """`make demo` draws both items from suite demo-zoo (MiniLM, seed 42): the BERT-base rows of the six
    methods it trains, four of them the demo-combinations runs (one key: trained once)."""
    from csebench.study.resolve import resolve_run

    params, results, out = load_params(PARAMS), tmp_path / "results", tmp_path / "out"
    for run in ("simcse", "gs-infonce", "iscse", "sscl"):
        assert resolve_run(params, "demo-zoo", run, 42).fingerprint() == resolve_run(params, "demo-combinations", run, 42).fingerprint()
    demo = load_registry().item("zoo/figure-1").demo["runs"]
    assert load_registry().item("zoo/table-1").demo["runs"] == demo and len(demo) == 6
    assert all(load_registry().item(i).in_make_demo for i in ("zoo/table-1", "zoo/figure-1"))  # built by make demo
    for i, target in enumerate(demo.values()):
        suite, run = target.split("/")
        scores = [60.0 + i] * len(TEST_TASKS)
        write_json(results / suite / "runs" / run / "seed42" / "sts.json", {"tasks": dict(zip(TEST_TASKS, scores)), "avg": 60.0 + i})
    render_item("zoo/figure-1", params, str(results), "demo", out)
    got = list(csv.DictReader(open(out / "figure-1.csv")))
    assert [r["run"] for r in got] == ["mixcse", "esimcse", "sscl", "iscse", "gs-infonce", "simcse"]
    assert {r["panel"] for r in got} == {"BERT base"} and all(r["ci_low"] == "" and r["seeds"] == "42" for r in got)
    assert "Demo scale" in (out / "figure-1.md").read_text()
    render_item("zoo/table-1", params, str(results), "demo", out)
    md = (out / "table-1.md").read_text()
    assert "| **MixCSE-BERT base** | ours | 65.00 |" in md  # one seed: no ±
    assert "|  | published (MixCSE Table (unsup. STS); third-party reprint) | 71.71 |" in md

"""The suite report (the suite/<name> items): tables from fake run outputs, the published rows bound
to each run, significance on constructed data, LaTeX, README, curves, the CLI."""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from csebench.cli import main
from csebench.study.params import load_params
from csebench.core.errors import ConfigError
from csebench.evaluation import TRANSFER_TASKS
from csebench.evaluation.sts import TEST_TASKS, save_pairs
from csebench.results.registry import load_registry
from csebench.results.render import context, input_files, item_outputs, render_item
from csebench.results.renderers import suite as rp
from scipy.stats import spearmanr

from csebench.core.stats import bootstrap_counts, bootstrap_spearman, paired_bootstrap_sts, paired_ttest

ROOT = Path(__file__).resolve().parents[1]
PARAMS = load_params(ROOT / "params.yaml")
REG = load_registry()


def suite_spec(runs: dict[str, tuple[str, str]], seeds=(1,)) -> dict:
    """A suite of these runs (name: (method, backbone)) at these seeds."""
    return {"data": "ci", "seeds": list(seeds), "runs": [{"name": n, "method": m, "backbone": b} for n, (m, b) in runs.items()]}


def suite_params(suite: str, runs: dict[str, tuple[str, str]], seeds=(1,)) -> dict:
    """params.yaml with ``suite`` (re)defined by ``suite_spec``."""
    params = copy.deepcopy(PARAMS)
    params["suites"][suite] = suite_spec(runs, seeds)
    return params


def suite_config(path: Path, suite: str, runs: dict[str, tuple[str, str]], seeds=(1,)) -> Path:
    """The same as a --config file for the CLI (merged over params.yaml)."""
    path.write_text(yaml.safe_dump({"suites": {suite: suite_spec(runs, seeds)}}), encoding="utf-8")
    return path


def rows_of(results: Path, params: dict, suite: str, kind: str = "sts") -> list:
    ctx = context(REG.item(f"suite/{suite}"), params, str(results))
    return rp.group_rows(rp.records(ctx, kind), kind, suite)


def render_suite(results: Path, params: dict, suite: str, **kw) -> Path:
    """Render suite/<suite>; its folder."""
    render_item(f"suite/{suite}", params, str(results), **kw)
    return results / suite


def registry_row(item: str, label: str) -> list[float]:
    """A registry row's printed values (the one source of published numbers)."""
    return next(r["published"] for b in REG.item(item).blocks() for r in b["rows"] if r["label"] == label)


ISCSE_STS = registry_row("is-cse/table-1", "IS-CSE-BERT base")  # bound to paper-iscse/bert-base-iscse
ISCSE_TRANSFER = registry_row("is-cse/table-8", "IS-CSE-BERT base")


def write_run(root: Path, suite, name, seed, method, backbone, sts: dict | None = None, transfer: dict | None = None,
              pairs=None, curves: bool = False) -> Path:
    d = root / suite / "runs" / name / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    info = {"suite": suite, "name": name, "seed": seed, "method": method, "method_label": method.upper(),
            "backbone": backbone, "backbone_label": backbone.upper()}
    (d / "train.json").write_text(json.dumps({"method": method, "backbone": backbone, "seed": seed}))
    if sts is not None:
        (d / "sts.json").write_text(json.dumps({"tasks": sts, "avg": float(np.mean(list(sts.values()))), "run_info": info}))
    if transfer is not None:
        (d / "transfer.json").write_text(json.dumps({"tasks": transfer, "avg": float(np.mean(list(transfer.values()))),
                                                     "run_info": info}))
    if pairs is not None:
        save_pairs(d / "sts_pairs.npz", pairs)
    if curves:
        with open(d / "train_curve.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["step", "loss", "lr"])
            w.writerows([[s, 3.0 / s, 1e-4] for s in range(1, 9)])
        with open(d / "dev_curve.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["step", "stsb_dev"])
            w.writerows([[4, 50.0 + seed], [8, 55.0 + seed]])
    return d


def sts_scores(base: float) -> dict:
    return {t: base + i for i, t in enumerate(TEST_TASKS)}


TRANSFER = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]


MULTI_SEED_RUNS = {"simcse": ("simcse", "bert-base"), "bert-base-iscse": ("iscse", "bert-base")}


@pytest.fixture
def multi_seed(tmp_path):
    """bert-base: simcse at 3 seeds, iscse at 3 seeds always +1.0 +- a little on every task; the iscse
    run is the one IS-CSE Tables 1 and 8 are bound to (paper-iscse/bert-base-iscse), simcse is bound to none."""
    results = tmp_path / "results"
    for seed, jitter in zip((1, 2, 3), (0.0, 0.3, -0.2)):
        write_run(results, "paper-iscse", "simcse", seed, "simcse", "bert-base", sts_scores(70 + jitter),
                  {t: 80.0 + jitter for t in TRANSFER}, curves=True)
        write_run(results, "paper-iscse", "bert-base-iscse", seed, "iscse", "bert-base", sts_scores(71 + jitter + 0.01 * seed),
                  {t: 80.5 + jitter for t in TRANSFER}, curves=True)
    return results, suite_params("paper-iscse", MULTI_SEED_RUNS, (1, 2, 3))


def test_rows_mean_std_delta_and_published(multi_seed):
    results, params = multi_seed
    rows = rows_of(results, params, "paper-iscse")
    assert [r.run for r in rows] == ["simcse", "bert-base-iscse"]  # SimCSE first
    iscse = rows[1]
    assert iscse.seeds == [1, 2, 3]
    # STS12 per seed: 71.01, 71.32, 70.83
    vals = np.array([71.01, 71.32, 70.83])
    assert iscse.mean[0] == pytest.approx(vals.mean())
    assert iscse.std[0] == pytest.approx(vals.std(ddof=1))
    # the registry row bound to the run is attached, with its printed values
    assert [(p.values, p.sources, p.label) for p in iscse.published] == [(ISCSE_STS, ["IS-CSE Table 1"], "IS-CSE-BERT base")]
    header, lines = rp.render_csv_rows(rows, "sts", "paper-iscse")
    delta = next(dict(zip(header, ln)) for ln in lines if ln[3] == "bert-base-iscse" and ln[4] == "delta")
    assert delta["Avg."] == pytest.approx(iscse.mean[-1] - ISCSE_STS[-1], abs=1e-4)
    # a run no registry row is bound to shows none, whatever its method and backbone (the published.yaml
    # rules attached SimCSE's main-table rows to any bert-base simcse run)
    assert rows[0].published == []


def test_tables_written_in_three_formats(multi_seed):
    results, params = multi_seed
    tables = render_suite(results, params, "paper-iscse") / "tables"
    for kind in ("sts", "transfer"):
        for ext in ("md", "csv", "tex"):
            assert (tables / f"{kind}.{ext}").is_file()
    md = (tables / "sts.md").read_text()
    assert f"{ISCSE_STS[-1]:.2f}" in md and "IS-CSE Table 1" in md
    assert "±" in md and "paired t-test, 3 seeds" in md
    with open(tables / "sts.csv") as fh:
        rows = list(csv.DictReader(fh))
    ours = [r for r in rows if r["kind"] == "ours" and r["run"] == "bert-base-iscse"][0]
    assert float(ours["Avg."]) == pytest.approx(rows_of(results, params, "paper-iscse")[1].mean[-1], abs=1e-4)
    assert float(ours["p_vs_simcse"]) < 0.01
    delta = [r for r in rows if r["kind"] == "delta" and r["run"] == "bert-base-iscse"][0]
    assert float(delta["Avg."]) == pytest.approx(float(ours["Avg."]) - ISCSE_STS[-1], abs=1e-3)
    # transfer: published IS-CSE Table 8 row beside ours
    tmd = (tables / "transfer.md").read_text()
    assert "IS-CSE Table 8" in tmd and f"{ISCSE_TRANSFER[-1]:.2f}" in tmd


def test_latex_is_well_formed(multi_seed):
    results, params = multi_seed
    # a run name with characters LaTeX must escape
    params["suites"]["paper-iscse"]["runs"].append({"name": "gs_infonce_M3", "method": "gs_infonce", "backbone": "bert-base"})
    write_run(results, "paper-iscse", "gs_infonce_M3", 1, "gs_infonce", "bert-base", sts_scores(72))
    tex = (render_suite(results, params, "paper-iscse") / "tables" / "sts.tex").read_text()
    body = tex.replace(r"\{", "").replace(r"\}", "")
    depth = 0
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    assert re.search(r"(?<!\\)_(?![{])", tex.replace("$_{", "")) is None  # every underscore escaped
    assert r"gs\_infonce\_M3" in tex
    assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 1
    ncols = len(re.search(r"\\begin\{tabular\}\{([lrc]+)\}", tex).group(1))
    for line in tex.splitlines():
        if line.endswith(r"\\"):
            assert line.count("&") - line.count(r"\&") == ncols - 1, line
    head = [line for line in tex.splitlines() if line.startswith("%")]  # "Generated by ...", the provenance line
    assert head == tex.splitlines()[:2] and head[1].startswith("% Provenance")
    assert "%" not in tex.replace(r"\%", "").split("\n", 2)[2]  # no stray comment char in the table itself
    assert "$^{t}$" in tex  # the t-test rows are marked
    assert tex.isascii()  # unicode (±, Δ, ≥, en dash) mapped to LaTeX commands


def test_ttest_known_answers():
    same = {1: 76.0, 2: 77.0, 3: 75.5}
    assert paired_ttest(same, dict(same)).p_value == pytest.approx(1.0)
    better = {s: v + 1.0 + 0.01 * s for s, v in same.items()}
    r = paired_ttest(better, same)
    assert r.p_value < 0.01 and r.diff == pytest.approx(1.02)
    noisy = {1: 76.5, 2: 76.5, 3: 76.0}  # +0.5, -0.5, +0.5: no consistent difference
    assert paired_ttest(noisy, same).p_value > 0.3
    assert paired_ttest({1: 1.0}, {1: 0.0}).p_value is None  # one seed: no t-test


def _pairs(rng, noise):
    out = {}
    for t in TEST_TASKS:
        gold = rng.integers(0, 6, size=300).astype(float)
        out[t] = (gold + rng.normal(0, noise, size=300), gold)
    return out


def test_bootstrap_spearman_equals_spearman_of_the_resample():
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 6, size=80).astype(float)  # many ties, as STS gold scores
    sim = gold + rng.normal(0, 1.0, size=80)
    counts = bootstrap_counts(rng, 80, 6)
    assert (counts.sum(1) == 80).all()
    direct = [spearmanr(np.repeat(sim, c), np.repeat(gold, c))[0] for c in counts]
    assert bootstrap_spearman(sim, gold, counts) == pytest.approx(direct, abs=1e-12)


def test_bootstrap_known_answers():
    rng = np.random.default_rng(0)
    good = _pairs(rng, 0.8)
    same = paired_bootstrap_sts(good, good, TEST_TASKS, n_boot=200)
    assert same.p_value == pytest.approx(1.0) and same.diff == pytest.approx(0.0)
    # a much noisier system on the same pairs: consistently worse
    bad = {t: (g + np.random.default_rng(1).normal(0, 3.0, size=len(g)), g) for t, (_, g) in good.items()}
    r = paired_bootstrap_sts(good, bad, TEST_TASKS, n_boot=200)
    assert r.diff > 5 and r.p_value < 0.01
    assert paired_bootstrap_sts(bad, good, TEST_TASKS, n_boot=200).p_value < 0.01
    with pytest.raises(ValueError):
        other = {t: (s, g[::-1]) for t, (s, g) in good.items()}
        paired_bootstrap_sts(good, other, TEST_TASKS, n_boot=10)


def test_single_seed_uses_bootstrap_from_saved_pairs(tmp_path):
    rng = np.random.default_rng(0)
    good = _pairs(rng, 0.8)
    bad = {t: (g + rng.normal(0, 3.0, size=len(g)), g) for t, (_, g) in good.items()}
    results = tmp_path / "results"
    write_run(results, "t", "simcse", 1, "simcse", "tiny", sts_scores(60), pairs=bad)
    write_run(results, "t", "better", 1, "gs_infonce", "tiny", sts_scores(65), pairs=good)
    write_run(results, "t", "nopairs", 1, "sscl", "tiny", sts_scores(61))
    params = suite_params("t", {"simcse": ("simcse", "tiny"), "better": ("gs_infonce", "tiny"), "nopairs": ("sscl", "tiny")})
    rows = rows_of(results, params, "t")
    rp.add_significance(rows, "sts", n_boot=200)
    by = {r.run: r for r in rows}
    assert by["simcse"].is_baseline
    assert by["better"].test.test.startswith("paired bootstrap") and by["better"].test.p_value < 0.01
    assert by["nopairs"].test.p_value is None
    md = (render_suite(results, params, "t", n_boot=200) / "tables" / "sts.md").read_text()
    assert "paired bootstrap, 200 resamples" in md and "none: fewer than 2 common seeds" in md


def test_cli_renders_a_suite_and_links_every_file(tmp_path, monkeypatch):
    """`csebench results render --item suite/<suite>` reads the suite's runs from params.yaml (here a
    --config file adds it): one run evaluated, one not yet (left out of the tables)."""
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "results", "ci2", "simcse", 1, "simcse", "tiny", sts_scores(50))
    cfg = suite_config(tmp_path / "s.yaml", "ci2", {"simcse": ("simcse", "tiny"), "later": ("iscse", "tiny")})
    assert main(["results", "render", "--params", str(ROOT / "params.yaml"), "--config", str(cfg), "--item", "suite/ci2"]) == 0
    readme = tmp_path / "results" / "ci2" / "README.md"
    text = readme.read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert {"tables/sts.md", "tables/sts.csv", "tables/sts.tex", "tables/transfer.md", "figures/sts_avg.png"} <= set(links)
    for link in links:
        assert (readme.parent / link).is_file(), link
    assert "Generated by `csebench results render --item suite/ci2`" in text
    assert "| later |" not in (readme.parent / "tables" / "sts.md").read_text()
    # every declared output exists, a figure with nothing to draw as a "not yet run" placeholder
    item = REG.item("suite/ci2")
    assert all(Path(f).is_file() for f in item_outputs(item, "results"))


def test_suite_item_reads_every_run_of_the_suite():
    """The report's inputs come from params.yaml, as a paper item's: the evaluated runs' sts.json,
    sts_pairs.npz and transfer.json, every run's curves (a training-only run has no evaluation)."""
    item = REG.item("suite/demo")
    files = input_files(item, PARAMS)
    from csebench.study.jobs import evaluated_jobs, suite_jobs
    from csebench.study.params import run_dir

    evaluated, every = evaluated_jobs(PARAMS, "demo"), suite_jobs(PARAMS, "demo")
    for name, jobs in (("sts.json", evaluated), ("sts_pairs.npz", evaluated), ("transfer.json", evaluated),
                       ("train_curve.csv", every), ("dev_curve.csv", every)):
        assert {f for f in files if f.endswith("/" + name)} == {f"{run_dir(PARAMS, 'demo', r, s)}/{name}" for r, s in jobs}
    assert item_outputs(item)[0] == "results/demo/tables/sts.md" and item_outputs(item)[-1] == "results/demo/README.md"
    with pytest.raises(ConfigError, match="unknown suite 'nope'"):
        render_item("suite/nope", PARAMS, "results")


def test_readme_links_curves_and_figures(multi_seed):
    results, params = multi_seed
    suite = results / "paper-iscse"
    fig = suite / "figures" / "alignment_uniformity.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"\x89PNG\r\n\x1a\n")
    extra = suite / "tables" / "embed_dim.md"
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_text("| dim | avg |\n")
    render_suite(results, params, "paper-iscse", n_boot=10, links=[str(fig), str(suite / "figures" / "absent.png"), str(extra)])
    png = suite / "figures" / "training_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    readme = suite / "README.md"
    text = readme.read_text()
    links = set(re.findall(r"\]\(([^)]+)\)", text))
    assert {"tables/transfer.md", "figures/training_curves.png", "figures/sts_avg.png",
            "figures/alignment_uniformity.png", "tables/embed_dim.md"} <= links
    assert "absent.png" not in text
    for link in links:
        assert (readme.parent / link).is_file(), link


def test_tables_say_when_scores_come_from_capped_evaluation_sets(tmp_path, monkeypatch):
    """A demo-scale result (STS pair cap, transfer caps, STS-B dev cap in training) carries its caveat, with the numbers
    of pairs and items, into every rendering: sts.md above the table, sts.tex's caption, a column of sts.csv (on the
    ours and Δ lines, not the published line), transfer's three, the README's glance and both figures' captions; a
    result of the full protocol carries none. A capped result that records no numbers gives its own warning."""
    results = tmp_path / "results"
    d = write_run(results, "s", "simcse", 1, "simcse", "minilm", sts=sts_scores(70.0), transfer=dict.fromkeys(TRANSFER, 80.0),
                  curves=True)
    params = suite_params("s", {"simcse": ("simcse", "minilm")})
    captions = {}
    real_save_png = rp.save_png
    monkeypatch.setattr(rp, "save_png", lambda fig, path, **kw: (captions.__setitem__(Path(path).name, kw.get("caveat", "")),
                                                                  real_save_png(fig, path, **kw)))
    tables = render_suite(results, params, "s") / "tables"
    assert "Capped evaluation" not in "".join((tables / f"sts.{e}").read_text() for e in ("md", "csv", "tex"))
    assert captions == {"sts_avg.png": "", "training_curves.png": ""}
    sts, transfer, train = (json.loads((d / f).read_text()) for f in ("sts.json", "transfer.json", "train.json"))
    (d / "sts.json").write_text(json.dumps({**sts, "protocol": "capped", "max_sts_pairs": 200,
                                            "n_pairs": dict.fromkeys(TEST_TASKS, 200) | {"STS12": 199}}))
    (d / "transfer.json").write_text(json.dumps({**transfer, "protocol": "capped", "max_train_sentences": 120,
                                                 "max_test_sentences": 100}))
    (d / "train.json").write_text(json.dumps({**train, "stsb_dev_protocol": "capped", "stsb_dev_pairs": 125, "sickr_dev_pairs": 125}))
    render_suite(results, params, "s")
    sts_caveat = ("Capped evaluation, not comparable with published numbers: STS tasks each scored on a seeded subset of "
                  "about 200 pairs (199-200 pairs a task).")
    transfer_caveat = ("Capped evaluation, not comparable with published numbers: SentEval transfer classifiers trained on "
                       "at most 120 sentences a task and scored on at most 100 held-out items a split.")
    for kind, caveat in (("sts", sts_caveat), ("transfer", transfer_caveat)):
        assert f"**Demo scale:** {caveat}" in (tables / f"{kind}.md").read_text()
        tex = (tables / f"{kind}.tex").read_text()
        assert caveat in tex[tex.index(r"\caption{"):]
        rows = list(csv.DictReader((tables / f"{kind}.csv").open()))
        assert rows and all(r["caveat"] == ("" if r["kind"] == "published" else caveat) for r in rows)
    assert f"**{sts_caveat}**" in (results / "s" / "README.md").read_text()
    assert captions == {"sts_avg.png": sts_caveat, "training_curves.png": "Capped evaluation, not comparable with published "
                        "numbers: STS-B dev during training on 125 pairs (SICK-R dev 125)."}
    warning = "each STS task was scored on a seeded subset of about 500 pairs (demo)"
    (d / "sts.json").write_text(json.dumps({**sts, "protocol": "capped", "warning": warning}))
    assert f"**Demo scale:** Capped evaluation, not comparable with published numbers: {warning}." in \
        (render_suite(results, params, "s") / "tables" / "sts.md").read_text()


@pytest.mark.parametrize("item,line", [
    ("table-4", "csebench results: error: unknown item 'table-4': give a paper item (`csebench results list` lists them), suite/<suite> or mteb/<suite>"),
    ("is-cse/table-42", "csebench results: error: unknown item 'is-cse/table-42': give a paper item (of that paper: is-cse/table-1, "),
    ("suite/paper-iscs", "csebench results: error: unknown suite 'paper-iscs' (did you mean 'paper-iscse'?)"),
])
def test_an_unknown_item_is_one_line_and_exit_2(tmp_path, capsys, item, line):
    rc = main(["results", "render", "--params", str(ROOT / "params.yaml"), "--item", item, "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_a_row_whose_run_is_another_suites_says_so(tmp_path):
    """A run shared by suites: paper-sscl-depth/simcse-12 is paper/bert-base-simcse's run (its view's sts.json says
    same_run_as): the suite table's row and the paper item's cells say so in md, csv and tex; simcse-10 does not."""
    results = tmp_path / "results"
    for name, base, same in (("simcse-10", 70.0, None), ("simcse-12", 72.0, "paper/bert-base-simcse")):
        d = write_run(results, "paper-sscl-depth", name, 42, "simcse", "bert-base", sts_scores(base))
        sts = json.loads((d / "sts.json").read_text())
        (d / "sts.json").write_text(json.dumps({**sts, "same_run_as": same}))
    note = "same run as paper/bert-base-simcse"
    tables = render_suite(results, PARAMS, "paper-sscl-depth", n_boot=10) / "tables"
    assert f"| simcse-12 ({note}) |" in (tables / "sts.md").read_text() and "| simcse-10 |" in (tables / "sts.md").read_text()
    rows = {r["run"]: r["same_run_as"] for r in csv.DictReader(open(tables / "sts.csv")) if r["kind"] == "ours"}
    assert rows == {"simcse-10": "", "simcse-12": note}
    assert f"(ours, n=1; {note})" in (tables / "sts.tex").read_text()
    assert "same run" not in (tables / "transfer.md").read_text()  # no transfer results: no row to mark
    render_item("sscl/table-1", PARAMS, str(results), out=tmp_path / "paper")
    md = (tmp_path / "paper" / "table-1.md").read_text()
    assert f"`paper-sscl-depth/simcse-12`: {note} (trained once, docs/runs.md)." in md and "simcse-10`:" not in md
    cells = {r["column"]: r["same_run_as"] for r in csv.DictReader(open(tmp_path / "paper" / "table-1.csv"))}
    assert cells == {"SimCSE (10)": "", "SimCSE (12)": note, "Ours": ""}
    assert f"paper-sscl-depth/simcse-12: {note}." in (tmp_path / "paper" / "table-1.tex").read_text()


@pytest.mark.parametrize("item,first", [
    ("is-cse/table-1", "IS-CSE Table 1 (paper scale): Main STS results"),
    ("combinations/table-1", "Combinations (a study beyond the papers) Table 1"),
    ("suite/ci", "suite \\`ci\\`"),
])
def test_report_captions_come_from_the_registry_and_are_valid_rst(item, first):
    """The Snakemake report's caption of an item: title, what it shows, the metric, ours
    beside the published values (none for a study), the notes; plain text in RST (docutils warns of nothing)."""
    from docutils.core import publish_parts

    it = REG.item(item)
    text = REG.caption(it)
    assert text.startswith(f"**{first}") and "Metric: " in text
    assert ("no published values" in text) == (item.startswith("combinations/"))
    html = publish_parts(text, writer="html", settings_overrides={"report_level": 1, "halt_level": 5})["body"]
    assert "system-message" not in html and "<strong>" in html
    assert REG.category(it) == {"is-cse": "IS-CSE", "combinations": "Combinations (a study beyond the papers)", "suite": "Suites"}[it.paper]


# ---------------------------------------------------------------------------- the transfer average of a subset of tasks


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
def test_report_never_shows_a_subset_average_as_the_average(tmp_path):
    from csebench.results.registry import load_registry
    from csebench.results.render import context

    full = {t: 80.0 for t in TRANSFER_TASKS}
    write_run(tmp_path, "s", "simcse", 1, "simcse", "bert-base", transfer=full)
    # an avg written over 4 tasks (as write_run, or an older csebench, does), and the new avg_subset form
    write_run(tmp_path, "s", "iscse", 1, "iscse", "bert-base", transfer={"TREC": 90.0, "MRPC": 70.0, "CR": 75.0, "SST2": 85.0})
    c = write_run(tmp_path, "s", "sscl", 1, "sscl", "bert-base", transfer={"TREC": 90.0}) / "transfer.json"
    res = json.loads(c.read_text())
    del res["avg"]
    c.write_text(json.dumps({**res, "avg_subset": 90.0, "avg_tasks": ["TREC"]}))
    params = suite_params("s", {n: (n, "bert-base") for n in ("simcse", "iscse", "sscl")})
    ctx = context(load_registry().item("suite/s"), params, str(tmp_path))
    records = {r.info["name"]: r for r in rp.records(ctx, "transfer")}
    assert records["simcse"].avg == pytest.approx(80.0)
    assert records["iscse"].avg is None and records["sscl"].avg is None
    rows = {r.run: r for r in rp.group_rows(list(records.values()), "transfer", "s")}
    assert np.isnan(rows["iscse"].mean[-1]) and np.isnan(rows["sscl"].mean[-1])
    md = rp.render_markdown(list(rows.values()), "transfer", "s")
    iscse_line = next(l for l in md.splitlines() if "| iscse |" in l)
    assert iscse_line.split("|")[-4].strip() == "–"  # the Avg. cell


def test_a_curve_of_one_point_is_drawn(tmp_path):
    """A run that logged its loss once (one step, or fewer steps than log_steps) has a one-row train_curve.csv: the
    loss panel shows it as a marker (a line through one point draws nothing); a longer curve stays a plain line."""
    from csebench.results.plotting import plot_curve, pyplot

    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    one.write_text("step,loss\n1,0.0002\n")
    two.write_text("step,loss\n1,2.0\n2,1.5\n")
    fig, ax = pyplot().subplots()
    plot_curve(ax, one, "loss")
    plot_curve(ax, two, "loss")
    assert [line.get_marker() for line in ax.lines] == ["o", "None"]
    assert list(ax.lines[0].get_xydata()[0]) == [1.0, 0.0002]
    pyplot().close(fig)

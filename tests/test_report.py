"""Report: tables from fake run outputs, significance on constructed data, LaTeX, README, curves."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from csebench.results.renderers import suite as rp
from csebench.cli import main
from csebench.evaluation.sts import TEST_TASKS, save_pairs
from scipy.stats import spearmanr

from csebench.stats import bootstrap_counts, bootstrap_spearman, paired_bootstrap_sts, paired_ttest

def report(suite, sts, out_dir, transfer=None, **kw):
    records = {"sts": rp.collect(sts, "sts"), **({"transfer": rp.collect(transfer, "transfer")} if transfer else {})}
    return rp.write_report(suite, out_dir, records, **kw)


def registry_row(item: str, label: str) -> list[float]:
    """A registry row's printed values (the one source of published numbers)."""
    from csebench.results.registry import load_registry

    return next(r["published"] for b in load_registry().item(item).blocks() for r in b["rows"] if r["label"] == label)


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


@pytest.fixture
def multi_seed(tmp_path):
    """bert-base: simcse at 3 seeds, iscse at 3 seeds always +1.0 +- a little on every task; the iscse
    run is the one IS-CSE Tables 1 and 8 are bound to (paper-iscse/bert-base-iscse), simcse is bound to none."""
    files, tfiles = [], []
    for seed, jitter in zip((1, 2, 3), (0.0, 0.3, -0.2)):
        d = write_run(tmp_path, "paper-iscse", "simcse", seed, "simcse", "bert-base", sts_scores(70 + jitter),
                      {t: 80.0 + jitter for t in TRANSFER}, curves=True)
        files.append(d / "sts.json")
        tfiles.append(d / "transfer.json")
        d = write_run(tmp_path, "paper-iscse", "bert-base-iscse", seed, "iscse", "bert-base", sts_scores(71 + jitter + 0.01 * seed),
                      {t: 80.5 + jitter for t in TRANSFER}, curves=True)
        files.append(d / "sts.json")
        tfiles.append(d / "transfer.json")
    return tmp_path, files, tfiles


def test_rows_mean_std_delta_and_published(multi_seed):
    root, files, _ = multi_seed
    rows = rp.group_rows(rp.collect(files, "sts"), "sts")
    assert [r.run for r in rows] == ["simcse", "bert-base-iscse"]  # SimCSE first
    iscse = rows[1]
    assert iscse.seeds == [1, 2, 3]
    # STS12 per seed: 71.01, 71.32, 70.83
    vals = np.array([71.01, 71.32, 70.83])
    assert iscse.mean[0] == pytest.approx(vals.mean())
    assert iscse.std[0] == pytest.approx(vals.std(ddof=1))
    # the registry row bound to the run is attached, with its printed values
    assert [(p.values, p.sources, p.label) for p in iscse.published] == [(ISCSE_STS, ["IS-CSE Table 1"], "IS-CSE-BERT base")]
    header, lines = rp.render_csv_rows(rows, "sts", "s")
    delta = next(dict(zip(header, ln)) for ln in lines if ln[3] == "bert-base-iscse" and ln[4] == "delta")
    assert delta["Avg."] == pytest.approx(iscse.mean[-1] - ISCSE_STS[-1], abs=1e-4)
    # a run no registry row is bound to shows none, whatever its method and backbone (the published.yaml
    # rules attached SimCSE's main-table rows to any bert-base simcse run)
    assert rows[0].published == []


def test_tables_written_in_three_formats(multi_seed):
    root, files, tfiles = multi_seed
    out = report("s", [str(f) for f in files], root / "s" / "tables", transfer=[str(f) for f in tfiles])
    tables = root / "s" / "tables"
    for kind in ("sts", "transfer"):
        for ext in ("md", "csv", "tex"):
            assert (tables / f"{kind}.{ext}").is_file()
    md = (tables / "sts.md").read_text()
    assert f"{ISCSE_STS[-1]:.2f}" in md and "IS-CSE Table 1" in md
    assert "±" in md and "paired t-test, 3 seeds" in md
    with open(tables / "sts.csv") as fh:
        rows = list(csv.DictReader(fh))
    ours = [r for r in rows if r["kind"] == "ours" and r["run"] == "bert-base-iscse"][0]
    assert float(ours["Avg."]) == pytest.approx(out["rows"]["sts"][1].mean[-1], abs=1e-4)
    assert float(ours["p_vs_simcse"]) < 0.01
    delta = [r for r in rows if r["kind"] == "delta" and r["run"] == "bert-base-iscse"][0]
    assert float(delta["Avg."]) == pytest.approx(float(ours["Avg."]) - ISCSE_STS[-1], abs=1e-3)
    # transfer: published IS-CSE Table 8 row beside ours
    tmd = (tables / "transfer.md").read_text()
    assert "IS-CSE Table 8" in tmd and f"{ISCSE_TRANSFER[-1]:.2f}" in tmd


def test_latex_is_well_formed(multi_seed):
    root, files, _ = multi_seed
    # a run name with characters LaTeX must escape
    d = write_run(root, "s", "gs_infonce_M3", 1, "gs_infonce", "bert-base", sts_scores(72))
    report("s", [str(f) for f in files] + [str(d / "sts.json")], root / "s" / "tables")
    tex = (root / "s" / "tables" / "sts.tex").read_text()
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
    a = write_run(tmp_path, "ci", "simcse", 1, "simcse", "tiny", sts_scores(60), pairs=bad)
    b = write_run(tmp_path, "ci", "better", 1, "gs_infonce", "tiny", sts_scores(65), pairs=good)
    c = write_run(tmp_path, "ci", "nopairs", 1, "sscl", "tiny", sts_scores(61))
    rows = rp.write_tables(rp.collect([a / "sts.json", b / "sts.json", c / "sts.json"], "sts"), tmp_path / "t", "sts", "ci", n_boot=200)
    by = {r.run: r for r in rows}
    assert by["simcse"].is_baseline
    assert by["better"].test.test.startswith("paired bootstrap") and by["better"].test.p_value < 0.01
    assert by["nopairs"].test.p_value is None
    md = (tmp_path / "t" / "sts.md").read_text()
    assert "paired bootstrap, 200 resamples" in md and "none: fewer than 2 common seeds" in md


def test_cli_sts_only_and_readme_links(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = write_run(tmp_path / "results", "ci", "simcse", 1, "simcse", "tiny", sts_scores(50))
    rc = main(["report", "--params", "missing.yaml", "--suite", "ci", "--sts", str(d / "sts.json"),
               "--out-dir", "results/ci/tables"])
    assert rc == 0
    readme = tmp_path / "results" / "ci" / "README.md"
    text = readme.read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert {"tables/sts.md", "tables/sts.csv", "tables/sts.tex"} <= set(links)
    assert "transfer" not in " ".join(links)
    for link in links:
        assert (readme.parent / link).is_file(), link


def test_readme_links_curves_and_figures(multi_seed):
    root, files, tfiles = multi_seed
    curves = sorted(str(p) for p in (root / "paper-iscse" / "runs").glob("*/seed*/*_curve.csv"))
    fig = root / "s" / "figures" / "alignment_uniformity.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"\x89PNG\r\n\x1a\n")
    extra = root / "s" / "tables" / "embed_dim.md"
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_text("| dim | avg |\n")
    out = report("s", [str(f) for f in files], root / "s" / "tables", transfer=[str(f) for f in tfiles],
                    curves=curves, figures=[str(fig), str(root / "s" / "figures" / "absent.png")], n_boot=10,
                    extra_tables=[str(extra)])
    png = root / "s" / "figures" / "training_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    text = out["readme"].read_text()
    links = set(re.findall(r"\]\(([^)]+)\)", text))
    assert {"tables/transfer.md", "figures/training_curves.png", "figures/sts_avg.png",
            "figures/alignment_uniformity.png", "tables/embed_dim.md"} <= links
    assert "absent.png" not in text
    for link in links:
        assert (out["readme"].parent / link).is_file(), link


def test_dvc_plots_spec():
    spec = rp.dvc_plots_spec(["results/d/runs/a/seed1", "results/d/runs/b/seed1"], "d", ["results/d/figures/training_curves.png"])
    loss = spec[0]["d-train-loss"]
    assert loss["x"] == "step" and loss["y"] == {"results/d/runs/a/seed1/train_curve.csv": "loss",
                                                  "results/d/runs/b/seed1/train_curve.csv": "loss"}
    assert set(spec[1]["d-stsb-dev"]["y"].values()) == {"stsb_dev"}
    assert all(p.get("x_label") and p.get("y_label") for e in spec[:2] for p in e.values())
    assert {"results/d/figures/training_curves.png": {}} in spec
    # an evaluation-only run (train: false) has no loss curve: only its dev point is plotted
    from csebench.config import load_params

    demo = rp.dvc_plots_spec_for_suite(load_params(Path(__file__).resolve().parents[1] / "params.yaml"), "demo")
    assert not any("/minilm/" in f for f in demo[0]["demo-train-loss"]["y"])
    assert any("/minilm/" in f for f in demo[1]["demo-stsb-dev"]["y"])


def test_tables_say_when_scores_come_from_capped_evaluation_sets(tmp_path):
    """A demo-scale result (STS pair cap, transfer training cap) puts its warning above the table."""
    warning = "each STS task was scored on a seeded subset of about 500 pairs (demo)"
    d = write_run(tmp_path, "s", "simcse", 1, "simcse", "minilm", sts=sts_scores(70.0))
    full = rp.write_tables(rp.collect([d / "sts.json"], "sts"), tmp_path / "full", suite="s")
    assert full and "Demo scale" not in (tmp_path / "full" / "sts.md").read_text()
    res = json.loads((d / "sts.json").read_text())
    (d / "sts.json").write_text(json.dumps({**res, "protocol": "capped", "warning": warning}))
    rp.write_tables(rp.collect([d / "sts.json"], "sts"), tmp_path / "capped", suite="s")
    assert f"**Demo scale:** {warning}." in (tmp_path / "capped" / "sts.md").read_text()

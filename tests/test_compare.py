"""`csebench compare RUN_DIR RUN_DIR [...]`: runs side by side from their folders alone, with the paired test of the
suite tables against the first (a paired bootstrap over STS pairs for one seed each, a paired t-test over common
seeds), in the terminal and as Markdown, LaTeX and CSV, each with the capped-evaluation caveat where it applies."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from csebench.cli import main
from csebench.core.stats import paired_bootstrap_sts
from csebench.evaluation import TRANSFER_TASKS
from csebench.evaluation.sts import TEST_TASKS, load_pairs, save_pairs

RNG = np.random.default_rng(0)
GOLD = {t: RNG.uniform(0, 5, 40) for t in TEST_TASKS}


def pairs(noise: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {t: (g + rng.normal(0, noise, len(g)), g) for t, g in GOLD.items()}


def spearman100(p: dict) -> dict:
    return {t: 100 * float(stats.spearmanr(*p[t]).statistic) for t in TEST_TASKS}


def one_line_run(folder: Path, noise: float, capped: bool = True) -> Path:
    """A folder as `csebench train --backbone ... --method ... --corpus ...` leaves it: train.json, the closing
    comparison (sts_vs_untrained.json) and the trained model's per-pair cosines."""
    folder.mkdir(parents=True)
    p = pairs(noise, 1)
    tasks = spearman100(p)
    (folder / "train.json").write_text(json.dumps({"run": "minilm-simcse/seed42", "suite": "cli", "seed": 42}))
    (folder / "sts_vs_untrained.json").write_text(json.dumps({
        "run": "minilm-simcse/seed42", "protocol": "capped" if capped else "full", "max_sts_pairs": 40 if capped else None,
        "n_pairs": dict.fromkeys(TEST_TASKS, 40), "trained": {"tasks": tasks, "avg": float(np.mean(list(tasks.values())))},
        "untrained": {"tasks": tasks, "avg": 0.0}}))
    save_pairs(folder / "sts_vs_untrained_pairs.npz", p)
    return folder


def view(folder: Path, noise: float, seed: int = 42, name: str = "iscse", transfer: float | None = None) -> Path:
    """A suite's view of one seed of a run: sts.json and sts_pairs.npz (eval-sts --pairs-out), transfer.json."""
    folder.mkdir(parents=True)
    p = pairs(noise, seed)
    tasks = spearman100(p)
    (folder / "train.json").write_text(json.dumps({"run": f"{name}/seed{seed}", "suite": "mine", "seed": seed}))
    (folder / "sts.json").write_text(json.dumps({"tasks": tasks, "avg": float(np.mean(list(tasks.values()))),
                                                 "protocol": "capped", "max_sts_pairs": 40,
                                                 "n_pairs": dict.fromkeys(TEST_TASKS, 40)}))
    save_pairs(folder / "sts_pairs.npz", p)
    if transfer is not None:
        (folder / "transfer.json").write_text(json.dumps({"tasks": {t: transfer + i for i, t in enumerate(TRANSFER_TASKS)},
                                                          "protocol": "senteval"}))
    return folder


def test_two_run_folders_side_by_side_with_the_paired_bootstrap(tmp_path, capsys):
    """A run of your own and a suite's view of another run: both rows, their scores as the folders hold them, and the
    paired bootstrap of the second against the first, as csebench.core.stats computes it from their per-pair
    cosines; the same numbers in the Markdown, LaTeX and CSV files, each with the caveat of the 40-pair cap."""
    a = one_line_run(tmp_path / "a", noise=2.0)
    b = view(tmp_path / "results" / "mine" / "runs" / "iscse" / "seed42", noise=0.5, transfer=80.0)
    md, tex, table = tmp_path / "c.md", tmp_path / "c.tex", tmp_path / "c.csv"
    assert main(["compare", str(a), str(b), "--markdown", str(md), "--latex", str(tex), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    sts_a, sts_b = (json.loads((a / "sts_vs_untrained.json").read_text())["trained"], json.loads((b / "sts.json").read_text()))
    expect = paired_bootstrap_sts(load_pairs(b / "sts_pairs.npz"), load_pairs(a / "sts_vs_untrained_pairs.npz"), TEST_TASKS)
    sts_block, transfer_block = out.split("\n\n")
    rows = {line.split()[0]: line.split() for line in sts_block.splitlines() if line.startswith(("cli/", "mine/"))}
    assert rows["cli/minilm-simcse"][1:10] == ["1", *(f"{v:.2f}" for v in sts_a["tasks"].values()), f"{sts_a['avg']:.2f}"]
    assert rows["cli/minilm-simcse"][10] == "baseline"
    assert rows["mine/iscse"][1:10] == ["1", *(f"{v:.2f}" for v in sts_b["tasks"].values()), f"{sts_b['avg']:.2f}"]
    assert rows["mine/iscse"][10:] == [f"{expect.p_value:.3f}" if expect.p_value >= 0.001 else "<0.001", "paired",
                                       "bootstrap,", "1000", "resamples"]
    assert sts_b["avg"] > sts_a["avg"] and expect.p_value < 0.05  # less noise: better, and the test says so
    caveat = ("Capped evaluation, not comparable with published numbers: STS tasks each scored on a seeded subset of about "
              "40 pairs (40 pairs a task).")
    assert caveat in sts_block and transfer_block.startswith("SentEval transfer tasks")  # one run has transfer results
    assert "none: the first run has no transfer result" in transfer_block and caveat not in transfer_block
    text = md.read_text()
    assert f"**{caveat}**" in text and "| **mine/iscse** | 1 |" in text and "paired bootstrap, 1000 resamples" in text
    assert caveat in tex.read_text().split(r"\caption{")[1] and r"\label{tab:compare-sts}" in tex.read_text()
    got = [r for r in csv.DictReader(table.open()) if r["kind"] == "sts" and r["column"] == "Avg."]
    assert [(r["run"], float(r["mean"])) for r in got] == [("cli/minilm-simcse", round(sts_a["avg"], 4)),
                                                           ("mine/iscse", round(sts_b["avg"], 4))]
    assert float(got[1]["p_vs_first"]) == pytest.approx(expect.p_value) and {r["caveat"] for r in got} == {caveat}


def test_seeds_of_a_run_are_compared_by_the_paired_t_test(tmp_path, capsys):
    """Two run folders holding seeds 1-3 (results/runs/KEY): each row the mean ± std over its seeds, tested by the
    paired t-test over the common seeds (scipy's ttest_rel on the averages)."""
    for seed in (1, 2, 3):
        view(tmp_path / "A" / f"seed{seed}", noise=1.0 + 0.1 * seed, seed=seed, name="simcse")
        view(tmp_path / "B" / f"seed{seed}", noise=0.6, seed=seed + 10, name="gs")
    avg = {k: [json.loads((tmp_path / k / f"seed{s}" / "sts.json").read_text())["avg"] for s in (1, 2, 3)] for k in "AB"}
    for s in (1, 2, 3):  # B's seed folders hold seeds 1-3 of its run (their names), whatever drew their noise
        data = json.loads((tmp_path / "B" / f"seed{s}" / "train.json").read_text())
        (tmp_path / "B" / f"seed{s}" / "train.json").write_text(json.dumps({**data, "run": f"gs/seed{s}", "seed": s}))
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--markdown", str(tmp_path / "m.md")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("mine/gs"))
    p = stats.ttest_rel(avg["B"], avg["A"]).pvalue
    assert line.split()[1] == "3" and line.split()[9] == f"{np.mean(avg['B']):.2f}"
    assert line.split()[10] == (f"{p:.3f}" if p >= 0.001 else "<0.001") and "paired t-test, 3 seeds" in line
    assert f"{np.mean(avg['A']):.2f} ± {np.std(avg['A'], ddof=1):.2f}" in (tmp_path / "m.md").read_text()


def test_what_cannot_be_compared_is_one_line(tmp_path, capsys):
    """One folder, a folder that is not there, a folder without results: exit 2, one line, no file written; runs scored
    on other pairs (another cap) are shown side by side without a test, which says why."""
    a = one_line_run(tmp_path / "a", noise=1.0)
    (tmp_path / "empty").mkdir()
    for argv, said in ((["compare", str(a)], "give two run folders or more"),
                       (["compare", str(a), str(tmp_path / "nope")], "no such run folder"),
                       (["compare", str(a), str(tmp_path / "empty"), "--markdown", str(tmp_path / "x.md")],
                        "no STS or transfer result")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("csebench compare: error: ") and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.md").exists()
    b = view(tmp_path / "b", noise=1.0)
    save_pairs(b / "sts_pairs.npz", {t: (s[:30], g[:30]) for t, (s, g) in pairs(1.0, 42).items()})
    assert main(["compare", str(a), str(b)]) == 0
    assert "none: not the same STS pairs" in capsys.readouterr().out

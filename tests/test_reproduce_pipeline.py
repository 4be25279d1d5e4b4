"""The papers' tables through Snakemake: the default target plans every registry suite, and three
paper tables are built end to end from tiny-model runs."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from csebench.study.params import load_params
from csebench.results.registry import load_registry
from runhelpers import ROOT, copy_project, needs_pipeline, run_snakemake, tool_env


@needs_pipeline
def test_default_target_plans_every_registry_suite_and_item():
    """`snakemake -n` with no arguments: a report for every suite of the registry, every rebuilt
    item, the front page; the plan (GPU-hours) only as a build that runs jobs starts (csebench plan: alone)."""
    proc = run_snakemake(["-n", "--forceall", "--quiet", "rules"], cwd=ROOT, env=tool_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    reg = load_registry()
    suites = set(reg.suites()) | {"paper"}
    assert int(counts["report"]) == len(suites)
    rebuilt = [it for it in reg.items if it.rebuilt]
    n_tables = sum(it.kind == "table" for it in rebuilt)
    assert int(counts["reproduce_table"]) == n_tables
    assert int(counts["reproduce_figure"]) == len(rebuilt) - n_tables
    assert int(counts["front_page"]) == 1
    assert "csebench plan" not in out  # the cost is printed as a build starts, not for a dry run


TINY_TRAINING = {"max_steps": 4, "eval_steps": 2, "batch_size": 16, "learning_rate": 1.0e-4, "log_steps": 2,
                 "checkpoint_steps": 4}


def _tiny_suites(params_path: Path, suites: dict[str, list[str]]) -> None:
    """Make paper-scale ablation suites CPU-sized in a copy of the project: the runs named (the
    others stay "not yet run"), same objectives, the tiny random BERT on the ci corpus, a small
    IS-CSE buffer."""
    params = yaml.safe_load(params_path.read_text())
    for name, keep in suites.items():
        spec = params["suites"][name]
        spec.update(data="ci", seeds=[1], training=TINY_TRAINING)
        spec["runs"] = {name: run for name, run in spec["runs"].items() if name in keep}  # params.yaml keys runs by name
        for run in spec["runs"].values():
            run["backbone"] = "tiny"
            smooth = run.setdefault("objectives", {}).setdefault("instance_smoothing", {})
            smooth.update(buffer_size=48, clusters=4)
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.mark.slow(seconds=10)
@needs_pipeline
def test_three_paper_tables_end_to_end(tmp_path, shared_dir, warm_jobs):
    proj = copy_project(tmp_path / "proj")
    runs = {"ablation-iscse-retrieval": ["knn", "kmeans"], "ablation-iscse-k": ["k-8", "k-16"],
            "ablation-iscse-beta": ["beta-1.0", "beta-2.0"]}
    _tiny_suites(proj / "params.yaml", runs)
    suites = list(runs)
    targets = [f"results/papers/is-cse/table-{n}.md" for n in (3, 5, 7)]
    proc = run_snakemake(["--cores", "2", "--profile", "workflow/profiles/default", "--resources", "gpu=2", "--config",
                          "plan=false", "threads=1", "warm_start=false", "--", *targets], cwd=proj,
                         env={**tool_env(shared_dir), **warm_jobs}, timeout=900)  # as make demo (the session's warm server)
    assert proc.returncode == 0, proc.stderr[-4000:]
    params = load_params(proj / "params.yaml")
    for n, suite, first_run in ((3, suites[0], "knn"), (5, suites[1], "k-8"), (7, suites[2], "beta-1.0")):
        md = (proj / f"results/papers/is-cse/table-{n}.md").read_text()
        ours_line = next(ln for ln in md.splitlines() if ln.startswith("| **STS-B** | ours |"))
        assert "not yet run" not in ours_line, ours_line
        assert ours_line.count("not a run of params.yaml") == (0 if n == 3 else 3 if n == 5 else 2), ours_line  # left out
        assert "| **STS-B** | ours |" in md and "|  | published |" in md and "Δ ours − published" in md
        rows = list(csv.DictReader(open(proj / f"results/papers/is-cse/table-{n}.csv")))
        cell = next(r for r in rows if r["run"] == f"{suite}/{first_run}")
        ours = float(cell["ours_mean"])
        train = yaml.safe_load((proj / f"results/{suite}/runs/{first_run}/seed1/train.json").read_text())
        assert ours == pytest.approx(train["stsb_dev_best"])
        assert float(cell["delta"]) == pytest.approx(ours - float(cell["published"]))
        assert (proj / f"results/papers/is-cse/table-{n}.tex").is_file()
    assert params["suites"][suites[0]]["data"] == "ci"

"""The DAG as a whole: Snakemake and DVC agree, every suite dry-runs offline, the ci suite runs end to end."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from csebench.study.params import list_suites, load_params
from csebench.study.typed import Params
from runhelpers import BIN, ROOT, needs_pipeline, run_snakemake, tool_env


def test_committed_dvc_yaml_is_current():
    proc = subprocess.run([str(BIN / "csebench"), "dvc-yaml", "--check"], cwd=ROOT, env=tool_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@needs_pipeline
def test_every_suite_dry_runs_offline():
    suites = list_suites(load_params(ROOT / "params.yaml"))
    # the suites' own jobs (the paper items of the default target: tests/test_reproduce_pipeline.py)
    proc = run_snakemake(["-n", "--forceall", "--quiet", "rules", "--config", f"suites=[{','.join(suites)}]", "reproduce=none",
                          "plan=false"], cwd=ROOT, env=tool_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    # one train job per distinct run (teachers included), however many suites list it (docs/runs.md)
    from csebench.study.jobs import Runs, suite_jobs

    params = load_params(ROOT / "params.yaml")
    runs = Runs(params)
    assert int(counts["train"]) == len(runs.listed) < sum(len(v) for v in runs.listed.values())
    assert int(counts["model_card"]) == len(runs.listed)  # one card per run, whichever suites list it
    assert int(counts["view_trained"]) >= sum(len(suite_jobs(params, s)) for s in suites)  # every suite sees its runs
    assert int(counts["report"]) == len(suites)


@pytest.mark.slow(seconds=35)
@needs_pipeline
def test_ci_suite_end_to_end_through_snakemake(ci_build, tmp_path):
    """The ci suite's whole DAG through Snakemake (the session's build: runhelpers.CI_BUILD, two one-thread jobs at a
    time as make demo runs on 2 cores), then in a copy of it: a rerun plans nothing, and the Snakemake report."""
    assert ci_build.returncode == 0, ci_build.stderr[-4000:]
    proj = ci_build.copy(tmp_path / "proj")
    table = (proj / "results/ci/tables/sts.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("|") and "SimCSE" in line and "published" not in line]
    assert rows, table
    numbers = re.findall(r"-?\d+\.\d\d", rows[0])
    assert len(numbers) >= 8  # 7 tasks + average
    # strict JSON everywhere, provenance in every result, a provenance footer under every table
    results = proj / "results" / "ci"
    for f in results.rglob("*.json"):
        data = json.loads(f.read_text(), parse_constant=lambda c: pytest.fail(f"{f}: bare {c}"))
        if f.name in ("train.json", "sts.json", "transfer.json") or "analysis" in f.relative_to(results).parts:
            assert data["provenance"]["data_check"] == "published", f
    assert table.rstrip().splitlines()[-1].startswith("Provenance (")
    assert "Made with DIFFERENT" not in table
    # rerunning finds nothing to do
    again = run_snakemake(["-n", "--cores", "2", "--configfile", "config/ci.yaml"], cwd=proj, env=ci_build.env, timeout=300)
    assert "Nothing to be done" in again.stdout + again.stderr
    # the Snakemake report: one self-contained page of what is built, captioned from the registry
    report = run_snakemake(["--cores", "1", "--configfile", "config/ci.yaml", "--report", "results/report.html"], cwd=proj,
                           env=ci_build.env, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    html = (proj / "results/report.html").read_text()
    for name in ("sts.md", "transfer.md", "sts_avg.png", "training_curves.png", "Suites", "every run of the suite"):
        assert name in html, name


def test_dvc_lock_is_not_git_ignored():
    # DVC refuses to run (`dvc repro`, `dvc status`) when dvc.lock is git-ignored
    proc = subprocess.run(["git", "check-ignore", "-q", "dvc.lock"], cwd=ROOT)
    assert proc.returncode == 1, "dvc.lock is git-ignored: DVC would stop with \"'dvc.lock' is git-ignored\""


def test_dvc_plots_spec():
    from csebench.workflow.dvcgen import dvc_plots_spec, dvc_plots_spec_for_suite

    spec = dvc_plots_spec(["results/d/runs/a/seed1", "results/d/runs/b/seed1"], "d", ["results/d/figures/training_curves.png"])
    loss = spec[0]["d-train-loss"]
    assert loss["x"] == "step" and loss["y"] == {"results/d/runs/a/seed1/train_curve.csv": "loss",
                                                  "results/d/runs/b/seed1/train_curve.csv": "loss"}
    assert set(spec[1]["d-stsb-dev"]["y"].values()) == {"stsb_dev"}
    assert all(p.get("x_label") and p.get("y_label") for e in spec[:2] for p in e.values())
    assert {"results/d/figures/training_curves.png": {}} in spec
    # an evaluation-only run (train: false) has no loss curve: only its dev point is plotted
    demo = dvc_plots_spec_for_suite(Params.load(ROOT / "params.yaml").suite("demo"))
    assert not any("/minilm/" in f for f in demo[0]["demo-train-loss"]["y"])
    assert any("/minilm/" in f for f in demo[1]["demo-stsb-dev"]["y"])


MY_SUITE = """\
suites:
  mine:
    description: a suite defined only in an override file
    seeds: [1]
    data: ci
    training: {max_steps: 2, eval_steps: 2, batch_size: 8, log_steps: 1, checkpoint_steps: 2, dev_max_pairs: 100}
    evaluation: {max_sts_pairs: 50}
    transfer: {max_train_sentences: 64, max_test_sentences: 64}
    runs:
      simcse: {backbone: tiny, method: simcse}
"""


@pytest.mark.slow(seconds=20)
@needs_pipeline
def test_a_suite_in_an_override_file_builds_with_snakemake_typed_without_the_venv_activated(tmp_path):
    """The README's command for a suite of one's own, run for real (not a dry run), by the venv's
    snakemake with the venv not on PATH: every rule's command reads the override file (the run's key
    exists only there) and finds `csebench` beside the Python that runs Snakemake."""
    from runhelpers import readme_block, readme_checkout, user_env

    proj = readme_checkout(tmp_path)
    (proj / "my-suite.yaml").write_text(MY_SUITE)
    cmd = next(c for c in readme_block("**A suite of your own**") if c.startswith("snakemake "))
    env = user_env()
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if Path(p) != BIN)  # not activated
    env.pop("VIRTUAL_ENV")
    proc = subprocess.run(f"{BIN}/{cmd}", shell=True, cwd=proj, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    view = proj / "results/mine/runs/simcse/seed1"
    assert json.loads((view / "train.json").read_text())["steps"] == 2 and (view / "sts.json").is_file()
    assert "Nothing to be done" in subprocess.run(f"{BIN}/{cmd} -n", shell=True, cwd=proj, env=env,
                                                  capture_output=True, text=True, timeout=300).stdout


def test_csebench_not_reachable_is_one_line_before_any_job(tmp_path, monkeypatch):
    """The Snakefile's check (csebench.workflow.steps.find_cli): not on PATH and not beside the Python that
    runs Snakemake gives one line naming the fix; beside it, its folder goes on the jobs' PATH."""
    from csebench.workflow.steps import find_cli
    from csebench.core.errors import ConfigError

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(ConfigError, match=r"not on PATH nor beside this Python .*\. \.venv/bin/activate"):
        find_cli(uses_conda=False)
    find_cli(uses_conda=True)  # the rules' conda environment provides it
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "csebench").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "csebench").chmod(0o755)
    find_cli(uses_conda=False)
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")


@needs_pipeline
def test_snakemakes_lint_is_clean():
    """`snakemake --lint` (docs/cluster.md): functions apart from rules, no global in a shell command, named
    files, no '+' next to a path, a conda environment on every rule; exit 0 and no finding."""
    proc = run_snakemake(["--lint", "--configfile", "config/ci.yaml"], cwd=ROOT, env=tool_env(), timeout=300)
    findings = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("    * ")]
    assert proc.returncode == 0 and not findings, "\n".join(findings) or proc.stderr[-2000:]

"""dvc.yaml (docs/dvc.md): a stage per suite and per paper item, which cannot drift from the Snakemake DAG."""

import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from csebench.config import list_suites, load_params
from csebench.dvcgen import paper_items
from csebench.results import render

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENV = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{BIN}:{os.environ['PATH']}")


def _dvc() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())


def _outs(stage: dict) -> list[str]:
    return [o if isinstance(o, str) else next(iter(o)) for o in stage.get("outs", [])]


def test_every_suite_and_paper_item_has_one_stage():
    params = load_params(ROOT / "params.yaml")
    spec = _dvc()
    stages = spec["stages"]
    built = [o.removeprefix("results/") for n, s in stages.items() if "foreach" not in s for o in _outs(s)]
    built += list(stages["suite"]["foreach"])
    suites = list_suites(params)
    assert sorted(b for b in built if b in suites) == sorted(suites)  # each suite exactly once
    assert sorted(spec["metrics"]) == sorted(f"results/{s}/metrics.json" for s in suites)  # the only DVC metrics
    items = paper_items(params)
    assert len(items) >= 40
    for name, item, read in items:
        stage = stages[name]
        assert _outs(stage) == render.item_outputs(item, "results", "paper")
        assert stage["cmd"].endswith(f"-- {_outs(stage)[0]}")
        # what its renderer reads (Snakemake's inputs of the item) lies in the suites it depends on
        deps = [d.removeprefix("results/") for d in stage["deps"] if d.startswith("results/")]
        assert sorted(deps) == read and set(read) <= set(suites)
        for f in render.input_files(item, params, "results", "paper"):
            assert f.split("/")[1] in deps, (name, f)
    assert _outs(stages["front-page"]) == ["results/README.md"]


def _planned_outputs(args: list[str]) -> set[str]:
    proc = subprocess.run([str(BIN / "snakemake"), "-n", "--forceall", "--cores", "1", *args],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {p.strip() for m in re.finditer(r"^    output: (.*)$", proc.stdout + proc.stderr, re.M) for p in m[1].split(", ")}


def test_snakemake_writes_only_inside_the_stage_outs():
    # the demo stage's command, as Snakemake plans it: every file lies in a declared out, the run
    # store (runs.dvc) or the prepared data; and each suite it builds is one of its outs
    stage = _dvc()["stages"]["demo"]
    cmd = stage["cmd"].split()
    planned = _planned_outputs(cmd[cmd.index("--configfile"):])
    outs = _outs(stage)
    stray = {p for p in planned if not any(p.startswith(o + "/") for o in [*outs, "results/runs", "data"])}
    assert not stray, f"written outside the demo stage's outs: {sorted(stray)[:5]}"
    assert {p.split("/")[1] for p in planned if p.startswith("results/") and not p.startswith("results/runs/")} == \
        {o.removeprefix("results/") for o in outs}


def test_suite_metrics_is_tidy(tmp_path):
    """metrics.json: run -> seed -> STS-B dev, STS and transfer averages, and the mean over seeds."""
    import copy
    import json

    from csebench.evaluation import STS_TASKS, TRANSFER_TASKS
    from csebench.results.tidy import suite_metrics

    params = copy.deepcopy(load_params(ROOT / "params.yaml"))
    params["suites"]["ci"]["seeds"] = [1, 2]
    for run, base in (("simcse", 70.0), ("backbone", 50.0), ("distillcse", 60.0)):
        for seed in (1, 2):
            d = tmp_path / "ci" / "runs" / run / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "train.json").write_text(json.dumps({"stsb_dev_best": base + seed}))
            if run != "distillcse":  # not evaluated yet: its train.json alone
                (d / "sts.json").write_text(json.dumps({"tasks": {t: base + seed for t in STS_TASKS}}))
                (d / "transfer.json").write_text(json.dumps({"tasks": {t: base for t in TRANSFER_TASKS}}))
    m = suite_metrics(params, "ci", str(tmp_path))
    assert m["simcse"] == {"seed1": {"stsb_dev": 71.0, "sts_avg": 71.0, "transfer_avg": 70.0},
                           "seed2": {"stsb_dev": 72.0, "sts_avg": 72.0, "transfer_avg": 70.0},
                           "mean": {"stsb_dev": 71.5, "sts_avg": 71.5, "transfer_avg": 70.0}}
    assert m["distillcse"]["mean"] == {"stsb_dev": 61.5}


# ----------------------------------------------------------------------------- `dvc exp run -S` and params.yaml


def _set_param(tmp_path, override: str) -> tuple[list[str], list[str]]:
    """params.yaml's lines before and after DVC's own rewrite for `dvc exp run -S override`
    (dvc.utils.hydra.apply_overrides: what `exp run` calls on the params file before it runs)."""
    from dvc.utils.hydra import apply_overrides

    copy = tmp_path / "params.yaml"
    copy.write_bytes((ROOT / "params.yaml").read_bytes())
    apply_overrides(copy, [override])
    return (ROOT / "params.yaml").read_text().splitlines(keepends=True), copy.read_text().splitlines(keepends=True)


@pytest.mark.parametrize("override,old,new", [
    ("suites.demo.training.learning_rate=1e-4", "      learning_rate: 3.0e-5\n", "      learning_rate: 0.0001\n"),
    ("suites.ci.runs.simcse.method=gs_infonce", "      simcse: {backbone: tiny, method: simcse}\n",
     "      simcse: {backbone: tiny, method: gs_infonce}\n"),
    ("suites.paper-distillcse.runs.bert-base-simcse.seeds=1-4",
     "      bert-base-simcse: {backbone: bert-base, method: simcse, seeds: 1-16}\n",
     "      bert-base-simcse: {backbone: bert-base, method: simcse, seeds: 1-4}\n"),
], ids=["suite-training", "run", "seed-range"])
def test_dvc_exp_set_param_changes_one_line_of_params_yaml(tmp_path, override, old, new):
    before, after = _set_param(tmp_path, override)
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(after) == len(before) and len(changed) == 1, "".join(difflib.unified_diff(before, after, n=0))
    assert (before[changed[0]], after[changed[0]]) == (old, new)


def test_params_yaml_is_in_the_form_dvc_writes_back(tmp_path):
    """Any `-S` rewrites the whole file (every list and scalar re-emitted by ruamel at 80 columns):
    a hand edit that DVC would reformat (a long {...} line, a flow list outside {...}, a comment after
    a list) fails here, before an experiment turns it into a diff of hundreds of lines."""
    before, after = _set_param(tmp_path, "training.batch_size=64")  # the value it has: nothing may change
    assert after == before, "params.yaml is not in the form `dvc exp run -S` writes back (see its header):\n" + \
        "".join(difflib.unified_diff(before, after, "params.yaml", "as DVC writes it", n=1))
    anchors = [e for e in yaml.parse((ROOT / "params.yaml").read_text())
               if getattr(e, "anchor", None) or isinstance(e, yaml.AliasEvent)]
    assert not anchors, "an anchor in params.yaml: `-S` on one of its uses would change every use"


# ----------------------------------------------------------------------------- experiments, sweeps, remotes

# A suite of one tiny run (2 steps, STS capped, transfer capped): its stage builds in ~30 s on 2 cores.
EXP_SUITE = """\
  exp:
    description: one tiny run for the DVC tests
    seeds:
    - 1
    data: ci
    training:
      max_steps: 2
      eval_steps: 2
      batch_size: 8
      learning_rate: 1.0e-4
      log_steps: 1
      checkpoint_steps: 2
      dev_max_pairs: 100
    evaluation: {max_sts_pairs: 50}
    transfer: {max_train_sentences: 64, max_test_sentences: 64}
    runs:
      simcse: {backbone: tiny, method: simcse}
"""
EXP_CONFIG = ["--config", "suites=[exp]", "reproduce=none", "front_page=false"]  # the suite@exp stage's Snakemake call
GIT_ID = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.org", "GIT_COMMITTER_NAME": "test",
          "GIT_COMMITTER_EMAIL": "test@example.org"}


def _sh(args: list[str], cwd: Path, env: dict, timeout: int = 600) -> str:
    proc = subprocess.run(args, cwd=cwd, env={**env, **GIT_ID}, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _exp_repo(proj: Path, env: dict) -> Path:
    """The project as a git repository whose params.yaml has the suite `exp`, and dvc.yaml its stage suite@exp."""
    from test_pipeline import _copy_project

    _copy_project(proj)
    with open(proj / "params.yaml", "a", encoding="utf-8") as f:  # suites: is params.yaml's last section
        f.write(EXP_SUITE)
    _sh(["csebench", "dvc-yaml"], proj, env)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "project"]):
        _sh(cmd, proj, env)
    return proj


@pytest.mark.slow
def test_queued_sweep_gives_two_experiments_with_their_metrics(tmp_path, shared_dir):
    from test_pipeline import _env

    env = _env(shared_dir)
    proj = _exp_repo(tmp_path / "proj", env)
    _sh(["dvc", "exp", "run", "--queue", "-S", "suites.exp.training.learning_rate=1e-4,3e-4", "suite@exp"], proj, env)
    _sh(["dvc", "exp", "run", "--run-all", "-j", "2"], proj, env)
    shown = json.loads(_sh(["dvc", "exp", "show", "--json"], proj, env))
    revs = [r for row in shown for e in row.get("experiments") or [] for r in e["revs"]]
    lr = {r["rev"]: r["data"]["params"]["params.yaml"]["data"]["suites"]["exp"]["training"]["learning_rate"] for r in revs}
    metrics = {lr[r["rev"]]: r["data"]["metrics"]["results/exp/metrics.json"]["data"]["simcse"]["seed1"] for r in revs}
    assert sorted(metrics) == [1e-4, 3e-4], shown
    for m in metrics.values():
        assert sorted(m) == ["sts_avg", "stsb_dev", "transfer_avg"] and all(isinstance(v, float) for v in m.values())
    assert metrics[1e-4] != metrics[3e-4]  # two learning rates, two models
    for rev, value in lr.items():  # what each experiment committed: params.yaml with its one line changed
        diff = _sh(["git", "diff", "--unified=0", "HEAD", rev, "--", "params.yaml"], proj, env)
        assert [l for l in diff.splitlines() if l.startswith(("-  ", "+  "))] == [
            "-      learning_rate: 1.0e-4", f"+      learning_rate: {value}"], diff


@pytest.mark.slow
def test_push_and_pull_restore_a_suite_on_a_fresh_clone_without_rerunning(tmp_path, shared_dir):
    from test_pipeline import _env

    env = _env(shared_dir)
    proj = _exp_repo(tmp_path / "proj", env)
    _sh(["dvc", "repro", "suite@exp"], proj, env)
    _sh(["dvc", "commit", "-f", "runs.dvc"], proj, env)  # the run store the stage trained into (docs/dvc.md)
    _sh(["dvc", "remote", "add", "-d", "team", str(tmp_path / "remote")], proj, env)
    _sh(["dvc", "push", "suite@exp", "runs.dvc"], proj, env)
    _sh(["git", "add", "dvc.lock", "runs.dvc", ".dvc/config"], proj, env)
    _sh(["git", "commit", "-qm", "exp results"], proj, env)
    clone = tmp_path / "clone"
    _sh(["git", "clone", "-q", str(proj), str(clone)], tmp_path, env)
    _sh(["dvc", "pull", "suite@exp", "runs.dvc"], clone, env)
    assert (clone / "results/exp/metrics.json").read_text() == (proj / "results/exp/metrics.json").read_text()
    models = sorted(p.relative_to(proj) for p in (proj / "results/runs").glob("*/seed1/model/model.safetensors"))
    assert len(models) == 1 and (clone / models[0]).read_bytes() == (proj / models[0]).read_bytes()
    assert "up to date" in _sh(["dvc", "status", "suite@exp", "runs.dvc"], clone, env)  # this checkout's results
    # DVC writes what it pulls in no set order and data/ is not shared: Snakemake, which compares
    # modification times, is told once that the pulled files are current; it runs no job for that
    touched = _sh(["snakemake", "--touch", "--cores", "1", *EXP_CONFIG], clone, env)
    assert (clone / models[0]).read_bytes() == (proj / models[0]).read_bytes() and "rule train" in touched
    assert "Nothing to be done" in _sh(["snakemake", "-n", *EXP_CONFIG], clone, env)

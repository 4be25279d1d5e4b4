"""Generate dvc.yaml from the Snakemake DAG, so DVC and Snakemake describe one pipeline.

Snakemake is the engine. Each Snakemake job of a suite becomes one DVC stage whose command asks
Snakemake for exactly that job's outputs; the stage declares the job's inputs as deps, its
outputs as outs/metrics/plots, and the params.yaml keys the job reads (DVC then knows when a
hyperparameter change invalidates it, and `dvc metrics diff` / `dvc plots diff` compare runs).
The job list comes from a forced Snakemake dry run, so the two DAGs cannot drift apart
silently: tests regenerate and compare.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import yaml

from .config import find_run, load_params
from .schema import read_yaml
from .errors import CsebenchError
from .workflow import runs_of

METRIC_FILES = ("train.json", "sts.json", "transfer.json")
RUN_PATH = re.compile(r"(?P<results>[^/]+)/(?P<suite>[^/]+)/(?:runs|analysis)/(?P<run>[^/]+)/seed(?P<seed>\d+)/")
# a run's own folder (docs/runs.md): its jobs belong to every suite listing it, one stage for all
KEY_PATH = re.compile(r"(?P<results>[^/]+)/runs/(?P<key>[0-9a-f]{16})/seed(?P<seed>\d+)/(?:(?P<ev>eval-[^/]+)/)?")
SNAKEMAKE_CMD = "snakemake --cores all --resources gpu=1 --rerun-triggers mtime --quiet all {config} --"


def suite_config_args(suite: str, cwd: str | Path = ".") -> list[str]:
    """Snakemake config selecting a suite: config/<suite>.yaml when it builds just that suite (it may
    also choose analyses and demo-scale paper items), else the suite alone, without the paper items
    of the default config (config/paper.yaml builds every registry suite)."""
    path = Path(cwd) / "config" / f"{suite}.yaml"
    if path.is_file() and (read_yaml(path) or {}).get("suites") == [suite]:
        return ["--configfile", f"config/{suite}.yaml", "--config", "progress=false"]
    return ["--config", f"suites=[{suite}]", "reproduce=none", "progress=false"]


def snakemake_jobs(suite: str, snakemake: str = "snakemake", cwd: str | Path = ".") -> list[dict]:
    """Jobs of one suite's DAG, upstream first: [{rule, outputs, inputs}], read from the job list of
    a forced dry run (it names every job's inputs and outputs, with or without earlier results)."""
    cmd = [snakemake, "-n", "--forceall", "--cores", "1", *suite_config_args(suite, cwd)]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CsebenchError(f"snakemake could not build the DAG of suite '{suite}':\n{proc.stderr[-2000:]}")
    jobs: list[dict] = []
    job: dict | None = None
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            job = {"rule": m[1], "inputs": [], "outputs": []}
            if m[1] != "all":
                jobs.append(job)
            continue
        m = re.match(r"^    (input|output): (.*)$", line)
        if job is not None and m:
            job[m[1] + "s"] = sorted(p.strip() for p in m[2].split(", ") if p.strip())
    # the front page (results/README.md) indexes every suite: Snakemake rewrites it, DVC tracks none
    return [j for j in jobs if j["outputs"] and j["rule"] != "front_page"]


def _stage_name(suite: str | None, rule: str, outputs: list[str]) -> str:
    m, k = RUN_PATH.search(outputs[0]), KEY_PATH.match(outputs[0])
    if k:  # run-<key>-s<seed>-<rule>[-<ev>]
        return re.sub(r"[^A-Za-z0-9_-]", "_", "-".join(p for p in ("run", k["key"], f"s{k['seed']}", rule, k["ev"]) if p))
    if m:
        tail = f"{m['run']}-s{m['seed']}"
    elif rule.startswith("reproduce_"):  # .../papers/<paper>/<item>.<ext>
        tail = "-".join(Path(outputs[0]).with_suffix("").parts[-2:])
    elif suite is None:  # data stages are shared across suites
        tail = Path(outputs[0]).parts[1]
    else:
        tail = ""
    name = "-".join(p for p in (suite, rule, tail) if p)
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _params_for(params: dict, suite: str, rule: str, outputs: list[str]) -> list[str]:
    if rule.startswith("prepare_"):
        return [f"data.{Path(outputs[0]).parts[1]}"]
    m, k = RUN_PATH.search(outputs[0]), KEY_PATH.match(outputs[0])
    name = None
    if k:  # a run's own job: the params of the first suite and run that list it (which name it)
        suite, name = runs_of(params).first(k["key"], int(k["seed"]))
    elif m:  # a job of another suite that this one reads (e.g. the demo's demo-iscse-beta sweep)
        suite, name = m["suite"], m["run"]
    keys = [f"suites.{suite}"]
    if name:
        run = find_run(params, suite, name)
        keys += ["training", f"backbones.{run['backbone']}", f"methods.{run['method']}"]
    return keys


def build_dvc_yaml(suites: list[str], params_path: str = "params.yaml", cwd: str | Path = ".") -> dict:
    params = load_params(Path(cwd) / params_path)
    stages: "OrderedDict[str, dict]" = OrderedDict()
    seen_outputs: set[str] = set()
    for suite in suites:
        for job in snakemake_jobs(suite, cwd=cwd):
            # data stages, and a run's own jobs (every suite listing the run has them): one stage each
            data = job["rule"].startswith("prepare_")
            shared = data or KEY_PATH.match(job["outputs"][0]) is not None
            name = _stage_name(None if shared else suite, job["rule"], job["outputs"])
            if job["rule"].startswith(("analysis", "view_analysis")):  # several jobs per run: name the output
                first = Path(job["outputs"][0]).name
                name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{name}-{first if job['rule'] == 'view_analysis' else first.split('.')[0]}")
            if shared and name in stages:
                continue
            if name in stages:
                raise CsebenchError(f"two Snakemake jobs map to DVC stage name {name}")
            if any(o in seen_outputs for o in job["outputs"]):
                raise CsebenchError(f"stage {name}: output produced by two stages: {job['outputs']}")
            seen_outputs.update(job["outputs"])
            outs, metrics = [], []
            for o in job["outputs"]:
                base = Path(o).name
                if base in METRIC_FILES:
                    metrics.append(o)
                else:  # curves are outs; the top-level plots: section draws them per suite
                    outs.append(o)
            cmd = SNAKEMAKE_CMD.format(config=" ".join(suite_config_args(suite, cwd)))
            stage = {"cmd": f"{cmd} {' '.join(job['outputs'])}",
                     "deps": job["inputs"] + (["src/csebench"] if not data else []),
                     "params": _params_for(params, suite, job["rule"], job["outputs"])}
            if outs:
                stage["outs"] = outs
            if metrics:
                stage["metrics"] = metrics
            stages[name] = stage
    plots = [entry for suite in suites for entry in dvc_plots_spec_for_suite(params, suite)]
    # Snakemake lists jobs of one DAG level in no fixed order; DVC orders stages by deps/outs itself,
    # so sort by name for a reproducible file (data stages first).
    ordered = sorted(stages, key=lambda n: (not n.startswith("prepare_"), n))
    return {"stages": {n: stages[n] for n in ordered}, "plots": plots}


def dvc_plots_spec(run_dirs: list[str], suite: str, figures: list[str] | None = None,
                   trained: list[str] | None = None) -> list[dict]:
    """The ``plots:`` entries of dvc.yaml for a suite's curves (``dvc plots show`` / ``dvc plots diff``).

    ``run_dirs`` are the run/seed folders holding ``train_curve.csv`` and ``dev_curve.csv``; ``trained``
    those with a loss curve (default: all; an evaluation-only run's train_curve.csv has no loss
    column); ``figures`` are PNGs shown as image plots.
    """
    spec = [
        {f"{suite}-train-loss": {"template": "linear", "x": "step",
                                 "y": {f"{d}/train_curve.csv": "loss" for d in (run_dirs if trained is None else trained)},
                                 "title": f"{suite}: training loss", "x_label": "training step",
                                 "y_label": "training loss (cross-entropy, nats)"}},
        {f"{suite}-stsb-dev": {"template": "linear", "x": "step", "y": {f"{d}/dev_curve.csv": "stsb_dev" for d in run_dirs},
                               "title": f"{suite}: STS-B dev", "x_label": "training step",
                               "y_label": "STS-B dev Spearman x100"}},
    ]
    return spec + [{f: {}} for f in figures or []]


def dvc_plots_spec_for_suite(params: dict, suite: str) -> list[dict]:
    from . import workflow as wf
    from .paths import results_root

    jobs = wf.jobs(params, suite)
    return dvc_plots_spec([wf.run_dir(params, suite, run, seed) for run, seed in jobs], suite,
                          [f"{results_root(params)}/{suite}/figures/training_curves.png"],
                          [wf.run_dir(params, suite, run, seed) for run, seed in jobs if wf.trains(params, suite, run)])


def render(suites: list[str], cwd: str | Path = ".") -> str:
    header = ("# GENERATED by `csebench dvc-yaml` from the Snakemake DAG: do not edit by hand.\n"
              f"# Suites: {', '.join(suites)} (params.yaml dvc.suites). Every stage calls Snakemake for its\n"
              "# job's outputs; `dvc repro` runs them all, `dvc repro <stage>` one and its upstream.\n")
    return header + yaml.safe_dump(build_dvc_yaml(suites, cwd=cwd), sort_keys=False, width=200)


def main_dvc_yaml(params_path: str, out: str | None, check: bool, suites: list[str] | None) -> int:
    params = load_params(params_path)
    suites = suites or list((params.get("dvc") or {}).get("suites") or [])
    if not suites:
        raise CsebenchError("no suites for dvc.yaml: set dvc.suites in params.yaml or pass --suites")
    text = render(suites)
    if check:
        current = Path(out or "dvc.yaml").read_text(encoding="utf-8") if Path(out or "dvc.yaml").is_file() else ""
        if current != text:
            print("dvc.yaml is out of date with the Snakemake DAG / params.yaml: run `csebench dvc-yaml`", file=sys.stderr)
            return 1
        return 0
    from .io import write_text

    if out == "-":
        sys.stdout.write(text)
    else:
        write_text(out or "dvc.yaml", text)
    return 0

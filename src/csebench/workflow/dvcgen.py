"""Generate dvc.yaml: a stage per suite and per paper item over the Snakemake DAG (docs/dvc.md).

Snakemake is the engine; DVC sees the pipeline at the grain a person reads it. A suite's stage
asks Snakemake for the suite (its runs, views, tables, analyses, model cards, metrics.json):
Snakemake's own job-level incrementality decides what reruns inside it, so the suite's folder is a
`persist` output. A paper item's stage asks Snakemake for that table or figure and depends on the
folders of the suites it reads. The suites with a config of their own (config/demo.yaml,
config/ci.yaml) are stages named after it that run exactly that config, as `make demo` does.
Each distinct run is trained once in results/runs/<key>, whichever suites list it (docs/runs.md):
that shared store is one DVC-tracked folder (runs.dvc), not an output of any one suite's stage.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import yaml

from csebench.core import paths
from csebench.core.paths import times_record
from csebench.core.schema import read_yaml
from csebench.study.typed import Params, Suite

# Snakemake without its rule blocks and host header, with its progress: a stage (and a queued experiment, whose output
# is all `dvc exp run` shows) says each job as it finishes and "N of M steps (P%) done"; `--quiet` alone said nothing
SNAKEMAKE = "snakemake --cores all --resources gpu=1 --quiet rules host"
CODE = ["Snakefile", "workflow", "src/csebench"]
# what a suite's results depend on besides its own `suites.<name>`: any run may take its backbone,
# method and defaults from these sections (the run's key, docs/runs.md, tells Snakemake which changed)
SHARED_PARAMS = ["training", "backbones", "methods"]


def config_stages(params: Params, cwd: str | Path = ".") -> dict[str, dict]:
    """config/<suite>.yaml files that build just their suite: {suite: {config, suites}} where suites
    are the suite and those its demo-scale paper items read (the demo reads demo-iscse-beta)."""
    from csebench.results import render
    from csebench.results.registry import load_registry

    params, out = Params.of(params), {}
    for suite in params.suites:
        path = Path(cwd) / "config" / f"{suite}.yaml"
        cfg = read_yaml(path) if path.is_file() else None
        if not cfg or cfg.get("suites") != [suite]:
            continue
        read = [suite]
        if cfg.get("reproduce") == "demo":
            for item in load_registry().built("demo"):  # what results.smk builds for `reproduce: demo`
                read += render.suites_of(render.input_files(item, params, params.paths.results, "demo"), params)
        out[suite] = {"config": f"config/{suite}.yaml", "suites": list(dict.fromkeys(read))}
    return out


def paper_items(params: Params) -> list[tuple[str, object, list[str]]]:
    """(stage name, item, suites it reads) for every rebuilt paper item at paper scale."""
    from csebench.results import render
    from csebench.results.registry import load_registry

    params, out = Params.of(params), []
    for item in load_registry().built("paper"):
        files = render.input_files(item, params, params.paths.results, "paper")
        out.append((item.id.replace("/", "-"), item, render.suites_of(files, params)))
    return out


def group_record(path: str) -> str:
    """The record of the build's modification times of a stage's single files (csebench.workflow.stamps)."""
    p = Path(path)
    return times_record(p.parent, p.name.split(".")[0]).as_posix()




def build_dvc_yaml(params: Params, cwd: str | Path = ".") -> dict:
    from csebench.results import render

    params = Params.of(params)
    results, every = params.paths.results, params.suites
    configs = config_stages(params, cwd)
    own = {s for c in configs.values() for s in c["suites"]}
    suites = [s for s in every if s not in own]
    stages: dict[str, dict] = {}
    for name, c in configs.items():  # make demo's command (front page aside: the front-page stage's)
        stages[name] = {
            "cmd": f"{SNAKEMAKE} --configfile {shlex.quote(c['config'])} --config front_page=false",
            "deps": [*CODE, c["config"]],
            "params": list(dict.fromkeys(p for s in c["suites"] for p in every[s].params_keys())),
            "outs": [o for s in c["suites"] for o in suite_outs(results, s)],
        }
    for suite in suites:  # a stage per suite: each lists the params its runs read, which `foreach` cannot give
        stages[f"suite-{suite}"] = {
            "cmd": f"{SNAKEMAKE} --config 'suites=[{suite}]' reproduce=none front_page=false",
            "deps": CODE,
            "params": every[suite].params_keys(),
            "outs": suite_outs(results, suite),
        }
    item_outs = []
    for name, item, read in paper_items(params):
        outs = [*render.item_outputs(item, results, "paper")]
        outs.append(group_record(outs[0]))  # the build's times of these files (csebench.workflow.stamps)
        item_outs.append(outs[0])
        # deps: the code and the params of the suites it reads, not their folders: Snakemake builds
        # what the item needs, and a missing folder breaks `dvc repro --dry` (treeverse/dvc#9818)
        stages[name] = {
            "cmd": f"{SNAKEMAKE} --config reproduce=paper plan=false -- {shlex.quote(outs[0])}",
            "deps": CODE,
            "params": list(dict.fromkeys(p for s in read for p in every[s].params_keys())) or list(SHARED_PARAMS),
            "outs": outs,
        }
    stages["front-page"] = {  # every suite and item: params.yaml as a whole
        "cmd": f"{SNAKEMAKE} --config reproduce=paper plan=false -- {shlex.quote(paths.front_page(results))}",
        "deps": ["src/csebench", "params.yaml"],
        "outs": [paths.front_page(results), group_record(paths.front_page(results))],
    }
    all_suites = [s for c in configs.values() for s in c["suites"]] + suites
    return {"stages": stages,
            "metrics": [paths.suite_metrics(results, s) for s in all_suites],
            "plots": [entry for s in configs for entry in dvc_plots_spec_for_suite(every[s])]
            + [{paths.suite_figure(results, s, "training_curves"): {}} for s in suites]}


def suite_outs(results: str, suite: str) -> list:
    """What a suite's stage writes: its folder (persist: Snakemake decides what reruns inside)."""
    return [{paths.suite_dir(results, suite): {"persist": True}}]


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


def dvc_plots_spec_for_suite(suite: Suite) -> list[dict]:
    jobs = suite.jobs()
    return dvc_plots_spec([suite.run_dir(run, seed) for run, seed in jobs], suite.name,
                          [paths.suite_figure(suite.params.paths.results, suite.name, "training_curves")],
                          [suite.run_dir(run, seed) for run, seed in jobs if suite.trains(run)])


class _NoAliases(yaml.SafeDumper):
    """Each stage written out in full: a reader of dvc.yaml follows no anchors."""

    def ignore_aliases(self, data):
        return True


HEADER = """\
# GENERATED by `csebench dvc-yaml` from params.yaml and the paper-item registry: do not edit by hand.
# Design and why: docs/dvc.md. Snakemake is the engine; each stage asks it for one suite or one item.
#   dvc repro                  every suite, every paper item, the front page (what `snakemake` builds)
#   dvc repro demo             the offline CPU demo (config/demo.yaml, as `make demo`); ci: config/ci.yaml
#   dvc repro suite-<suite>    one suite of params.yaml;  dvc repro <paper>-<item>: one table or figure
# Every run is trained once in results/runs/<key> (docs/runs.md): DVC tracks that store in runs.dvc.
"""


def render(params: Params, cwd: str | Path = ".") -> str:
    spec = build_dvc_yaml(params, cwd)
    parts = [HEADER]
    for key in ("stages", "metrics", "plots"):  # a blank line between stages: one screen each
        text = yaml.dump({key: spec[key]}, Dumper=_NoAliases, sort_keys=False, width=120, default_flow_style=None)
        if key == "stages":
            lines = text.splitlines(keepends=True)
            text = "".join(("\n" + ln) if ln.startswith("  ") and not ln.startswith("   ") and i > 1 else ln
                           for i, ln in enumerate(lines))
        parts.append(text)
    return "\n".join(parts)


STORE_TEXT = """\
# The run store (docs/runs.md, docs/dvc.md): every distinct run, trained once, whichever suites list it.
# The suite stages of dvc.yaml write into it; `csebench dvc-commit` records it (`dvc commit -f runs.dvc`
# after refusing any link out of the repository, which DVC would follow), `dvc push` shares it.
outs:
- path: results/runs
  persist: true
"""


def main_dvc_yaml(params_path: str, out: str | None, check: bool) -> int:
    params = Params.load(params_path)
    text = render(params)
    target = Path(out or "dvc.yaml")
    if check:
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            print("dvc.yaml is out of date with params.yaml / the registry: run `csebench dvc-yaml`", file=sys.stderr)
            return 1
        return 0
    from csebench.core.io import write_text

    if out == "-":
        sys.stdout.write(text)
    else:
        write_text(target, text)
    return 0

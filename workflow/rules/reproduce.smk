# The papers' tables and figures (csebench.results): one job per registry item, reading the result
# files its layout names (train.json, sts.json, transfer.json, curves, analysis JSONs) and writing
#   tables:  {root}/{paper}/table-N.{md,csv,tex}     figures: {root}/{paper}/figure-N.{png,md,csv}
# root = results/papers (paper scale) or results/demo/papers (demo scale, items with a `demo:` section).
# Which items a run builds: config `reproduce:` = paper (every rebuilt item), demo, or none.
# results/README.md (rule front_page) links every item that exists and lists the rest with their cost.

import re

from csebench.results import render as _render
from csebench.results.context import SCALES as _SCALES
from csebench.results.registry import load_registry as _load_registry

REGISTRY = _load_registry()
REPRODUCE = config.get("reproduce", "none")
ROOTS = {_render.output_root(RESULTS, s): s for s in _SCALES}


def reproduce_items(scale):
    if scale != REPRODUCE:
        return []
    return [it for it in REGISTRY.items if it.rebuilt and (scale == "paper" or it.demo)]


def reproduce_targets():
    return [_render.item_outputs(it, RESULTS, REPRODUCE)[0] for it in reproduce_items(REPRODUCE)] if REPRODUCE in ROOTS.values() else []


def _item_inputs(w):
    return _render.input_files(REGISTRY.item(f"{w.paper}/{w.item}"), PARAMS, RESULTS, ROOTS[w.root])


_ROOT_RE = "|".join(re.escape(r) for r in ROOTS)


rule reproduce_table:
    input:
        _item_inputs,
    output:
        md="{root}/{paper}/{item}.md",
        csv="{root}/{paper}/{item}.csv",
        tex="{root}/{paper}/{item}.tex",
    wildcard_constraints:
        root=_ROOT_RE,
        paper=r"[a-z-]+",
        item=r"table-[A-Za-z0-9.()-]+",
    params:
        scale=lambda w: ROOTS[w.root],
    log:
        "{root}/logs/{paper}.{item}.log",
    shell:
        "csebench results render --item {wildcards.paper}/{wildcards.item} --scale {params.scale} --results {RESULTS}"
        " --out-dir {wildcards.root}/{wildcards.paper} 2> {log}"


rule reproduce_figure:
    input:
        _item_inputs,
    output:
        png="{root}/{paper}/{item}.png",
        md="{root}/{paper}/{item}.md",
        csv="{root}/{paper}/{item}.csv",
    wildcard_constraints:
        root=_ROOT_RE,
        paper=r"[a-z-]+",
        item=r"figure-[A-Za-z0-9.()-]+",
    params:
        scale=lambda w: ROOTS[w.root],
    log:
        "{root}/logs/{paper}.{item}.log",
    shell:
        "csebench results render --item {wildcards.paper}/{wildcards.item} --scale {params.scale} --results {RESULTS}"
        " --out-dir {wildcards.root}/{wildcards.paper} 2> {log}"


rule front_page:
    input:
        papers=lambda w: reproduce_targets(),
        suites=[f"{RESULTS}/{suite}/README.md" for suite in SUITES],
    output:
        f"{RESULTS}/README.md",
    log:
        f"{RESULTS}/logs/front_page.log",
    shell:
        "csebench results front-page --results {RESULTS} --out {output} 2> {log}"

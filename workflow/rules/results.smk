# Every table, figure and page (csebench.results): one `csebench results render` per registry item.
#   report            a suite's item (suite/<suite>): results/{suite}/tables/{sts,transfer}.{md,csv,tex},
#                     figures/{sts_avg,training_curves}.png and README.md, linking the suite's analyses
#   reproduce_table   a paper table: {root}/{paper}/table-N.{md,csv,tex}
#   reproduce_figure  a paper figure: {root}/{paper}/figure-N.{png,md,csv}
#   mteb_table        a suite's MTEB table (suites with an `mteb:` section): results/{suite}/tables/mteb.{md,csv,tex},
#                     labelled "MTEB protocol", linked from the suite's README (so the report rule asks for it)
#   front_page        results/README.md: every paper item, linked when built, else its suites' cost
# `snakemake --cores 1 --report results/report.html` (after the build, same --config): every built paper table and figure,
# grouped by paper, and each suite's tables and figures, captioned from the registry (report(): the rules' params
# caption, through workflow/report/item.rst), with Snakemake's record of each file.
# root = results/papers (paper scale) or results/demo/papers (demo scale, items with a `demo:` section;
# `reproduce: demo` builds those without `make_demo: false`, the others are built when asked for by name).
# Which paper items a run builds: config `reproduce:` = paper (every rebuilt item), demo, or none.
# Each item's inputs are the result files its renderer reads (csebench.results.render.input_files);
# a suite's analysis figures and tables come from analysis.smk's `analysis_targets(suite)`, looked up
# lazily (any include order).

import functools
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
    return REGISTRY.built(scale)


def reproduce_targets():
    return [_render.item_outputs(it, RESULTS, REPRODUCE)[0] for it in reproduce_items(REPRODUCE)] if REPRODUCE in ROOTS.values() else []


@functools.cache
def reproduce_files():
    """Every result file the paper items being built read (computed once: card.smk asks per job)."""
    if REPRODUCE not in ROOTS.values():
        return frozenset()
    return frozenset(f for it in reproduce_items(REPRODUCE) for f in _render.input_files(it, PARAMS, RESULTS, REPRODUCE))


def reproduce_suites():
    """The suites whose result folders the paper items being built read (the demo's: demo-iscse-beta,
    demo-combinations): their models get cards as the configured suites' do (Snakefile's rule all)."""
    return _render.suites_of(sorted(reproduce_files()), PARAMS)


def _item_inputs(w):
    return _render.input_files(REGISTRY.item(f"{w.paper}/{w.item}"), PARAMS, RESULTS, ROOTS[w.root])


def suite_links(w):
    fn = globals().get("analysis_targets")
    mteb = [] if wf.suite_mteb_tasks(PARAMS, w.suite) is None else [f"{RESULTS}/{w.suite}/tables/mteb.md"]
    return [p for p in (fn(w.suite) if fn else []) if p.endswith((".png", ".md"))] + mteb


_ROOT_RE = "|".join(re.escape(r) for r in ROOTS)
RENDER = "csebench results render --results {RESULTS}"
CAPTION = "../report/item.rst"  # renders the job's params.caption (Snakemake reports: captions are files)

report: "../report/workflow.rst"


def _report(path, item):
    """``path`` in the Snakemake report under its paper (``item``: wildcards -> the item's id)."""
    return report(path, caption=CAPTION, category=lambda w: REGISTRY.category(REGISTRY.item(item(w))),
                  subcategory=lambda w: getattr(w, "suite", None) or f"{ROOTS[w.root]} scale",
                  labels=lambda w: {"item": REGISTRY.item(item(w)).number, "title": REGISTRY.item(item(w)).title})


def _paper_item(w):
    return f"{w.paper}/{w.item}"


def _caption(w):
    return REGISTRY.caption(REGISTRY.item(_paper_item(w)), ROOTS[w.root])


rule report:
    input:
        lambda w: _render.input_files(REGISTRY.item(f"suite/{w.suite}"), PARAMS, RESULTS),
        links=suite_links,
    output:
        [_report(p, lambda w: f"suite/{w.suite}") if p.endswith(("sts.md", "transfer.md", ".png")) else p
         for p in (f"{RESULTS}/{{suite}}/{f}" for f in _render.SUITE_FILES)],
    params:
        links=lambda w, input: f"--link {' '.join(input.links)}" if input.links else "",
        caption=lambda w: REGISTRY.caption(REGISTRY.item(f"suite/{w.suite}")),
    log:
        f"{RESULTS}/{{suite}}/logs/report.log",
    shell:
        RENDER + " --item suite/{wildcards.suite} {params.links} 2> {log}"


rule mteb_table:
    input:
        lambda w: _render.input_files(REGISTRY.item(f"mteb/{w.suite}"), PARAMS, RESULTS),
    output:
        [_report(p, lambda w: f"mteb/{w.suite}") if p.endswith(".md") else p
         for p in (f"{RESULTS}/{{suite}}/tables/mteb.{e}" for e in _render.TABLE_EXTS)],
    wildcard_constraints:
        suite=r"[^/]+",
    params:
        caption=lambda w: REGISTRY.caption(REGISTRY.item(f"mteb/{w.suite}")),
    log:
        f"{RESULTS}/{{suite}}/logs/mteb_table.log",
    shell:
        RENDER + " --item mteb/{wildcards.suite} 2> {log}"


rule reproduce_table:
    input:
        _item_inputs,
    output:
        md=_report("{root}/{paper}/{item}.md", _paper_item),
        csv="{root}/{paper}/{item}.csv",
        tex="{root}/{paper}/{item}.tex",
    wildcard_constraints:
        root=_ROOT_RE,
        paper=r"[a-z-]+",
        item=r"table-[A-Za-z0-9.()-]+",
    params:
        scale=lambda w: ROOTS[w.root],
        caption=_caption,
    log:
        "{root}/logs/{paper}.{item}.log",
    shell:
        RENDER + " --item {wildcards.paper}/{wildcards.item} --scale {params.scale} --out-dir {wildcards.root}/{wildcards.paper} 2> {log}"


rule reproduce_figure:
    input:
        _item_inputs,
    output:
        png=_report("{root}/{paper}/{item}.png", _paper_item),
        md="{root}/{paper}/{item}.md",
        csv="{root}/{paper}/{item}.csv",
    wildcard_constraints:
        root=_ROOT_RE,
        paper=r"[a-z-]+",
        item=r"figure-[A-Za-z0-9.()-]+",
    params:
        scale=lambda w: ROOTS[w.root],
        caption=_caption,
    log:
        "{root}/logs/{paper}.{item}.log",
    shell:
        RENDER + " --item {wildcards.paper}/{wildcards.item} --scale {params.scale} --out-dir {wildcards.root}/{wildcards.paper} 2> {log}"


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

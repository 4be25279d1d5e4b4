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

import os
import re

from csebench.results import render as _render
from csebench.results.context import SCALES as _SCALES
from csebench.results.registry import load_registry as _load_registry

REGISTRY = _load_registry()
REPRODUCE = config.get("reproduce", "none")
ROOTS = {_render.output_root(RESULTS, s): s for s in _SCALES}


_ROOT_RE = "|".join(re.escape(r) for r in ROOTS)
CAPTION = "../report/item.rst"  # renders the job's params.caption (Snakemake reports: captions are files)

report: "../report/workflow.rst"


rule report:
    conda:
        CONDA_ENV
    input:
        lambda w: _render.input_files(REGISTRY.item(f"suite/{w.suite}"), PARAMS, RESULTS),
        links=suite_links,
    output:
        kept_until_replaced([_report(p, lambda w: f"suite/{w.suite}") if p.endswith(("sts.md", "transfer.md", ".png"))
                             else p for p in (f"{RESULTS}/{{suite}}/{f}" for f in _render.SUITE_FILES)]),
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        results=lambda w, output: results_of(output[0], w.suite),
        links=lambda w, input: option_args("--link", input.links),
        caption=lambda w: REGISTRY.caption(REGISTRY.item(f"suite/{w.suite}")),
    log:
        f"{RESULTS}/{{suite}}/logs/report.log",
    shell:
        "csebench results render {params.cfg:q} --results {params.results:q} --item suite/{wildcards.suite:q} {params.links:q} 2> {log:q}"


rule mteb_table:
    conda:
        CONDA_ENV
    input:
        lambda w: _render.input_files(REGISTRY.item(f"mteb/{w.suite}"), PARAMS, RESULTS),
    output:
        kept_until_replaced([_report(p, lambda w: f"mteb/{w.suite}") if p.endswith(".md") else p
                             for p in (f"{RESULTS}/{{suite}}/tables/mteb.{e}" for e in _render.TABLE_EXTS)]),
    wildcard_constraints:
        suite=r"[^/]+",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        results=lambda w, output: results_of(output[0], w.suite),
        caption=lambda w: REGISTRY.caption(REGISTRY.item(f"mteb/{w.suite}")),
    log:
        f"{RESULTS}/{{suite}}/logs/mteb_table.log",
    shell:
        "csebench results render {params.cfg:q} --results {params.results:q} --item mteb/{wildcards.suite:q} 2> {log:q}"


rule reproduce_table:
    conda:
        CONDA_ENV
    input:
        _item_inputs,
    output:
        md=kept_until_replaced(_report("{root}/{paper}/{item}.md", _paper_item)),
        csv=kept_until_replaced("{root}/{paper}/{item}.csv"),
        tex=kept_until_replaced("{root}/{paper}/{item}.tex"),
    wildcard_constraints:
        root=_ROOT_RE,
        paper=r"[a-z-]+",
        item=r"table-[A-Za-z0-9.()-]+",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        results=RESULTS,
        scale=lambda w: ROOTS[w.root],
        caption=_caption,
    log:
        "{root}/logs/{paper}.{item}.log",
    shell:
        "csebench results render {params.cfg:q} --results {params.results:q} --item {wildcards.paper:q}/{wildcards.item:q}"
        " --scale {params.scale:q} --out-dir {wildcards.root:q}/{wildcards.paper:q} 2> {log:q}"


rule reproduce_figure:
    conda:
        CONDA_ENV
    input:
        _item_inputs,
    output:
        png=kept_until_replaced(_report("{root}/{paper}/{item}.png", _paper_item)),
        md=kept_until_replaced("{root}/{paper}/{item}.md"),
        csv=kept_until_replaced("{root}/{paper}/{item}.csv"),
    wildcard_constraints:
        root=_ROOT_RE,
        paper=r"[a-z-]+",
        item=r"figure-[A-Za-z0-9.()-]+",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        results=RESULTS,
        scale=lambda w: ROOTS[w.root],
        caption=_caption,
    log:
        "{root}/logs/{paper}.{item}.log",
    shell:
        "csebench results render {params.cfg:q} --results {params.results:q} --item {wildcards.paper:q}/{wildcards.item:q}"
        " --scale {params.scale:q} --out-dir {wildcards.root:q}/{wildcards.paper:q} 2> {log:q}"


rule front_page:
    conda:
        CONDA_ENV
    input:
        papers=lambda w: reproduce_targets(),
        suites=[f"{RESULTS}/{suite}/README.md" for suite in SUITES],
    output:
        page=kept_until_replaced(f"{RESULTS}/README.md"),
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        results=lambda w, output: os.path.dirname(output.page),
    log:
        f"{RESULTS}/logs/front_page.log",
    shell:
        "csebench results front-page {params.cfg:q} --results {params.results:q} --out {output.page:q} 2> {log:q}"

"""Render an item: find its renderer (imported on first use, by name: no module of the package
imports a renderer), build its Context, list its inputs or write its files.

    render_item(item_id, params, ...)   write one item's files
    input_files(item, params, ...)      the result files it reads (Snakemake inputs)
    item_outputs(item, results, scale)  the files it writes
"""

from __future__ import annotations

from pathlib import Path

from csebench.core.lazy import LazyRegistry
from csebench.core.paths import items_root as output_root, suite_dir
from csebench.results.context import SCALES, Context, Renderer
from csebench.results.registry import MTEB, SUITE, Item, load_registry
from csebench.study.typed import Params

# A renderer named N is the RENDERER of the module renderers/N.py (grid, suite, retrieved_sentences):
# adding a kind of table or figure is that one file (docs/results.md); another installed package adds one
# through the entry-point group csebench.renderers (name -> "module:RENDERER"). The figures module holds several:
RENDERERS = LazyRegistry("renderer", {
    "sweep": "csebench.results.renderers.figures:SWEEP",
    "curves": "csebench.results.renderers.figures:CURVES",
    "seeds": "csebench.results.renderers.figures:SEEDS",
    "analysis": "csebench.results.renderers.figures:ANALYSIS",
    "model_analysis": "csebench.results.renderers.figures:MODEL_ANALYSIS",
}, package="csebench.results.renderers", attr="RENDERER", group="csebench.renderers")
TABLE_EXTS = ("md", "csv", "tex")
FIGURE_EXTS = ("png", "md", "csv")
SUITE_FILES = [*(f"tables/{k}.{e}" for k in ("sts", "transfer") for e in TABLE_EXTS),
               "figures/training_curves.png", "figures/sts_avg.png", "README.md"]


def get(name: str | None) -> Renderer:
    return RENDERERS.get(name)


def out_dir(item: Item, results: str = "results", scale: str = "paper") -> str:
    """The folder an item writes into: the suite's for a suite item (its tables/ for the MTEB table),
    else its paper's."""
    if item.paper in (SUITE, MTEB):
        return suite_dir(results, item.slug) + ("/tables" if item.paper == MTEB else "")
    return f"{output_root(results, scale)}/{item.paper}"


def item_outputs(item: Item, results: str = "results", scale: str = "paper") -> list[str]:
    """The files an item writes, its DAG target first (a suite's README last: it links the others)."""
    root = out_dir(item, results, scale)
    if item.paper == SUITE:
        return [f"{root}/{f}" for f in SUITE_FILES]
    if item.paper == MTEB:
        return [f"{root}/mteb.{e}" for e in TABLE_EXTS]
    return [f"{root}/{item.slug}.{e}" for e in (TABLE_EXTS if item.kind == "table" else FIGURE_EXTS)]


def context(item: Item, params: Params, results: str = "results", scale: str = "paper",
            out: str | Path | None = None, **kw) -> Context:
    if scale not in SCALES:
        raise ValueError(f"scale '{scale}' (valid: {', '.join(SCALES)})")
    return Context(item, Params.of(params), results, scale, Path(out or out_dir(item, results, scale)), get(item.renderer), **kw)


def input_files(item: Item, params: Params, results: str = "results", scale: str = "paper") -> list[str]:
    """Every file the item's renderer reads (Snakemake inputs), in a stable order."""
    ctx = context(item, params, results, scale)
    return list(dict.fromkeys(ctx.renderer.inputs(ctx)))


def suites_of(files: list[str], params: Params) -> list[str]:
    """The suites whose folders (results/<suite>) the files lie in: what an item's inputs read."""
    params = Params.of(params)
    root = params.paths.results.rstrip("/") + "/"
    return sorted({f[len(root):].split("/")[0] for f in files if f.startswith(root)} & set(params.suites))


def render_item(item_id: str, params: Params, results: str = "results", scale: str = "paper",
                out: str | Path | None = None, **kw) -> list[Path]:
    item = load_registry().item(item_id)
    ctx = context(item, params, results, scale, out, **kw)
    return ctx.renderer.render(ctx)

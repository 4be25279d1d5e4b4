"""Rebuild every table and figure of the four papers (and SimCSE's main table) in the papers' layouts.

    load_registry()                      the items (resources/reproduction/<paper>.yaml)
    render_item(item_id, params, ...)    write one item's files (Markdown/CSV/LaTeX or PNG/Markdown/CSV)
    item_outputs(item, root)             the files an item writes
    input_files(item, params, ...)       the result files it reads (Snakemake inputs)
    csebench.reproduce.pages             docs/reproduction.md and results/README.md
"""

from __future__ import annotations

from pathlib import Path

from .core import SCALES, Context, input_files
from .registry import Item, Registry, load_registry

__all__ = ["load_registry", "render_item", "item_outputs", "input_files", "output_root", "Item", "Registry", "SCALES"]

TABLE_EXTS = ("md", "csv", "tex")
FIGURE_EXTS = ("png", "md", "csv")


def output_root(results: str = "results", scale: str = "paper") -> str:
    """results/papers (paper scale) or results/demo/papers (demo scale)."""
    return f"{results}/papers" if scale == "paper" else f"{results}/{scale}/papers"


def item_outputs(item: Item, root: str) -> list[str]:
    exts = TABLE_EXTS if item.kind == "table" else FIGURE_EXTS
    return [f"{root}/{item.paper}/{item.slug}.{e}" for e in exts]


def render_item(item_id: str, params: dict, results: str = "results", scale: str = "paper",
                out_dir: str | Path | None = None) -> list[Path]:
    from .renderers import get

    item = load_registry().item(item_id)
    if scale not in SCALES:
        raise ValueError(f"scale '{scale}' (valid: {', '.join(SCALES)})")
    out = Path(out_dir) if out_dir else Path(output_root(results, scale)) / item.paper
    ctx = Context(item, params, results, scale, out)
    return get(item.renderer).render(ctx)

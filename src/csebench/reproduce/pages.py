"""Two generated pages: ``docs/reproduction.md`` (the registry as a coverage matrix; a test fails when
it is stale) and ``results/README.md`` (the front page: every paper -> its tables and figures, each
linked when built, else "not yet run" with its suites and their GPU-hours)."""

from __future__ import annotations

import os
from pathlib import Path

from . import item_outputs, output_root
from .registry import Item, Registry, load_registry

STATUS_TEXT = {"rebuilt": "rebuilt", "not-applicable": "not applicable", "not-rebuilt": "not rebuilt"}


def _published_summary(it: Item) -> str:
    n = 0
    for b in it.blocks():
        for row in b.get("rows") or []:
            if row.get("published") is not None:
                n += sum(v is not None for v in row["published"])
            elif row.get("published_ref"):
                n += len(b.get("columns") or [])
    lay = it.layout or {}
    n += sum(p.get("published") is not None for s in lay.get("series") or [] for p in s.get("points") or [])
    n += sum(v.get("published") is not None for v in lay.get("values") or [])
    n += len(lay.get("published") or [])
    t = len(it.published_text)
    source = f" (from {lay['published_from']})" if lay.get("published_from") else ""
    parts = ([f"{n} printed{source}"] if n else []) + ([f"{t} from the text"] if t else [])
    return ", ".join(parts) or "–"


def coverage_line(reg: Registry) -> str:
    """Measured items, configuration tables and not-applicable items counted apart (issue 20)."""
    c = reg.coverage()
    replots = [f"{reg.papers.get(it.paper, {}).get('short', it.paper)} {it.number} re-plots {it.layout['published_from']}'s "
               "values" for it in reg.items if it.rebuilt and (it.layout or {}).get("published_from")]
    return (f"**Coverage: {c['measured']} measured tables and figures** (rebuilt from runs by a DAG target in the "
            f"paper's layout{'; ' + ', '.join(replots) if replots else ''}), **{c['configuration']} configuration tables** "
            f"(hyperparameters read from `params.yaml`: Δ is = or ≠), {c['not-rebuilt']} not rebuilt and "
            f"**{c['not-applicable']} not applicable** (no measurement), each with its reason: {c['total']} listed.")


def reproduction_md(reg: Registry | None = None) -> str:
    reg = reg or load_registry()
    out = ["# Reproduction: every table and figure of the four papers", "",
           "Generated from `src/csebench/resources/reproduction/*.yaml` by `csebench reproduce docs` "
           "(do not edit; `tests/test_reproduce.py` fails when this page is stale).", "",
           coverage_line(reg), "",
           "Build everything with `snakemake --cores all --resources gpu=1` (every suite below; "
           "`csebench plan` prints the jobs and GPU-hours first), or one item with its DAG target, "
           "e.g. `snakemake --cores all --resources gpu=1 results/papers/is-cse/table-4.md`. "
           "Each table is written as Markdown, CSV and LaTeX; each figure as PNG with a Markdown/CSV "
           "companion holding the plotted numbers. Ours (mean ± std over seeds) stands beside the "
           "published value and Δ = ours − published. The front page of built results is `results/README.md`.", ""]
    for paper, items in reg.by_paper().items():
        meta = reg.papers.get(paper) or {}
        out += [f"## {meta.get('short', paper)}: {meta.get('title', '')}", ""]
        if meta.get("source"):
            out += [meta["source"], ""]
        out += ["| item | shows | metric | suites | DAG target | published values | status |",
                "|---|---|---|---|---|---|---|"]
        for it in items:
            target = f"`{item_outputs(it, output_root())[0]}`" if it.rebuilt else "–"
            suites = ", ".join(f"`{s}`" for s in it.suites) or "–"
            status = STATUS_TEXT[it.status] + (f": {it.reason}" if it.reason else "")
            demo = " (demo scale in `make demo`)" if it.demo else ""
            out.append(f"| {it.number}{demo} | {it.title} | {it.metric} | {suites} | {target} | "
                       f"{_published_summary(it)} | {status} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def front_page(results: str = "results", params: dict | None = None, reg: Registry | None = None,
               out_path: str | Path | None = None) -> str:
    """The front page: built items linked (paper and demo scale), the others with their suites' cost."""
    from ..plan import GPU_PEAKS, suite_plan

    reg = reg or load_registry()
    base = Path(out_path).parent if out_path else Path(results)
    hours: dict[str, float] = {}

    def cost(suite: str) -> str:
        if params is None or suite not in (params.get("suites") or {}):
            return ""
        if suite not in hours:
            hours[suite] = suite_plan(params, suite).gpu_hours(GPU_PEAKS["H100"])
        return f"{hours[suite]:.1f}"

    def link(path: str, text: str) -> str:
        return f"[{text}]({Path(os.path.relpath(path, base)).as_posix()})"

    out = ["# csebench results", "", "Generated by `csebench reproduce front-page` (the `front_page` rule). " + coverage_line(reg), "",
           "Each paper's tables and figures: linked where built (paper scale, and demo scale where the demo "
           "builds one), else the suites that build them and their estimated GPU-hours (H100, `csebench plan`).", ""]
    for paper, items in reg.by_paper().items():
        meta = reg.papers.get(paper) or {}
        out += [f"## {meta.get('short', paper)}", "", "| item | what | paper scale | demo scale |", "|---|---|---|---|"]
        for it in items:
            if not it.rebuilt:
                out.append(f"| {it.number} | {it.title} | {STATUS_TEXT[it.status]}: {it.reason} | |")
                continue
            paper_files = item_outputs(it, output_root(results, "paper"))
            demo_files = item_outputs(it, output_root(results, "demo"))
            if Path(paper_files[0]).is_file():
                cell = " · ".join(link(f, Path(f).suffix.lstrip(".")) for f in paper_files)
            else:
                cell = "not yet run: " + ", ".join(f"`{s}`" + (f" ({c} GPU-h)" if (c := cost(s)) else "") for s in it.suites)
            demo = " · ".join(link(f, Path(f).suffix.lstrip(".")) for f in demo_files) if Path(demo_files[0]).is_file() else ""
            out.append(f"| {it.number} | {it.title} | {cell} | {demo} |")
        out.append("")
    suites = sorted(p.name for p in Path(results).iterdir() if (p / "README.md").is_file()) if Path(results).is_dir() else []
    if suites:
        out += ["## Suites built", ""] + [f"- {link(f'{results}/{s}/README.md', s)}" for s in suites] + [""]
    return "\n".join(out).rstrip() + "\n"

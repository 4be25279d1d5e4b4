"""IS-CSE Table 9 (retrieved sentences, qualitative): our kNN retrievals beside the paper's two
printed examples."""

from __future__ import annotations

from pathlib import Path

from csebench.core.io import write_csv, write_text
from csebench.results.context import Context, Renderer


def _neighbours_md(ctx: Context) -> list[str]:
    ref = ctx.ref(ctx.item.layout["run"])
    return [f for s in ctx.seeds(ref)[:1] for f in ctx.files("analysis:neighbours_md", ref, s)]


def render_retrieved(ctx: Context) -> list:
    """A qualitative table: there is nothing to subtract."""
    it = ctx.item
    src = _neighbours_md(ctx)
    ours = Path(src[0]).read_text(encoding="utf-8") if src and Path(src[0]).is_file() else "not yet run\n"
    ours = "\n".join(("#" + ln) if ln.startswith("#") else ln for ln in ours.splitlines())  # nest its headings
    lines = [f"# {ctx.paper_short} {it.number}: {it.title}", "", it.shows, "", ctx.scale_note, "",
             "## Published examples", "", "| | Query sentence | Retrieved sentences (top 3) |", "|---|---|---|"]
    rows = []
    for i, ex in enumerate(it.layout.get("published") or [], 1):
        lines.append(f"| {i} | {ex['query']} | " + "<br>".join(f"{j}. {s}" for j, s in enumerate(ex["retrieved"], 1)) + " |")
        rows += [["published", i, ex["query"], j, s] for j, s in enumerate(ex["retrieved"], 1)]
    lines += ["", "## Ours", "", ours, "", ctx.provenance, ""]
    lines += [f"- {n}" for n in it.notes]
    write_text(ctx.path("md"), "\n".join(lines).rstrip() + "\n")
    write_csv(ctx.path("csv"), ["source", "example", "query", "rank", "sentence", "provenance"], [r + [ctx.provenance] for r in rows])
    tex = ctx.path("tex")
    write_text(tex, "% qualitative table: see the Markdown file\n% " + ctx.provenance + "\n" + "\n".join(
        f"% {r[0]} {r[1]}.{r[3]}: {r[4]}" for r in rows) + "\n")
    return [ctx.path("md"), ctx.path("csv"), tex]


RENDERER = Renderer(_neighbours_md, render_retrieved)

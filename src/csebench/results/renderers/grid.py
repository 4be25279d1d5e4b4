"""Tables in the paper's layout: rows x columns, each cell ours (mean ± std over seeds) beside the
published value and Δ = ours − published, in Markdown, CSV and LaTeX.

A block: ``corner`` (the header of the label column(s); a list for several), ``columns`` (``name``,
optional ``run``/``metric``), ``rows`` (``label`` (str or list), optional ``run``/``runs``,
``metric``/``metrics``, ``published`` aligned with the columns, ``source`` (where a study's row copies its
published values from, printed on its published line), ``source_kind`` (where the values were read: the
paper, the authors' README or notebook, or a third-party reprint; registry.SOURCE_KINDS), ``note``),
optional ``metric``, ``title``. ``scale`` (row, column or block) multiplies ours, e.g. 100 where the paper prints a
correlation in percent. A cell without a run prints "not run (reason)". The published values are the
one source of published numbers (csebench.results.published): a suite table shows a row's values
beside the run the row is bound to. A published line names its source kind unless it is the paper's own
text; a footnote under the tables says where each kind was read, and the CSV has a
``published_source_kind`` column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from csebench.core.io import write_csv, write_text
from csebench.core.provenance import mixed_note
from csebench.results.context import Context, Renderer
from csebench.results.published import row_values
from csebench.results.registry import SOURCE_KINDS, cell_metric, cell_run, load_registry
from csebench.results.runs import RunRef, mean_std
from csebench.results.tables import Table, csv_number, delta, fmt, latex_escape, ours_text


@dataclass
class Cell:
    run: RunRef | None
    metric: str | None
    published: object = None
    values: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    missing_reason: str = ""
    same_run: str = ""  # "same run as S/R" where the cell's run is another suite's (docs/runs.md)
    digits: int = 2  # decimals printed (row, column or block `digits`; the paper's precision)

    @property
    def config(self) -> bool:
        return bool(self.metric) and self.metric.startswith("config:")

    @property
    def mean(self):
        if self.config:
            return self.values[0] if self.values else None
        return mean_std(self.values)[0]

    @property
    def std(self):
        return None if self.config else mean_std(self.values)[1]

    @property
    def delta(self):
        m, p = self.mean, self.published
        if self.config:  # a hyperparameter is the published one or not
            if m is None or p is None:
                return None
            try:
                return "=" if math.isclose(float(m), float(p), rel_tol=1e-9) else "≠"
            except (TypeError, ValueError):
                return "=" if str(m) == str(p) else "≠"
        return delta(m, p) if isinstance(m, (int, float)) and isinstance(p, (int, float)) else None

    def ours_text(self) -> str:
        if self.run is None:
            return "n/a" if not self.missing_reason else f"n/a ({self.missing_reason})"
        if self.mean is None:
            return "not yet run"
        if self.config:
            return fmt(self.mean)
        return ours_text(self.mean, self.std, self.digits)


def block_cells(ctx: Context, block: dict, compute: bool = True) -> list[list[Cell]]:
    cols = block.get("columns") or []
    out = []
    for row in block.get("rows") or []:
        cells = []
        published = row_values(row, cols)
        for j, col in enumerate(cols):
            run, metric = cell_run(row, col, j), cell_metric(block, row, col, j)
            digits = row.get("digits", col.get("digits", block.get("digits", 2)))
            scale = row.get("scale", col.get("scale", block.get("scale", 1)))
            cell = Cell(None, metric, published[j], missing_reason=row.get("missing", col.get("missing", "")), digits=digits)
            if run and metric:
                cell.run = ctx.ref(run)
                if cell.run is None:
                    cell.missing_reason = f"no {ctx.scale}-scale run" if ctx.scale != "paper" else "not a run of params.yaml"
                elif compute:
                    cell.values, cell.seeds = ctx.values(metric, cell.run)
                    cell.same_run = ctx.same_run(metric, cell.run)
                    if scale != 1 and not cell.config:
                        cell.values = [v * scale for v in cell.values]
            cells.append(cell)
        out.append(cells)
    return out


def grid_inputs(ctx: Context) -> list[str]:
    return [f for block in ctx.item.blocks() for row in block_cells(ctx, block, compute=False) for c in row
            if c.run is not None and c.metric for s in ctx.seeds(c.run) for f in ctx.files(c.metric, c.run, s)]


def _labels(row: dict, width: int) -> list[str]:
    lab = row.get("label", "")
    labs = [str(x) for x in lab] if isinstance(lab, list) else [str(lab)]
    return labs + [""] * (width - len(labs))


def _corner(block: dict) -> list[str]:
    c = block.get("corner", "")
    return [str(x) for x in c] if isinstance(c, list) else [str(c)]


def row_missing(rc: list[Cell]) -> str:
    """The one reason when no cell of a row has a run (e.g. "no demo-scale run"): said once per row."""
    reasons = {c.missing_reason for c in rc}
    return reasons.pop() if rc and all(c.run is None for c in rc) and len(reasons) == 1 else ""


def ours_cells(rc: list[Cell]) -> tuple[str, list[str]]:
    """The row's "ours" label and cell texts; a row without any run names its reason once."""
    why = row_missing(rc)
    return ("ours", [c.ours_text() for c in rc]) if not why else (f"ours: n/a ({why})", ["–"] * len(rc))


def row_kind(item, row: dict) -> str:
    """The published row's source kind (registry.SOURCE_KINDS); "" for a row without published values."""
    return load_registry().source_kind(item, row) or ""


def published_label(row: dict, kind: str) -> str:
    """What the published line says besides "published": a study row's source, and the source kind unless
    it is the paper's own text (the default the footnote states)."""
    parts = [str(row["source"])] if row.get("source") else []
    if kind and kind != "paper":
        parts.append(SOURCE_KINDS[kind])
    return f" ({'; '.join(parts)})" if parts else ""


def source_footnote(item, blocks) -> list[str]:
    """Where each source kind of the item's published rows was read, one line per kind (Markdown)."""
    reg = load_registry()
    where: dict[str, dict[str, None]] = {}
    for block, _ in blocks:
        for row in block.get("rows") or []:
            kind = reg.source_kind(item, row)
            if kind:
                where.setdefault(kind, {})[reg.source_where(item, row)] = None
    if not where:
        return []
    out = ["Published values, by source kind (named on each published line; unmarked: the paper's own text):"]
    out += [f"- **{SOURCE_KINDS[k]}**: " + "; ".join(where[k]) for k in SOURCE_KINDS if k in where]
    return out + [""]


def block_table(block: dict, cells: list[list[Cell]], latex: bool = False, item=None) -> Table:
    """A block as a Table: per row its ours line, the published line, and Δ where ours exists."""
    corner = _corner(block)
    names = [c["name"] for c in block.get("columns") or []]
    esc = latex_escape if latex else str
    t = Table([esc(x) for x in (*corner, "", *names)], "l" * (len(corner) + 1) + "r" * len(names))
    for row, rc in zip(block.get("rows") or [], cells):
        labs = _labels(row, len(corner))
        ours, texts = ours_cells(rc)
        note = f" ({row['note']})" if row.get("note") else ""  # in the table itself, not only in the notes
        if latex:
            t.rows.append([*map(latex_escape, labs), latex_escape(ours + note), *map(latex_escape, texts)])
        else:
            t.rows.append([*(f"**{x}**" if x else "" for x in labs), ours + note, *texts])
        if any(c.published is not None for c in rc):
            pad = [""] * len(labs)
            src = published_label(row, row_kind(item, row) if item is not None else "")
            t.rows.append([*pad, (r"\textit{published}" + latex_escape(src)) if latex else "published" + src,
                           *(esc(fmt(c.published, c.digits)) for c in rc)])
            if not row_missing(rc):  # nothing to subtract in a row without runs
                t.rows.append([*pad, r"$\Delta$" if latex else "Δ ours − published",
                               *(esc(fmt(c.delta, c.digits, signed=True)) for c in rc)])
    return t


def shared_runs(blocks) -> dict[str, str]:
    """{"suite/run": "same run as S/R"} of the cells whose run is another suite's, in table order."""
    return {str(c.run): c.same_run for _, cells in blocks for r in cells for c in r if c.same_run}


def render_markdown(ctx: Context, blocks: list[tuple[dict, list[list[Cell]]]]) -> str:
    it = ctx.item
    out = [f"# {ctx.paper_short} {it.number}: {it.title}", "", it.shows, "", f"Metric: {it.metric}.", "",
           ctx.scale_note, "",
           "Each row: **ours** (mean ± sample std over the seeds present; \"not yet run\" until its run exists), "
           "the **published** value as printed, and **Δ** = ours − published.", ""]
    for block, cells in blocks:
        if block.get("title"):
            out += [f"**{block['title']}**", ""]
        out += block_table(block, cells, item=it).markdown() + [""]
    missing = sorted({str(c.run) for _, cells in blocks for r in cells for c in r if c.run and c.mean is None})
    if missing:
        out += ["Not yet run: " + ", ".join(f"`{m}`" for m in missing) + ".", ""]
    out += [f"`{run}`: {note} (trained once, docs/runs.md)." for run, note in shared_runs(blocks).items()]
    out += source_footnote(it, blocks)
    out += [ctx.provenance, ""]
    for n in it.notes:
        out += [f"- {n}"]
    return "\n".join(out).rstrip() + "\n"


def csv_rows(ctx: Context, blocks) -> tuple[list[str], list[list]]:
    header = ["item", "scale", "block", "row", "column", "run", "metric", "seeds", "ours_mean", "ours_std", "published", "delta",
              "published_source", "published_source_kind", "same_run_as", "caveat", "provenance"]  # columns, not footer rows: CSV readers see a table and nothing else
    rows = []
    for b, (block, cells) in enumerate(blocks):
        names = [c["name"] for c in block.get("columns") or []]
        for row, rc in zip(block.get("rows") or [], cells):
            label = " / ".join(_labels(row, 1)).strip(" /")
            kind = row_kind(ctx.item, row)
            for name, c in zip(names, rc):
                rows.append([ctx.item.id, ctx.scale, b + 1, label, name, str(c.run or ""), c.metric or "",
                             " ".join(map(str, c.seeds)), "" if c.mean is None else c.mean, csv_number(c.std),
                             "" if c.published is None else c.published, csv_number(c.delta),
                             row.get("source", "") if c.published is not None else "",
                             kind if c.published is not None else "", c.same_run, ctx.caveat, ctx.provenance])
    return header, rows


def render_latex(ctx: Context, blocks) -> str:
    it = ctx.item
    lines = [r"% Generated by csebench results; needs \usepackage{booktabs}.", "% " + ctx.provenance,
             r"\begin{table}[t]", r"\centering", r"\small"]
    for block, cells in blocks:
        lines += block_table(block, cells, latex=True, item=it).latex() + [r"\par\medskip"]
    cap = (f"{ctx.paper_short} {it.number} ({ctx.scale} scale): {it.title}. {it.metric}. Ours: mean ± std over seeds; "
           f"published as printed (its source kind named where it is not the paper's own text: the authors' README "
           f"or notebook, or a third-party reprint); Δ = ours − published."
           + "".join(f" {run}: {note}." for run, note in shared_runs(blocks).items())
           + (f" {ctx.caveat}" if ctx.caveat else "") + mixed_note(ctx.provenance))
    lines += [r"\caption{" + latex_escape(cap) + "}", r"\label{tab:" + it.id.replace("/", "-") + "}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def render_grid(ctx: Context) -> list:
    blocks = [(b, block_cells(ctx, b)) for b in ctx.item.blocks()]
    md, csv_path, tex = ctx.path("md"), ctx.path("csv"), ctx.path("tex")
    write_text(md, render_markdown(ctx, blocks))
    header, rows = csv_rows(ctx, blocks)
    write_csv(csv_path, header, rows)
    write_text(tex, render_latex(ctx, blocks))
    return [md, csv_path, tex]


RENDERER = Renderer(grid_inputs, render_grid)

"""Tables in the paper's layout: rows x columns, each cell ours (mean ± std over seeds) beside the
published value and Δ = ours − published, in Markdown, CSV and LaTeX.

A block: ``corner`` (the header of the label column(s); a list for several), ``columns`` (``name``,
optional ``run``/``metric``), ``rows`` (``label`` (str or list), optional ``run``/``runs``,
``metric``/``metrics``, ``published`` aligned with the columns, ``note``), optional ``metric``,
``title``. ``scale`` (row, column or block) multiplies ours, e.g. 100 where the paper prints a
correlation in percent. ``published_ref`` on a row takes its values from ``resources/published.yaml`` (the main
tables, checked against the papers there). A cell without a run prints "not run (reason)".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...io import write_csv, write_text
from ...provenance import mixed_note
from ...report import latex_escape, load_published
from .. import metrics as M
from ..core import Context, fmt, mean_std
from . import renderer


@dataclass
class Cell:
    run: M.RunRef | None
    metric: str | None
    published: object = None
    values: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    missing_reason: str = ""
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
        if self.config:
            if m is None or p is None:
                return None
            try:
                return "=" if math.isclose(float(m), float(p), rel_tol=1e-9) else "≠"
            except (TypeError, ValueError):
                return "=" if str(m) == str(p) else "≠"
        if isinstance(m, (int, float)) and isinstance(p, (int, float)) and not isinstance(p, bool):
            return float(m) - float(p)
        return None

    def ours_text(self) -> str:
        if self.run is None:
            return "n/a" if not self.missing_reason else f"n/a ({self.missing_reason})"
        if self.mean is None:
            return "not yet run"
        if self.config:
            return fmt(self.mean)
        s = fmt(self.mean, self.digits)
        if self.std is not None:
            s += f" ± {fmt(self.std, self.digits)}"
        return s


def _pub_lookup(ref: dict, column: str, published: dict):
    """A value of resources/published.yaml: ref = {kind, paper, backbone, method}."""
    for e in published.get(ref["kind"], []):
        if all(e.get(k) == ref[k] for k in ("paper", "backbone", "method")):
            key = {"Avg.": "Avg", "SST": "SST2"}.get(column, column)
            return e["scores"].get(key)
    raise KeyError(f"published.yaml has no entry {ref}")


def block_cells(ctx: Context, block: dict, compute: bool = True) -> list[list[Cell]]:
    cols = block.get("columns") or []
    out = []
    for row in block.get("rows") or []:
        cells = []
        for j, col in enumerate(cols):
            runs = row.get("runs")
            run = runs[j] if runs is not None else row.get("run", col.get("run"))
            metrics = row.get("metrics")
            metric = metrics[j] if metrics is not None else row.get("metric") or col.get("metric") or block.get("metric")
            pub = None
            if row.get("published") is not None:
                pub = row["published"][j]
            elif row.get("published_ref"):
                pub = _pub_lookup(row["published_ref"], col["name"], ctx.published or load_published())
            digits = row.get("digits", col.get("digits", block.get("digits", 2)))
            scale = row.get("scale", col.get("scale", block.get("scale", 1)))
            cell = Cell(None, metric, pub, missing_reason=row.get("missing", col.get("missing", "")), digits=digits)
            if run and metric:
                cell.run = ctx.ref(run)
                if cell.run is None:
                    cell.missing_reason = f"no {ctx.scale}-scale run" if ctx.scale != "paper" else "not a run of params.yaml"
                elif compute:
                    cell.values, cell.seeds = ctx.values(metric, cell.run)
                    if scale != 1 and not cell.config:
                        cell.values = [v * scale for v in cell.values]
            cells.append(cell)
        out.append(cells)
    return out


def grid_inputs(ctx: Context) -> list[str]:
    files = []
    for block in ctx.item.blocks():
        for row in block_cells(ctx, block, compute=False):
            for c in row:
                if c.run is not None and c.metric:
                    for s in ctx.seeds(c.run):
                        files += M.files_for(c.metric, ctx.results, c.run, s)
    return files


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


def render_block_md(ctx: Context, block: dict, cells: list[list[Cell]]) -> list[str]:
    corner = _corner(block)
    names = [c["name"] for c in block.get("columns") or []]
    lines = []
    if block.get("title"):
        lines += [f"**{block['title']}**", ""]
    lines.append("| " + " | ".join([*corner, "", *names]) + " |")
    lines.append("|" + "|".join(["---"] * (len(corner) + 1) + ["---:"] * len(names)) + "|")
    for row, rc in zip(block.get("rows") or [], cells):
        labs = _labels(row, len(corner))
        note = f" ({row['note']})" if row.get("note") else ""
        ours, texts = ours_cells(rc)
        lines.append("| " + " | ".join([*(f"**{x}**" if x else "" for x in labs), ours + note, *texts]) + " |")
        if any(c.published is not None for c in rc):
            lines.append("| " + " | ".join([*[""] * len(labs), "published", *(fmt(c.published, c.digits) for c in rc)]) + " |")
            if not row_missing(rc):  # nothing to subtract in a row without runs
                lines.append("| " + " | ".join([*[""] * len(labs), "Δ ours − published",
                                                *(fmt(c.delta, c.digits, signed=True) for c in rc)]) + " |")
    return lines + [""]


def render_markdown(ctx: Context, blocks: list[tuple[dict, list[list[Cell]]]]) -> str:
    it = ctx.item
    out = [f"# {ctx.published_paper_short} {it.number}: {it.title}", "", it.shows, "", f"Metric: {it.metric}.", "",
           ctx.scale_note, "",
           "Each row: **ours** (mean ± sample std over the seeds present; \"not yet run\" until its run exists), "
           "the **published** value as printed, and **Δ** = ours − published.", ""]
    for block, cells in blocks:
        out += render_block_md(ctx, block, cells)
    missing = sorted({str(c.run) for _, cells in blocks for r in cells for c in r if c.run and c.mean is None})
    if missing:
        out += ["Not yet run: " + ", ".join(f"`{m}`" for m in missing) + ".", ""]
    out += [ctx.provenance, ""]
    for n in it.notes:
        out += [f"- {n}"]
    return "\n".join(out).rstrip() + "\n"


def csv_rows(ctx: Context, blocks) -> tuple[list[str], list[list]]:
    header = ["item", "scale", "block", "row", "column", "run", "metric", "seeds", "ours_mean", "ours_std", "published", "delta",
              "provenance"]  # a column, not a footer row: CSV readers see a table and nothing else
    rows = []
    for b, (block, cells) in enumerate(blocks):
        names = [c["name"] for c in block.get("columns") or []]
        for row, rc in zip(block.get("rows") or [], cells):
            label = " / ".join(_labels(row, 1)).strip(" /")
            for name, c in zip(names, rc):
                d = c.delta
                rows.append([ctx.item.id, ctx.scale, b + 1, label, name, str(c.run or ""), c.metric or "",
                             " ".join(map(str, c.seeds)), "" if c.mean is None else c.mean,
                             "" if c.std is None else round(c.std, 4), "" if c.published is None else c.published,
                             "" if d is None else (round(d, 4) if isinstance(d, float) else d), ctx.provenance])
    return header, rows


def render_latex(ctx: Context, blocks) -> str:
    it = ctx.item
    lines = [r"% Generated by csebench reproduce; needs \usepackage{booktabs}.", "% " + ctx.provenance,
             r"\begin{table}[t]", r"\centering", r"\small"]
    for block, cells in blocks:
        corner = _corner(block)
        names = [c["name"] for c in block.get("columns") or []]
        lines += [r"\begin{tabular}{" + "l" * (len(corner) + 1) + "r" * len(names) + "}", r"\toprule",
                  " & ".join(map(latex_escape, [*corner, "", *names])) + r" \\", r"\midrule"]
        for row, rc in zip(block.get("rows") or [], cells):
            labs = _labels(row, len(corner))
            ours, texts = ours_cells(rc)
            lines.append(" & ".join([*map(latex_escape, labs), latex_escape(ours), *map(latex_escape, texts)]) + r" \\")
            if any(c.published is not None for c in rc):
                lines.append(" & ".join([*[""] * len(labs), r"\textit{published}",
                                         *(latex_escape(fmt(c.published, c.digits)) for c in rc)]) + r" \\")
                if not row_missing(rc):
                    lines.append(" & ".join([*[""] * len(labs), r"$\Delta$",
                                             *(latex_escape(fmt(c.delta, c.digits, signed=True)) for c in rc)]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\par\medskip"]
    cap = (f"{ctx.published_paper_short} {it.number} ({ctx.scale} scale): {it.title}. {it.metric}. Ours: mean ± std over seeds; "
           f"published as printed; Δ = ours − published.{mixed_note(ctx.provenance)}")
    lines += [r"\caption{" + latex_escape(cap) + "}", r"\label{tab:" + it.id.replace("/", "-") + "}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def compute_blocks(ctx: Context):
    return [(b, block_cells(ctx, b)) for b in ctx.item.blocks()]


@renderer("grid", grid_inputs)
def render_grid(ctx: Context) -> list:
    blocks = compute_blocks(ctx)
    md, csv_path, tex = ctx.path("md"), ctx.path("csv"), ctx.path("tex")
    write_text(md, render_markdown(ctx, blocks))
    header, rows = csv_rows(ctx, blocks)
    write_csv(csv_path, header, rows)
    write_text(tex, render_latex(ctx, blocks))
    return [md, csv_path, tex]

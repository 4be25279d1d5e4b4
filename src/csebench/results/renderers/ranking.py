"""A ranking figure for a study that compares methods (zoo/figure-1): the rows of a table item (its
layout's ``rows_of``), split into panels by the baseline each row is compared with (``baselines``:
panel title -> the baseline run; a row belongs to the panel whose title its label ends with), each
panel ranked by one metric. Each row is a point at its mean over seeds with a 95% confidence interval
(Student's t over the seeds; a single seed draws a point without one), and a dashed line marks the
panel's baseline. Companions: the ranks, means, intervals and seeds (Markdown, CSV).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from csebench.core.errors import ConfigError
from csebench.core.io import save_png, write_csv, write_text
from csebench.results.context import Context, Renderer
from csebench.results.plotting import placeholder, pyplot
from csebench.results.registry import load_registry
from csebench.results.runs import RunRef
from csebench.results.tables import DASH, Table, csv_number, fmt

LEVEL = 0.95


@dataclass
class Ranked:
    panel: str
    label: str
    run: str
    values: list[float]
    seeds: list[int]

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.values)) if self.values else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The two-sided 95% t interval of the mean over seeds; None with fewer than two seeds."""
        n = len(self.values)
        if n < 2:
            return None
        from scipy import stats

        half = float(stats.t.ppf(0.5 + LEVEL / 2, n - 1) * np.std(self.values, ddof=1) / math.sqrt(n))
        return self.mean - half, self.mean + half


def _layout(ctx: Context) -> tuple[str, list[dict], dict[str, str]]:
    lay = ctx.item.layout or {}
    missing = [k for k in ("metric", "rows_of", "baselines") if not lay.get(k)]
    if missing:
        raise ConfigError(f"{ctx.item.id}: a ranking figure's layout needs {', '.join(missing)} (csebench.results.renderers.ranking)")
    source = load_registry().item(lay["rows_of"])
    rows = [r for block in source.blocks() for r in block.get("rows") or [] if r.get("run")]
    return lay["metric"], rows, dict(lay["baselines"])


def _panel(label: str, baselines: dict[str, str]) -> str | None:
    return next((title for title in baselines if label.endswith(title)), None)


def _refs(ctx: Context) -> list[tuple[str, str, RunRef]]:
    """(panel, label, run) of every row whose run this scale has."""
    _, rows, baselines = _layout(ctx)
    out = []
    for row in rows:
        ref, panel = ctx.ref(row["run"]), _panel(row["label"], baselines)
        if ref is not None and panel is not None:
            out.append((panel, row["label"], ref))
    return out


def inputs(ctx: Context) -> list[str]:
    metric = _layout(ctx)[0]
    return [f for _, _, ref in _refs(ctx) for s in ctx.seeds(ref) for f in ctx.files(metric, ref, s)]


def ranked(ctx: Context) -> tuple[dict[str, list[Ranked]], list[RunRef]]:
    """(panel -> its rows with results, best mean first; the runs not yet run, left out of the panels)."""
    metric = _layout(ctx)[0]
    panels: dict[str, list[Ranked]] = {}
    not_run = []
    for panel, label, ref in _refs(ctx):
        values, seeds = ctx.values(metric, ref)
        if values:
            panels.setdefault(panel, []).append(Ranked(panel, label, ref.run, values, seeds))
        else:
            not_run.append(ref)
    return {p: sorted(rows, key=lambda r: -r.mean) for p, rows in panels.items()}, not_run


def _draw(ctx: Context, panels: dict[str, list[Ranked]], baselines: dict[str, str]) -> None:
    plt = pyplot()
    height = max(len(rows) for rows in panels.values())
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 1.0 + 0.38 * height), squeeze=False)
    for ax, (title, rows) in zip(axes[0], panels.items()):
        y = np.arange(len(rows))[::-1]
        for yi, r in zip(y, rows):
            ci = r.interval
            base = r.run == baselines[title]
            ax.errorbar(r.mean, yi, xerr=None if ci is None else [[r.mean - ci[0]], [ci[1] - r.mean]], fmt="s" if base else "o",
                        color="0.3" if base else "C0", capsize=3, markersize=5)
            if base:
                ax.axvline(r.mean, color="0.5", linestyle="--", linewidth=1)
        ax.set_yticks(y, [f"{r.label.removesuffix(title).rstrip(' -')} ({len(r.seeds)})" for r in rows])
        ax.set_title(title)
        ax.set_xlabel(f"{ctx.item.metric.split(',')[0]} (mean, {LEVEL:.0%} CI over seeds)")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"{ctx.paper_short} {ctx.item.number}: {ctx.item.title}" + (" (demo scale)" if ctx.scale == "demo" else ""),
                 fontsize=10)
    fig.tight_layout()
    save_png(fig, ctx.path("png"), footer=ctx.provenance, caveat=ctx.caveat)


def render(ctx: Context) -> list:
    _, _, baselines = _layout(ctx)
    panels, missing = ranked(ctx)
    png = ctx.path("png")
    if panels:
        _draw(ctx, panels, baselines)
    else:
        placeholder(png, ctx.provenance)
    table = Table(["Panel", "Rank", "Method", "Seeds", "Mean", f"{LEVEL:.0%} CI", "Δ baseline"], "llrrrrr")
    csv_rows = []
    for title, rows in panels.items():
        base = next((r for r in rows if r.run == baselines[title]), None)
        for rank, r in enumerate(rows, 1):
            ci = r.interval
            gain = None if base is None or r is base else r.mean - base.mean
            table.rows.append([title, str(rank), r.label, str(len(r.seeds)), fmt(r.mean),
                               DASH if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]", fmt(gain, signed=True)])
            csv_rows.append([ctx.item.id, ctx.scale, title, rank, r.run, r.label, " ".join(map(str, r.seeds)),
                             csv_number(r.mean), "" if ci is None else csv_number(ci[0]), "" if ci is None else csv_number(ci[1]),
                             csv_number(gain), ctx.caveat, ctx.provenance])
    not_run = [f"`{ref}`" for ref in missing]
    it = ctx.item
    md = [f"# {ctx.paper_short} {it.number}: {it.title}", "", it.shows, "", f"Metric: {it.metric}.", "", ctx.scale_note, "",
          f"![{it.number}]({png.name})", "", *(table.markdown() if panels else []), "",
          f"CI: Student's t interval of the mean over seeds ({DASH} with one seed). Δ baseline: the mean minus the "
          "panel's baseline (the dashed line).", ""]
    if not_run:
        md += ["Not yet run: " + ", ".join(not_run) + ".", ""]
    md += [ctx.provenance, "", *(f"- {n}" for n in it.notes)]
    write_text(ctx.path("md"), "\n".join(md).rstrip() + "\n")
    write_csv(ctx.path("csv"), ["item", "scale", "panel", "rank", "run", "label", "seeds", "mean", "ci_low", "ci_high",
                                "delta_baseline", "caveat", "provenance"], csv_rows)
    return [png, ctx.path("md"), ctx.path("csv")]


RENDERER = Renderer(inputs, render)

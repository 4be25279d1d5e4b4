"""The combinations study (registry file ``combinations.yaml``: a study of csebench's own, no paper's
item, no published values). Its table: one row per combination, the 7 STS tasks and Avg. (mean ± std
over seeds), the gain over SimCSE and over the better of the combination's single terms, each with
its paired test. Its figure: the term x term matrix of gains over SimCSE. The numbers are
csebench.results.combinations' (combination_grid, pairwise_gains); this module only writes them.
"""

from __future__ import annotations

import math

import numpy as np

from csebench.results.combinations import COLUMNS, CombinationRow, combination_grid, pairwise_gains, run_terms
from csebench.core.io import save_png, write_csv, write_text
from csebench.core.provenance import mixed_note
from csebench.core.stats import TestResult
from csebench.results.context import Context, Renderer
from csebench.results.plotting import placeholder, pyplot
from csebench.results.runs import RunRef
from csebench.results.tables import DASH, Table, csv_number, fmt, fmt_p, latex_escape, ours_text

STUDY = "A study of csebench's own beyond the papers (no paper prints these numbers): no published values."


def inputs(ctx: Context) -> list[str]:
    """sts.json (and sts_pairs.npz, for the one-seed bootstrap) of every evaluated, trained run."""
    suite = ctx.params.suites.get(ctx.suite())
    if suite is None:
        return []
    runs = run_terms(suite)
    return [f"{suite.run_dir(r, s, ctx.results)}/{name}"
            for r, s in suite.evaluated_jobs() if r in runs for name in ("sts.json", "sts_pairs.npz")]


def _grid(ctx: Context) -> tuple[list[CombinationRow], list[str]]:
    """(the rows evaluated so far, the runs not yet evaluated)."""
    suite = ctx.params.suites.get(ctx.suite())
    if suite is None:
        return [], []
    rows = combination_grid(suite, ctx.results, ctx.n_boot, missing_ok=True)
    done = {r.run for r in rows}
    return rows, [f"{suite.name}/{r}" for r in run_terms(suite) if r not in done]


def _p(test: TestResult | None) -> str:
    """A p cell: the value and its test (t: paired t-test over seeds, b: paired bootstrap over STS pairs)."""
    if test is None:
        return DASH
    if test.p_value is None:
        return "none"
    return f"{fmt_p(test.p_value)} ({'t' if test.test.startswith('paired t-test') else 'b'})"


def _gains(row: CombinationRow, rows: list[CombinationRow]) -> tuple[float | None, float | None]:
    """(mean Avg. − SimCSE's, mean Avg. − the better single term's)."""
    by_run = {r.run: r for r in rows}
    base = next(r for r in rows if not r.terms)
    best = by_run.get(row.best_single)
    return (None if row is base else row.mean[-1] - base.mean[-1]), (row.mean[-1] - best.mean[-1] if best else None)


def _header(ctx: Context) -> list[str]:
    it = ctx.item
    return [f"# {ctx.paper_short} {it.number}: {it.title}", "", STUDY, "", it.shows, "", f"Metric: {it.metric}.", "",
            ctx.scale_note, ""]


def _footer(ctx: Context, rows: list[CombinationRow], missing: list[str]) -> list[str]:
    out = []
    if not rows:
        out += ["Not yet run: nothing to compare before SimCSE's run is evaluated.", ""]
    if missing:
        out += ["Not yet run: " + ", ".join(f"`{m}`" for m in missing) + ".", ""]
    shared = [(r.run, note) for r in rows if (note := ctx.same_run("sts:Avg", RunRef(ctx.suite(), r.run)))]
    out += [f"`{ctx.suite()}/{run}`: {note} (trained once, docs/runs.md)." for run, note in shared]
    return out + ([""] if shared else []) + [ctx.provenance, ""] + [f"- {n}" for n in ctx.item.notes]


def render_table(ctx: Context) -> list:
    rows, missing = _grid(ctx)
    head = ["Combination", "Seeds", *COLUMNS, "Δ SimCSE", "p", "Δ better single", "p"]
    md, tex = Table(head, "lr" + "r" * (len(COLUMNS) + 4)), Table(list(map(latex_escape, head)), "lr" + "r" * (len(COLUMNS) + 4))
    csv_rows = []
    for r in rows:
        std = r.std if r.std is not None else [None] * len(COLUMNS)
        gain, over_best = _gains(r, rows)
        best = f" (vs {r.best_single})" if r.best_single else ""
        cells = [str(len(r.seeds)), *(ours_text(m, s) for m, s in zip(r.mean, std)),
                 fmt(gain, signed=True), _p(r.vs_simcse), fmt(over_best, signed=True) + best, _p(r.vs_best_single)]
        md.rows.append([f"**{r.label}**", *cells])
        tex.rows.append([latex_escape(r.label), *map(latex_escape, cells)])
        csv_rows.append([ctx.item.id, ctx.scale, r.run, r.label, " ".join(r.terms), " ".join(map(str, r.seeds)),
                         *map(csv_number, r.mean.tolist()), *map(csv_number, list(std)),
                         csv_number(gain), *_csv_test(r.vs_simcse), r.best_single or "", csv_number(over_best),
                         *_csv_test(r.vs_best_single), ctx.caveat, ctx.provenance])
    legend = "p: t = paired t-test over seeds, b = paired bootstrap over STS sentence pairs, none = neither possible."
    body = [*md.markdown(), "", legend, ""] if rows else []
    write_text(ctx.path("md"), "\n".join([*_header(ctx), *body, *_footer(ctx, rows, missing)]).rstrip() + "\n")
    write_csv(ctx.path("csv"), ["item", "scale", "run", "label", "terms", "seeds", *COLUMNS, *(f"{c} std" for c in COLUMNS),
                                "gain_vs_simcse", "p_vs_simcse", "test_vs_simcse", "better_single", "gain_vs_better_single",
                                "p_vs_better_single", "test_vs_better_single", "caveat", "provenance"], csv_rows)
    cap = (f"{ctx.paper_short} {ctx.item.number} ({ctx.scale} scale): {ctx.item.title}. {ctx.item.metric}. {STUDY} "
           f"{legend}" + (f" {ctx.caveat}" if ctx.caveat else "") + mixed_note(ctx.provenance))
    write_text(ctx.path("tex"), "\n".join([r"% Generated by csebench results; needs \usepackage{booktabs}.", "% " + ctx.provenance,
                                           r"\begin{table*}[t]", r"\centering", r"\small", *tex.latex(),
                                           r"\caption{" + latex_escape(cap) + "}", r"\label{tab:" + ctx.item.id.replace("/", "-") + "}",
                                           r"\end{table*}"]) + "\n")
    return [ctx.path("md"), ctx.path("csv"), ctx.path("tex")]


def _csv_test(test: TestResult | None) -> list:
    return ["", ""] if test is None else ["" if test.p_value is None else test.p_value, test.test]


def render_figure(ctx: Context) -> list:
    rows, missing = _grid(ctx)
    png = ctx.path("png")
    table, csv_rows = Table(["", "term"], "ll"), []
    if not rows:
        placeholder(png, ctx.provenance)
    else:
        terms, gains = pairwise_gains(rows)
        names = {r.terms[0]: r.label for r in rows if len(r.terms) == 1}
        labels = [names.get(t, t) for t in terms]
        _heatmap(ctx, labels, gains)
        table = Table(["gain over SimCSE", *labels], "l" + "r" * len(labels),
                      [[f"**{a}**", *(fmt(v, signed=True) for v in gains[i])] for i, a in enumerate(labels)])
        runs = {frozenset(r.terms): r.run for r in rows}
        csv_rows = [[a, b, runs.get(frozenset({terms[i], terms[j]}), ""), csv_number(float(gains[i, j])), ctx.caveat, ctx.provenance]
                    for i, a in enumerate(labels) for j, b in enumerate(labels) if j >= i]
    write_csv(ctx.path("csv"), ["term_a", "term_b", "run", "gain_vs_simcse", "caveat", "provenance"], csv_rows)
    md = [*_header(ctx), f"![{ctx.item.number}]({png.name})", "", *(table.markdown() if rows else []), "",
          *_footer(ctx, rows, missing)]
    write_text(ctx.path("md"), "\n".join(md).rstrip() + "\n")
    return [png, ctx.path("md"), ctx.path("csv")]


def _heatmap(ctx: Context, labels: list[str], gains: np.ndarray) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(labels), 1.2 + 1.1 * len(labels)))
    finite = gains[np.isfinite(gains)]
    span = max(float(np.abs(finite).max()) if finite.size else 1.0, 1e-6)
    im = ax.imshow(np.ma.masked_invalid(gains), cmap="RdBu", vmin=-span, vmax=span)  # blue: better than SimCSE
    ax.set_facecolor("0.92")  # a pair not run
    for (i, j), v in np.ndenumerate(gains):
        ax.text(j, i, "not run" if math.isnan(v) else fmt(float(v), signed=True), ha="center", va="center", fontsize=8,
                color="grey" if math.isnan(v) else "white" if abs(v) > 0.6 * span else "black")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    fig.colorbar(im, ax=ax, label="STS Avg. − SimCSE (points)")
    ax.set_title(f"{ctx.paper_short} {ctx.item.number}: gain over SimCSE" + (" (demo scale)" if ctx.scale == "demo" else ""))
    fig.tight_layout()
    save_png(fig, ctx.path("png"), footer=ctx.provenance, caveat=ctx.caveat)


def render(ctx: Context) -> list:
    return render_table(ctx) if ctx.item.kind == "table" else render_figure(ctx)


RENDERER = Renderer(inputs, render)

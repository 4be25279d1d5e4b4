"""Figures as the papers draw them, each with a Markdown/CSV companion holding the plotted numbers
and the values the paper printed (or stated in its text) beside them.

  sweep     performance against a swept value (GS-InfoNCE Fig. 2, SSCL Fig. 3a/3b): one line per
            series, ours mean ± std over seeds, published points as open markers (``published_from``
            names the table they come from when the figure itself prints none)
  curves    training loss and/or STS-B dev against steps (SSCL Fig. 6, DistillCSE Fig. 2); a series may
            set ``linestyle`` (e.g. "--") to tell pairs apart
  seeds     one model per seed: distribution per task and method (IS-CSE Fig. 5)
  analysis  a figure drawn by an analysis rule (alignment/uniformity, cosine densities, layer
            similarities, top-k negatives, teacher logits, token matrices), copied beside its data
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from csebench.core.io import atomic_path, save_png, write_csv, write_text
from csebench.core.paths import analysis_file, suite_dir
from csebench.results.context import Context, Renderer
from csebench.results.plotting import legend_or_empty, placeholder, plot_curve, pyplot
from csebench.results.runs import RunRef, dig, mean_std, read_json_cached, run_path
from csebench.results.tables import Table, csv_number, delta, fmt, rel


def _header(ctx: Context) -> list[str]:
    it = ctx.item
    return [f"# {ctx.paper_short} {it.number}: {it.title}", "", it.shows, "", f"Metric: {it.metric}.", "",
            ctx.scale_note, "", f"![{it.number}]({ctx.path('png').name})", ""]


def _published_text(ctx: Context) -> list[str]:
    if not ctx.item.published_text:
        return []
    out = ["Published (the paper's text; the figure itself prints no numbers):", ""]
    for p in ctx.item.published_text:
        out.append(f"- {p['what']}: **{p['value']}** — “{p['quote']}”")
    return out + [""]


def _finish_md(ctx: Context, lines: list[str]) -> None:
    lines += [ctx.provenance, ""]
    lines += _published_text(ctx)
    lines += [f"- {n}" for n in ctx.item.notes]
    write_text(ctx.path("md"), "\n".join(lines).rstrip() + "\n")


def _title(ctx: Context) -> str:
    return f"{ctx.paper_short} {ctx.item.number}" + (" (demo scale)" if ctx.scale == "demo" else "")


def _write_figure(ctx: Context, fig, header: list[str], rows: list[list], digits: int = 2) -> list:
    """The PNG (or an already written one when ``fig`` is None), its CSV and the Markdown page."""
    if fig is not None:
        save_png(fig, ctx.path("png"), footer=ctx.provenance, caveat=ctx.caveat)
    write_csv(ctx.path("csv"), header + ["caveat", "provenance"], [r + [ctx.caveat, ctx.provenance] for r in rows])
    table = Table(header, "l" * len(header), [[fmt(c, digits) if isinstance(c, float) else str(c) for c in r] for r in rows])
    md = _header(ctx) + table.markdown() + [""]
    _finish_md(ctx, md)
    return [ctx.path("png"), ctx.path("md"), ctx.path("csv")]


# ----------------------------------------------------------------------------------------- sweep

def _sweep_points(ctx: Context, compute: bool = True):
    lay = ctx.item.layout
    out = []
    for series in lay["series"]:
        pts = []
        for p in series["points"]:
            ref = ctx.ref(p["run"]) if p.get("run") else None
            vals, seeds = ctx.values(lay["metric"], ref) if (compute and ref) else ([], [])
            pts.append({"x": p["x"], "label": str(p.get("label", p["x"])), "run": ref, "values": vals, "seeds": seeds,
                        "published": p.get("published")})
        out.append((series, pts))
    return out


def sweep_inputs(ctx: Context) -> list[str]:
    return [f for _, pts in _sweep_points(ctx, compute=False) for p in pts if p["run"]
            for s in ctx.seeds(p["run"]) for f in ctx.files(ctx.item.layout["metric"], p["run"], s)]


def render_sweep(ctx: Context) -> list:
    lay = ctx.item.layout
    data = _sweep_points(ctx)
    source = f", from {lay['published_from']}" if lay.get("published_from") else ""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colors = plt.get_cmap("tab10")
    rows = []
    for i, (series, pts) in enumerate(data):
        xs = [p["x"] for p in pts]
        pos = list(range(len(xs))) if lay.get("categorical") else xs
        means = [mean_std(p["values"])[0] for p in pts]
        stds = [mean_std(p["values"])[1] or 0.0 for p in pts]
        ok = [j for j, m in enumerate(means) if m is not None]
        if ok:
            ax.errorbar([pos[j] for j in ok], [means[j] for j in ok], yerr=[stds[j] for j in ok], marker="o", ms=5,
                        capsize=3, color=colors(i), label=f"{series['label']} (ours)")
        pub = [(pos[j], p["published"]) for j, p in enumerate(pts) if p["published"] is not None]
        if pub:
            ax.plot(*zip(*pub), linestyle="--", marker="s", mfc="none", color=colors(i), alpha=0.8,
                    label=f"{series['label']} (published{source})")
        for p, m in zip(pts, means):
            sd = mean_std(p["values"])[1]
            rows.append([series["label"], p["label"], str(p["run"] or ""), len(p["values"]), csv_number(m), csv_number(sd),
                         "" if p["published"] is None else p["published"], csv_number(delta(m, p["published"]))])
        if lay.get("categorical"):
            ax.set_xticks(pos, [p["label"] for p in pts])
    ax.set(xlabel=lay.get("x_label", ""), ylabel=lay.get("y_label", ctx.item.metric))
    if lay.get("log_x"):
        ax.set_xscale("symlog", linthresh=0.5)
    ax.grid(alpha=0.3)
    legend_or_empty(ax)
    ax.set_title(_title(ctx))
    published = f"published (from {lay['published_from']})" if lay.get("published_from") else "published"
    return _write_figure(ctx, fig, ["series", "x", "run", "seeds", "ours_mean", "ours_std", published, "delta"], rows)


# ---------------------------------------------------------------------------------------- curves

def _curve_files(ctx: Context, ref: RunRef) -> list[tuple[int, str, str]]:
    dirs = [(s, run_path(ctx.results, ref, s)) for s in ctx.seeds(ref)]
    return [(s, f"{d}/train_curve.csv", f"{d}/dev_curve.csv") for s, d in dirs]


def curves_inputs(ctx: Context) -> list[str]:
    refs = [ctx.ref(s["run"]) for s in ctx.item.layout["series"]]
    return [f for r in refs if r for _, a, b in _curve_files(ctx, r) for f in (a, b)]


def render_curves(ctx: Context) -> list:
    lay = ctx.item.layout
    panels = lay.get("panels", ["loss", "stsb_dev"])
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4))
    axes = np.atleast_1d(axes)
    colors = plt.get_cmap("tab10")
    rows = []
    for i, series in enumerate(lay["series"]):
        ref = ctx.ref(series["run"])
        for k, (seed, train_f, dev_f) in enumerate(_curve_files(ctx, ref) if ref else []):
            for ax, panel in zip(axes, panels):
                f = train_f if panel == "loss" else dev_f
                if not Path(f).is_file():
                    continue
                drawn = plot_curve(ax, f, lay.get("loss_column", "loss") if panel == "loss" else "stsb_dev",
                                   color=colors(i), alpha=1.0 if k == 0 else 0.45, lw=1.4,
                                   linestyle=series.get("linestyle", "-"), marker="o" if panel != "loss" else None, ms=3,
                                   label=series["label"] if k == 0 else None)
                if drawn is not None and panel != "loss" and len(drawn[1]):
                    steps, y = drawn
                    best = int(np.nanargmax(y))
                    rows.append([series["label"], str(ref), seed, int(steps[best]), round(float(y[best]), 4),
                                 round(float(y[-1]), 4)])
    titles = {"loss": "training loss", "stsb_dev": "STS-B dev Spearman × 100"}
    for ax, panel in zip(axes, panels):
        ax.set(xlabel="training step", ylabel=lay.get("loss_label", titles["loss"]) if panel == "loss" else titles[panel])
        ax.grid(alpha=0.3)
        legend_or_empty(ax)
    fig.suptitle(_title(ctx))
    fig.tight_layout()
    return _write_figure(ctx, fig, ["series", "run", "seed", "best_step", "best_stsb_dev", "last_stsb_dev"], rows)


# ----------------------------------------------------------------------------------------- seeds

def seeds_inputs(ctx: Context) -> list[str]:
    refs = [r for s in ctx.item.layout["series"] if (r := ctx.ref(s["run"]))]
    return [f for r in refs for seed in ctx.seeds(r) for f in ctx.files("sts:Avg", r, seed)]


def render_seeds(ctx: Context) -> list:
    """Per task, the spread of each method's scores over its seeds (box + one dot per seed)."""
    lay = ctx.item.layout
    tasks = lay.get("tasks", ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "Avg"])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(tasks)), 4.2))
    colors = plt.get_cmap("tab10")
    n = len(lay["series"])
    width = 0.8 / max(n, 1)
    rows = []
    for i, series in enumerate(lay["series"]):
        ref = ctx.ref(series["run"])
        for t, task in enumerate(tasks):
            vals, seeds = ctx.values(f"sts:{task}", ref) if ref else ([], [])
            pos = t - 0.4 + width * (i + 0.5)
            if vals:
                ax.boxplot([vals], positions=[pos], widths=width * 0.8, patch_artist=True, showfliers=False,
                           boxprops={"facecolor": colors(i), "alpha": 0.35}, medianprops={"color": colors(i)})
                ax.scatter([pos] * len(vals), vals, s=9, color=colors(i), zorder=3,
                           label=series["label"] if t == 0 else None)
            m, sd = mean_std(vals)
            rows.append([series["label"], str(ref), task, len(vals), csv_number(m), csv_number(sd),
                         "" if not vals else round(min(vals), 4), "" if not vals else round(max(vals), 4)])
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("Spearman × 100")
    ax.grid(alpha=0.3, axis="y")
    legend_or_empty(ax)
    ax.set_title(_title(ctx))
    return _write_figure(ctx, fig, ["method", "run", "task", "seeds", "mean", "std", "min", "max"], rows)


# -------------------------------------------------------------------------------------- analysis

def _analysis_files(ctx: Context) -> tuple[str, list[str]]:
    """(the source figure, the data files) of an analysis figure, under the (mapped) suite."""
    lay = ctx.item.layout
    suite = ctx.suite()
    fig = f"{suite_dir(ctx.results, suite)}/{lay['source']}"
    data = [f"{suite_dir(ctx.results, suite)}/{d}" for d in lay.get("data", [])]
    return fig, data


def analysis_inputs(ctx: Context) -> list[str]:
    fig, data = _analysis_files(ctx)
    return [fig, *data]


def render_analysis(ctx: Context) -> list:
    fig, data = _analysis_files(ctx)
    png = ctx.path("png")
    if Path(fig).is_file():
        with atomic_path(png) as tmp:
            shutil.copyfile(fig, tmp)
    else:
        placeholder(png)
    lines = _header(ctx)
    lines += [f"Drawn by the `{ctx.item.layout.get('analysis', 'analysis')}` analysis (docs/analyses.md); "
              f"source: `{rel(fig, ctx.out_dir)}`" + (", data: " + ", ".join(f"`{rel(d, ctx.out_dir)}`" for d in data) if data else "") + ".", ""]
    values = ctx.item.layout.get("values") or []
    if values:
        lines += ["| quantity | ours | published |", "|---|---:|---:|"]
        rows = []
        for v in values:
            path = f"{ctx.results}/{ctx.suite()}/{v['file']}"
            got = dig(read_json_cached(path) or {}, v["path"])
            ours = fmt(float(got), v.get("digits", 4)) if isinstance(got, (int, float)) else "not yet run"
            lines.append(f"| {v['label']} | {ours} | {fmt(v.get('published'))} |")
            rows.append([v["label"], "" if not isinstance(got, (int, float)) else got, v.get("published", "")])
        write_csv(ctx.path("csv"), ["quantity", "ours", "published", "caveat", "provenance"],
                  [r + [ctx.caveat, ctx.provenance] for r in rows])
        lines.append("")
    else:
        write_csv(ctx.path("csv"), ["source", "data", "caveat", "provenance"], [[fig, " ".join(data), ctx.caveat, ctx.provenance]])
    _finish_md(ctx, lines)
    return [png, ctx.path("md"), ctx.path("csv")]


# ------------------------------------------------------------------------- per-model analyses

MODEL_ANALYSES = {"align_uniform", "cosine_dist", "layers", "token_matrix"}


def _model_analysis_files(ctx: Context) -> list[tuple[str, RunRef, str]]:
    """(label, run, analysis JSON of its first seed) per series whose run exists at this scale."""
    name = ctx.item.layout["analysis"]
    out = []
    for s in ctx.item.layout["series"]:
        ref = ctx.ref(s["run"])
        if ref is not None:
            seed = ctx.seeds(ref)[0]
            out.append((s["label"], ref, analysis_file(ctx.results, ref.suite, name, ref.run, seed)))
    return out


def model_analysis_inputs(ctx: Context) -> list[str]:
    files = [f for _, _, f in _model_analysis_files(ctx)]
    if ctx.item.layout["analysis"] == "align_uniform":  # colour = average STS
        files += [f for _, r, _ in _model_analysis_files(ctx) for f in ctx.files("sts:Avg", r, ctx.seeds(r)[0])]
    return files


def render_model_analysis(ctx: Context) -> list:
    """A per-model analysis of several runs in one figure, drawn by csebench.results.analysis_plots (the same
    functions as `csebench analyze-figure`), with the plotted summary numbers beside it."""
    from csebench.results import analysis_plots

    name = ctx.item.layout["analysis"]
    models = {label: read_json_cached(f) for label, _, f in _model_analysis_files(ctx)}
    models = {k: v for k, v in models.items() if v is not None}
    title = _title(ctx)
    png = ctx.path("png")
    rows = []
    if not models:
        placeholder(png)
    elif name == "align_uniform":
        points = []
        for label, ref, f in _model_analysis_files(ctx):
            res = models.get(label)
            if res is None:
                continue
            sts = ctx.value("sts:Avg", ref, ctx.seeds(ref)[0])
            points.append({"label": label, "alignment": res["alignment"], "uniformity": res["uniformity"], "sts_avg": sts})
            rows.append([label, str(ref), round(res["alignment"], 4), round(res["uniformity"], 4), "" if sts is None else round(sts, 2)])
        analysis_plots.plot_align_uniform(points, png, title=title, footer=ctx.figure_caption())
    else:
        if name == "token_matrix":  # one JSON per model: draw them side by side
            models = {label: next(iter(res["models"].values())) for label, res in models.items()}
            analysis_plots.plot_token_matrices({"models": models}, png, title=title, footer=ctx.figure_caption())
        else:
            {"cosine_dist": analysis_plots.plot_cosine_dist, "layers": analysis_plots.plot_layers}[name](models, png, title=title,
                                                                                   footer=ctx.figure_caption())
        for label, res in models.items():
            rows.append([label, "", *(round(float(v), 4) for v in _summary(name, res))])
    header = {"align_uniform": ["model", "run", "alignment", "uniformity", "STS avg"],
              "cosine_dist": ["model", "run", "Spearman"],
              "layers": ["model", "run", "last adjacent-layer similarity", "last-layer TokSim"],
              "token_matrix": ["model", "run", "mean off-diagonal token cosine"]}[name]
    return _write_figure(ctx, None, header, rows, digits=4)


def _summary(name: str, res: dict) -> list[float]:
    if name == "cosine_dist":
        return [res.get("spearman", float("nan"))]
    if name == "layers":
        inter = res.get("inter_layer") or {}
        tok = res.get("toksim") or {}
        last = lambda d: float(d[sorted(d, key=lambda k: int(str(k).split("-")[-1]))[-1]]) if d else float("nan")  # noqa: E731
        return [last(inter), last(tok)]
    if name == "token_matrix":
        m = np.asarray(res["matrix"], dtype=float)
        off = m[~np.eye(len(m), dtype=bool)]
        return [float(off.mean()) if off.size else float("nan")]
    return []


SWEEP = Renderer(sweep_inputs, render_sweep)
CURVES = Renderer(curves_inputs, render_curves)
SEEDS = Renderer(seeds_inputs, render_seeds)
ANALYSIS = Renderer(analysis_inputs, render_analysis)
MODEL_ANALYSIS = Renderer(model_analysis_inputs, render_model_analysis)

"""The report of one suite: for every (backbone, run) its mean ± std over the seeds present, the
published rows bound to it beside it with Δ = ours − published, and a paired test against SimCSE on
the same backbone (csebench.core.stats): a per-seed paired t-test when both have >= 2 common seeds,
otherwise (STS only) a paired bootstrap over sentence pairs from the per-pair similarities written
by ``eval-sts --pairs-out``. Written as STS and transfer tables (Markdown, CSV, LaTeX), the training
curves, the STS average figure and the suite's README.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from csebench.core.io import save_png, write_csv, write_text
from csebench.core.provenance import mixed_note, summary_line
from csebench.core.stats import TestResult, paired_bootstrap_sts, paired_ttest
from csebench.results.pages import suite_readme
from csebench.results.plotting import plot_curve, pyplot, placeholder
from csebench.results.published import Published, for_run
from csebench.results.context import Context, Renderer
from csebench.results.runs import (KINDS, RunResult, caveat_line, mean_std, read_json_cached, same_run_text,
                                   seed_of_folder)
from csebench.results.tables import DASH, Table, csv_number, delta, fmt, fmt_p, latex_escape, ours_text

log = logging.getLogger(__name__)

BASELINE_METHOD = "simcse"


def records(ctx: Context, kind: str) -> list[RunResult]:
    """The ``kind`` result of every evaluated run and seed of the suite that exists, its identity
    (suite, run, seed) from params.yaml, method and backbone from run_info (else params.yaml)."""
    suite, out = ctx.params.suite(_suite(ctx)), []
    for run, seed in suite.evaluated_jobs():
        r = RunResult.from_disk(f"{suite.run_dir(run, seed, ctx.results)}/{kind}.json", kind)
        if r is not None:
            spec = suite.run(run)
            r.info.update(suite=suite.name, name=run, seed=seed)
            for key in ("method", "backbone"):
                r.info[key] = r.info.get(key) or spec[key]
            out.append(r)
    return out


def _suite(ctx: Context) -> str:
    return ctx.item.suites[0]


@dataclass
class Row:
    backbone: str
    backbone_label: str
    method: str
    method_label: str
    run: str
    seeds: list[int]
    per_seed: np.ndarray                # (n_seeds, n_tasks + 1), NaN where missing
    records: list[RunResult]
    published: list[Published] = field(default_factory=list)
    test: TestResult | None = None
    is_baseline: bool = False
    same_run: str = ""  # "same run as S/R" where the suite's view shows another suite's run (docs/runs.md)

    @property
    def mean(self) -> np.ndarray:
        return mean_std(self.per_seed)[0]

    @property
    def std(self) -> np.ndarray | None:
        return mean_std(self.per_seed)[1]

    def avg_by_seed(self) -> dict[int, float]:
        return {s: float(v) for s, v in zip(self.seeds, self.per_seed[:, -1]) if not math.isnan(v)}


def group_rows(records: list[RunResult], kind: str = "sts", suite: str = "") -> list[Row]:
    """Group runs by (backbone, run name), seeds sorted; SimCSE first within each backbone; each with
    the published rows the registry binds to it."""
    k = KINDS[kind]
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in records:
        groups.setdefault((r.info["backbone"], r.info["name"]), []).append(r)
    backbone_order = list(dict.fromkeys(r.info["backbone"] for r in records))
    rows = []
    for (backbone, name), runs in groups.items():
        runs = sorted(runs, key=lambda r: r.info["seed"])
        per_seed = np.array([[_nan(r.score(t)) for t in k.tasks] + [_nan(r.avg)] for r in runs], dtype=float)
        first, seeds = runs[0].info, [r.info["seed"] for r in runs]
        rows.append(Row(backbone, first.get("backbone_label") or backbone, first["method"],
                        first.get("method_label") or first["method"], name, seeds, per_seed, runs,
                        for_run(kind, first.get("suite") or suite, name),
                        same_run=same_run_text({r.info["seed"]: r.same_run_as for r in runs}, seeds)))
    rows.sort(key=lambda r: (backbone_order.index(r.backbone), r.method != BASELINE_METHOD,
                             r.run != BASELINE_METHOD))
    return rows


def _nan(x) -> float:
    return float("nan") if x is None else float(x)


def provenance_line(rows: list[Row]) -> str:
    """The footer of a table or figure drawn from these rows: the provenance of every result file
    (evaluation, embeddings table, training) behind them."""
    return summary_line([b for row in rows for rec in row.records for b in rec.provenance or [None]])


# --------------------------------------------------------------------------------------------
# significance

def baseline_of(rows: list[Row], row: Row) -> Row | None:
    cands = [r for r in rows if r.backbone == row.backbone and r.method == BASELINE_METHOD]
    return next((r for r in cands if r.run == BASELINE_METHOD), cands[0] if cands else None)


def add_significance(rows: list[Row], kind: str = "sts", n_boot: int = 1000) -> None:
    """Attach to each row its paired test against SimCSE on the same backbone (on the average)."""
    for row in rows:
        base = baseline_of(rows, row)
        if base is None:
            row.test = TestResult("none", None, None, 0, {"reason": "no SimCSE run on this backbone"})
            continue
        if base is row:
            row.is_baseline = True
            continue
        a, b = row.avg_by_seed(), base.avg_by_seed()
        if len(set(a) & set(b)) >= 2:
            row.test = paired_ttest(a, b)
        elif kind == "sts":
            row.test = _bootstrap(row, base, n_boot)
        else:
            row.test = TestResult("none", None, None, 0, {"reason": "fewer than 2 common seeds (no per-item bootstrap for transfer)"})


def _bootstrap(row: Row, base: Row, n_boot: int) -> TestResult:
    from csebench.evaluation.sts import TEST_TASKS, load_pairs

    common = sorted(set(row.seeds) & set(base.seeds))
    ra = next((r for r in row.records if common and r.info["seed"] == common[0]), row.records[0])
    rb = next((r for r in base.records if common and r.info["seed"] == common[0]), base.records[0])
    if not (ra.pairs_path and rb.pairs_path):
        return TestResult("none", None, None, 0, {"reason": "fewer than 2 common seeds and no per-pair similarities (eval-sts --pairs-out)"})
    try:
        res = paired_bootstrap_sts(load_pairs(ra.pairs_path), load_pairs(rb.pairs_path), TEST_TASKS, n_boot=n_boot)
    except (ValueError, OSError, KeyError) as exc:  # e.g. evaluated on different SentEval copies
        log.warning("paired bootstrap %s vs %s skipped: %s", row.run, base.run, exc)
        return TestResult("none", None, None, 0, {"reason": f"bootstrap impossible: {exc}"})
    res.detail.update({"seed_method": ra.info["seed"], "seed_baseline": rb.info["seed"]})
    return res


def test_cells(row: Row) -> tuple[str, str]:
    """(p cell, test cell) of a row."""
    t = row.test
    if row.is_baseline:
        return "baseline", DASH
    if t is None or t.p_value is None:
        return DASH, "none: " + (t.detail.get("reason", "") if t else "not computed")
    if t.test.startswith("paired t-test"):
        return fmt_p(t.p_value), f"paired t-test, {t.n} seeds"
    return fmt_p(t.p_value), f"paired bootstrap, {t.n} resamples"


# --------------------------------------------------------------------------------------------
# tables: per row its ours line, then per published row the published line and Δ

def _lines(rows: list[Row]):
    """(kind, row, published row or None, values) per line, in table order."""
    for row in rows:
        yield "ours", row, None, row.mean.tolist()
        for pub in row.published:
            yield "published", row, pub, pub.values
            yield "delta", row, pub, [delta(m, v) for m, v in zip(row.mean.tolist(), pub.values)]


def _pub_source(pub: Published) -> tuple[str, str, str]:
    """(sources, each with its source kind unless the paper's own text; row label; note) of a published row."""
    return pub.source_text, pub.label, pub.note


def protocol_notes(records: list[RunResult]) -> list[str]:
    """The notes of results scored off the papers' protocol: the capped-evaluation caveat with its numbers of pairs
    or items (CPU demo caps), then the distinct warnings of results switched off (transfer: false)."""
    return ([c] if (c := caveat_of(records)) else []) + sorted({r.warning for r in records if r.protocol == "off" and r.warning})


def caveat_of(records: list[RunResult]) -> str:
    """The capped-evaluation caveat of these results (csebench.results.runs.caveat_line), "" for the full protocol."""
    return caveat_line(read_json_cached(r.path) for r in records)


def render_markdown(rows: list[Row], kind: str, suite: str, notes: list[str] | None = None) -> str:
    k = KINDS[kind]
    t = Table(["Backbone", "Method", "Run", "Seeds", *k.columns, "Avg.", "p", "Paired test"],
              "llll" + "r" * (len(k.columns) + 1) + "rl")
    for kind_, row, pub, values in _lines(rows):
        if kind_ == "ours":
            std = row.std.tolist() if row.std is not None else [None] * len(values)
            run = row.run + (f" ({row.same_run})" if row.same_run else "")
            t.rows.append([f"**{row.backbone_label}**", f"**{row.method_label}**", run, str(len(row.seeds)),
                           *(ours_text(m, s) for m, s in zip(values, std)), *test_cells(row)])
        elif kind_ == "published":
            source, label, note = _pub_source(pub)
            t.rows.append(["", f"↳ published: {source}", f"“{label}”" + (f" ({note})" if note else ""), "",
                           *(fmt(v) for v in values), "", ""])
        else:
            t.rows.append(["", "↳ Δ ours − published", "", "", *(fmt(v, signed=True) for v in values), "", ""])
    body = "\n".join(t.markdown())
    return (f"# {k.title}: suite `{suite}`\n\n"
            f"Scores: {k.unit}. Ours: mean ± sample std over the seeds present (no ± with one seed). "
            f"Published rows are printed as in the papers (source table named, with its source kind where the values "
            f"were not read in the paper's own text: the authors' README or notebook, or a third-party reprint); "
            f"Δ = ours − published.\n"
            f"p: two-sided paired test of the average against SimCSE on the same backbone "
            f"(per-seed paired t-test with ≥ 2 common seeds, else a paired bootstrap over STS sentence pairs).\n\n"
            + "".join(f"**Demo scale:** {n.rstrip('.')}.\n\n" for n in notes or [])
            + ("A run \"same run as S/R\" is suite S's run R: trained and evaluated once, shown here under this "
               "suite's name (docs/runs.md).\n\n" if any(r.same_run for r in rows) else "")
            + f"{body}\n\n{provenance_line(rows)}\n")


def render_csv_rows(rows: list[Row], kind: str, suite: str) -> tuple[list[str], list[list]]:
    k = KINDS[kind]
    cols = [*k.columns, "Avg."]
    header = ["suite", "backbone", "method", "run", "kind", "source", "source_kind", "seeds", *cols, *[f"{c} std" for c in cols],
              "p_vs_simcse", "test", "published_row", "note", "same_run_as", "caveat", "provenance"]
    footer = provenance_line(rows)  # columns, not footer rows: CSV readers see a table and nothing else
    caveats = {(r.run, r.backbone): caveat_of(r.records) for r in rows}  # each row's own: its runs' result files
    out = []
    for kind_, r, pub, values in _lines(rows):
        ours = kind_ == "ours"
        stds = (r.std.tolist() if ours and r.std is not None else [None] * len(cols))
        source, label, note = ("; ".join(pub.sources), pub.label, pub.note) if pub else ("ours", "", "")
        source_kind = "; ".join(pub.kinds) if pub else ""
        if kind_ == "delta":  # the published line names the row
            label = note = ""
        p = f"{r.test.p_value:.6g}" if ours and r.test is not None and r.test.p_value is not None else ""
        test = r.test.test if (ours and r.test is not None) else ("baseline" if ours and r.is_baseline else "")
        caveat = "" if kind_ == "published" else caveats[r.run, r.backbone]  # a published line is the paper's numbers
        out.append([suite, r.backbone, r.method, r.run, kind_, source, source_kind, len(r.seeds) if ours else "",
                    *map(csv_number, values), *map(csv_number, stds), p, test, label, note, r.same_run if ours else "",
                    caveat, footer])
    return header, out


def render_latex(rows: list[Row], kind: str, suite: str) -> str:
    k = KINDS[kind]
    footer = provenance_line(rows)
    t = Table(["Backbone", "Method", *map(latex_escape, k.columns), "Avg.", "$p$"], "ll" + "r" * (len(k.columns) + 1) + "l")
    prev_backbone = None
    for kind_, row, pub, values in _lines(rows):
        if kind_ == "ours":
            if prev_backbone is not None and row.backbone_label != prev_backbone:
                t.rows.append(None)
            prev_backbone = row.backbone_label
            method = row.method_label + (f" ({row.run})" if row.run not in (row.method, row.method_label) else "")
            std = row.std.tolist() if row.std is not None else [float("nan")] * len(values)
            cells = [latex_escape(fmt(m)) + (rf"$_{{\pm {s:.2f}}}$" if not math.isnan(s) else "") for m, s in zip(values, std)]
            p = latex_escape(test_cells(row)[0]).replace("<", "$<$")
            if row.test is not None and row.test.p_value is not None:  # which test: t = paired t-test, b = paired bootstrap
                p += "$^{t}$" if row.test.test.startswith("paired t-test") else "$^{b}$"
            ours = f" (ours, n={len(row.seeds)}" + (f"; {row.same_run})" if row.same_run else ")")
            t.rows.append([latex_escape(row.backbone_label), latex_escape(method + ours), *cells, p])
        elif kind_ == "published":
            t.rows.append(["", r"\quad\textit{" + latex_escape(_pub_source(pub)[0]) + "}", *(latex_escape(fmt(v)) for v in values), ""])
        else:
            t.rows.append(["", r"\quad $\Delta$ ours$-$published", *(latex_escape(fmt(v, signed=True)) for v in values), ""])
    caption = (f"{k.title} ({k.unit}), suite {suite}. Ours: mean ± std over seeds; published rows as printed in the named "
               "table; Δ = ours − published; p: paired test of the average against SimCSE on the same backbone "
               "(t: paired t-test over seeds, with ≥ 2 common seeds; b: paired bootstrap over STS sentence pairs)."
               + (f" {caveat}" if (caveat := caveat_of([rec for row in rows for rec in row.records])) else "")
               + mixed_note(footer))
    lines = [r"% Generated by csebench results; needs \usepackage{booktabs}.", "% " + footer,
             r"\begin{table*}[t]", r"\centering", r"\small", *t.latex(),
             r"\caption{" + latex_escape(caption) + "}",
             r"\label{tab:" + latex_escape(f"{kind}-{suite}").replace("\\_", "-") + "}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def write_tables(records: list[RunResult], out_dir: str | os.PathLike, kind: str = "sts", suite: str = "",
                 n_boot: int = 1000) -> list[Row]:
    """Write ``{kind}.md``, ``{kind}.csv`` and ``{kind}.tex`` into ``out_dir``; return the rows."""
    suite = suite or (records[0].info.get("suite") if records else "") or ""
    rows = group_rows(records, kind, suite)
    add_significance(rows, kind, n_boot=n_boot)
    out_dir = Path(out_dir)
    write_text(out_dir / f"{kind}.md", render_markdown(rows, kind, suite, protocol_notes(records)))
    header, csv_rows = render_csv_rows(rows, kind, suite)
    write_csv(out_dir / f"{kind}.csv", header, csv_rows)
    write_text(out_dir / f"{kind}.tex", render_latex(rows, kind, suite))
    return rows


# --------------------------------------------------------------------------------------------
# figures

def _run_label(path: Path) -> str:
    seed = seed_of_folder(path.parent)
    return f"{path.parent.parent.name} (seed {seed})" if seed is not None else path.parent.name


def plot_curves(curve_files: list[str | os.PathLike], out_png: str | os.PathLike, suite: str = "", footer: str = "") -> bool:
    """One PNG: training loss (left) and STS-B dev Spearman x100 (right) against step, a line per run/seed; under it
    the caveat of dev scores on capped dev sets (train.json beside the curves: training.dev_max_pairs)."""
    train = [Path(f) for f in curve_files if Path(f).name == "train_curve.csv" and Path(f).is_file()]
    dev = [Path(f) for f in curve_files if Path(f).name == "dev_curve.csv" and Path(f).is_file()]
    if not train and not dev:
        return False
    plt = pyplot()
    runs = sorted({f.parent.parent.name for f in train + dev})
    cmap = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20")
    run_color = {r: cmap(i % cmap.N) for i, r in enumerate(runs)}
    seeds = sorted({f.parent.name for f in train + dev})
    dashes = ["-", "--", ":", "-."]
    style = {s: dashes[i % len(dashes)] for i, s in enumerate(seeds)}  # colour = run, line style = seed

    def look(f: Path) -> dict:
        return {"color": run_color[f.parent.parent.name], "linestyle": style[f.parent.name], "label": _run_label(f), "lw": 1.3}
    fig, (ax_l, ax_d) = plt.subplots(1, 2, figsize=(12, 4.5))
    for f in sorted(train):
        plot_curve(ax_l, f, "loss", first_other=True, **look(f))
    for f in sorted(dev):
        plot_curve(ax_d, f, "stsb_dev", marker="o", ms=3, **look(f))
    ax_l.set(xlabel="training step", ylabel="training loss (cross-entropy, nats)", title="Training loss")
    ax_d.set(xlabel="training step", ylabel="STS-B dev Spearman × 100", title="STS-B development score")
    for ax in (ax_l, ax_d):
        ax.grid(alpha=0.3)
    handles, labs = ax_d.get_legend_handles_labels()
    if not handles:
        handles, labs = ax_l.get_legend_handles_labels()
    fig.legend(handles, labs, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="run (seed)")
    fig.suptitle(f"Training curves — suite {suite}" if suite else "Training curves")
    fig.tight_layout()
    caveat = caveat_line(read_json_cached(f.with_name("train.json")) for f in dev)
    save_png(fig, out_png, dpi=120, footer=footer, caveat=caveat)
    return True


def plot_summary(rows: list[Row], out_png: str | os.PathLike, suite: str = "", kind: str = "sts") -> bool:
    """Horizontal bars: our average per backbone x run (mean, ± std, one dot per seed), published averages as diamonds."""
    rows = [r for r in rows if not math.isnan(r.mean[-1])]
    if not rows:
        return False
    plt = pyplot()
    k = KINDS[kind]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(rows)))
    y = np.arange(len(rows))[::-1]
    std = [0.0 if r.std is None else float(r.std[-1]) for r in rows]
    ax.errorbar([r.mean[-1] for r in rows], y, xerr=std, fmt="o", ms=8, color="#2b5d8a", capsize=4,
                label="ours: mean ± std over seeds", zorder=3)
    seeds_labelled = False
    for yi, r in zip(y, rows):
        if len(r.seeds) > 1:
            ax.scatter(r.per_seed[:, -1], [yi - 0.18] * len(r.seeds), s=10, color="#7aa6d6", zorder=2,
                       label=None if seeds_labelled else "ours: one seed")
            seeds_labelled = True
    pub_labelled = False
    for yi, r in zip(y, rows):
        for p in r.published:
            if p.values[-1] is not None:
                ax.scatter([p.values[-1]], [yi], marker="D", s=36, color="black", zorder=4,
                           label=None if pub_labelled else "published Avg. (sources in the table)")
                pub_labelled = True
    ax.set_yticks(y, [f"{r.backbone_label} · {r.run}" + (f" (n={len(r.seeds)})" if len(r.seeds) > 1 else "") for r in rows])
    xs = [float(v) for r in rows for v in r.per_seed[:, -1] if not math.isnan(v)]
    xs += [p.values[-1] for r in rows for p in r.published if p.values[-1] is not None]
    ax.set_xlim(min(xs) - 2, max(xs) + 2)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"average over the 7 {'STS' if kind == 'sts' else 'transfer'} tasks ({k.unit})")
    ax.set_title(f"{k.title}: average per run" + (f" — suite {suite}" if suite else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    save_png(fig, out_png, dpi=120, footer=provenance_line(rows), caveat=caveat_of([rec for r in rows for rec in r.records]))
    return True


def glance_rows(rows: list[Row]) -> list[list[str]]:
    """The README's "STS average at a glance": per row ours, the published averages and p."""
    out = []
    for r in rows:
        pub = "; ".join(f"{fmt(p.values[-1])} ({p.source_text})" for p in r.published if p.values[-1] is not None) or DASH
        std = r.std[-1] if r.std is not None else None
        out.append([r.backbone_label, r.run, str(len(r.seeds)), ours_text(r.mean[-1], std), pub, test_cells(r)[0]])
    return out


def suite_inputs(ctx: Context) -> list[str]:
    """sts.json, sts_pairs.npz and transfer.json of every evaluated run and seed, the curves of all."""
    suite = ctx.params.suite(_suite(ctx))
    evaluated = [suite.run_dir(r, s, ctx.results) for r, s in suite.evaluated_jobs()]
    every = [suite.run_dir(r, s, ctx.results) for r, s in suite.jobs()]
    return [f"{d}/{name}" for name, dirs in (("sts.json", evaluated), ("sts_pairs.npz", evaluated), ("transfer.json", evaluated),
                                             ("train_curve.csv", every), ("dev_curve.csv", every)) for d in dirs]


def render_suite(ctx: Context) -> list[Path]:
    """The STS and transfer tables, the STS average and training-curve figures (a "not yet run"
    placeholder where there is nothing to draw) and the README linking them and ``ctx.links``
    (analysis figures and tables)."""
    suite, out = _suite(ctx), ctx.out_dir
    rows = {kind: write_tables(records(ctx, kind), out / "tables", kind, suite, ctx.n_boot) for kind in ("sts", "transfer")}
    footer = provenance_line([r for kind_rows in rows.values() for r in kind_rows])
    summary, curves = out / "figures" / "sts_avg.png", out / "figures" / "training_curves.png"
    figs = [summary] if plot_summary(rows["sts"], summary, suite) else []
    if plot_curves([f for f in suite_inputs(ctx) if f.endswith("_curve.csv")], curves, suite, footer):
        figs.append(curves)
    for png in (summary, curves):
        if png not in figs:
            placeholder(png, footer)
    links = [Path(f) for f in ctx.links if Path(f).is_file()]
    figs += [f for f in links if f.suffix == ".png" and f not in figs]
    tables = {kind: (KINDS[kind], [out / "tables" / f"{kind}.{e}" for e in ("md", "csv", "tex")]) for kind in rows}
    suite_readme(out / "README.md", suite, tables, figs, glance_rows(rows["sts"]), footer,
                 ctx.params.suite(suite).description, [f for f in links if f.suffix == ".md"],
                 caveat_of([rec for r in rows["sts"] for rec in r.records]))
    return [*(f for _, files in tables.values() for f in files), curves, summary, out / "README.md"]


RENDERER = Renderer(suite_inputs, render_suite)

"""Aggregate run outputs into the papers' tables (Markdown, CSV, LaTeX), curves and a README index.

For every (backbone, run) of a suite: our mean +- std over the seeds present, each published row of
the four papers for that backbone/method beside it (``resources/published.yaml``), the difference
ours - published, and a paired test against SimCSE on the same backbone (``csebench.stats``):
a per-seed paired t-test when both have >= 2 common seeds, otherwise (STS only) a paired bootstrap
over sentence pairs from the per-pair similarities written by ``eval-sts --pairs-out``.
"""

from __future__ import annotations

import csv
import importlib.resources
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .schema import load_yaml_text
from .evaluation.sts import TABLE_NAMES, TEST_TASKS
from .io import read_json, save_png, write_csv, write_text
from .provenance import blocks_of, mixed_note, summary_line
from .stats import TestResult, paired_bootstrap_sts, paired_ttest

log = logging.getLogger(__name__)

TRANSFER_TASKS = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
BASELINE_METHOD = "simcse"


@dataclass(frozen=True)
class Kind:
    name: str                 # "sts" | "transfer"
    tasks: list[str]          # keys in the run JSON
    columns: list[str]        # printed column names (= keys in published.yaml), without the average
    title: str
    unit: str


KINDS = {
    "sts": Kind("sts", TEST_TASKS, [TABLE_NAMES[t] for t in TEST_TASKS],
                "STS test sets", "Spearman correlation x 100, \"all\" setting"),
    "transfer": Kind("transfer", TRANSFER_TASKS, TRANSFER_TASKS,
                     "SentEval transfer tasks", "classification accuracy (%)"),
}
STS_COLUMNS = KINDS["sts"].columns + ["Avg."]


# --------------------------------------------------------------------------------------------
# published numbers

def load_published() -> dict:
    text = importlib.resources.files("csebench").joinpath("resources/published.yaml").read_text(encoding="utf-8")
    return load_yaml_text(text, "resources/published.yaml")


def published_for(kind: str, backbone: str, method: str, run: str | None = None, published: dict | None = None) -> list[dict]:
    """Published entries for a run (rules in the header of published.yaml).

    Backbone: equal, or the published one is a prefix (``bert-base-avg`` -> ``bert-base``). Then the
    entries whose ``runs`` patterns match the run name, else those whose method is the run name,
    else those without ``runs`` whose method is the run's method.
    """
    entries = [e for e in (published or load_published()).get(kind, [])
               if backbone == e["backbone"] or backbone.startswith(e["backbone"] + "-")]
    if run is not None:
        by_pattern = [e for e in entries if any(re.fullmatch(p, run) for p in e.get("runs", []))]
        by_name = [e for e in entries if e["method"] == run]
        if by_pattern or by_name:
            return by_pattern or by_name
    return [e for e in entries if e["method"] == method and not e.get("runs")]


def published_sts(backbone: str, method: str) -> list[dict]:
    return published_for("sts", backbone, method)


def _source(entry: dict, papers: dict) -> str:
    p = papers.get(entry["paper"], {})
    short = {"is-cse": "IS-CSE", "gs-infonce-v2": "GS-InfoNCE v2", "gs-infonce-v1": "GS-InfoNCE v1",
             "sscl": "SSCL", "distillcse": "DistillCSE"}.get(entry["paper"], p.get("title", entry["paper"]))
    return f"{short} {entry['table']}"


def merge_published(entries: list[dict], papers: dict, columns: list[str]) -> list[dict]:
    """Entries with identical printed scores become one row naming all their sources."""
    merged: list[dict] = []
    for e in entries:
        vals = [e["scores"].get(c) for c in columns] + [e["scores"].get("Avg")]
        for m in merged:
            if m["values"] == vals:
                m["sources"].append(_source(e, papers))
                m["entries"].append(e)
                break
        else:
            merged.append({"values": vals, "sources": [_source(e, papers)], "entries": [e]})
    return merged


# --------------------------------------------------------------------------------------------
# collecting run outputs

def collect(result_files: list[str | os.PathLike], kind: str = "sts") -> list[dict]:
    """One record per run/seed: identity from run_info (train.json as fallback), scores per task."""
    k = KINDS[kind]
    records = []
    for f in result_files:
        f = Path(f)
        res = read_json(f)
        train = read_json(f.parent / "train.json") if (f.parent / "train.json").is_file() else {}
        info = dict(res.get("run_info", {}))
        for key in ("method", "backbone", "seed", "suite", "name"):
            if info.get(key) is None and train.get(key) is not None:
                info[key] = train[key]
        info.setdefault("name", info.get("method", f.parent.parent.name))
        if info.get("seed") is None:
            m = re.fullmatch(r"seed(\d+)", f.parent.name)
            info["seed"] = int(m.group(1)) if m else 0
        tasks = res.get("tasks", {})
        # the average of all the tables' tasks only: a subset's (avg_subset, or an avg written over a subset) is not it
        complete = all(t in tasks for t in k.tasks)
        avg = res.get("avg") if complete else None
        if avg is None and complete:
            avg = float(np.mean([tasks[t] for t in k.tasks]))
        pairs = f.with_name("sts_pairs.npz") if kind == "sts" else None
        records.append({**info, "scores": tasks, "avg": avg, "path": str(f), "protocol": res.get("protocol", "full"),
                        "warning": res.get("warning"), "provenance": blocks_of(res) + (blocks_of(train) if train else []),
                        "pairs_path": str(pairs) if pairs is not None and pairs.is_file() else None})
    return records


def collect_sts(result_files: list[str | os.PathLike]) -> list[dict]:
    return collect(result_files, "sts")


@dataclass
class Row:
    backbone: str
    backbone_label: str
    method: str
    method_label: str
    run: str
    seeds: list[int]
    per_seed: np.ndarray                # (n_seeds, n_tasks + 1), NaN where missing
    records: list[dict]
    published: list[dict] = field(default_factory=list)
    test: TestResult | None = None
    is_baseline: bool = False

    @property
    def mean(self) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.nanmean(self.per_seed, axis=0) if len(self.per_seed) else np.array([])

    @property
    def std(self) -> np.ndarray | None:
        if len(self.seeds) < 2:
            return None
        with np.errstate(all="ignore"):
            return np.nanstd(self.per_seed, axis=0, ddof=1)

    def avg_by_seed(self) -> dict[int, float]:
        return {s: float(v) for s, v in zip(self.seeds, self.per_seed[:, -1]) if not math.isnan(v)}


def group_rows(records: list[dict], kind: str = "sts", published: dict | None = None) -> list[Row]:
    """Group runs by (backbone, run name), seeds sorted; SimCSE first within each backbone."""
    k = KINDS[kind]
    published = published or load_published()
    papers = published.get("papers", {})
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["backbone"], r["name"]), []).append(r)
    backbone_order = list(dict.fromkeys(r["backbone"] for r in records))
    rows = []
    for (backbone, name), runs in groups.items():
        runs = sorted(runs, key=lambda r: r["seed"])
        per_seed = np.array([[_num(r["scores"].get(t)) for t in k.tasks] + [_num(r["avg"])] for r in runs], dtype=float)
        first = runs[0]
        entries = published_for(kind, backbone, first["method"], name, published)
        rows.append(Row(backbone, first.get("backbone_label") or backbone, first["method"],
                        first.get("method_label") or first["method"], name, [r["seed"] for r in runs], per_seed, runs,
                        merge_published(entries, papers, k.columns)))
    rows.sort(key=lambda r: (backbone_order.index(r.backbone), r.method != BASELINE_METHOD,
                             r.run != BASELINE_METHOD))
    return rows


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def provenance_line(rows: list[Row]) -> str:
    """The footer of a table or figure drawn from these rows: the provenance of every result file
    (evaluation, embeddings table, training) behind them."""
    return summary_line([b for row in rows for rec in row.records for b in rec.get("provenance", [None])])


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
    from .evaluation.sts import load_pairs

    common = sorted(set(row.seeds) & set(base.seeds))
    ra = next((r for r in row.records if common and r["seed"] == common[0]), row.records[0])
    rb = next((r for r in base.records if common and r["seed"] == common[0]), base.records[0])
    if not (ra.get("pairs_path") and rb.get("pairs_path")):
        return TestResult("none", None, None, 0, {"reason": "fewer than 2 common seeds and no per-pair similarities (eval-sts --pairs-out)"})
    try:
        res = paired_bootstrap_sts(load_pairs(ra["pairs_path"]), load_pairs(rb["pairs_path"]), TEST_TASKS, n_boot=n_boot)
    except (ValueError, OSError, KeyError) as exc:  # e.g. evaluated on different SentEval copies
        log.warning("paired bootstrap %s vs %s skipped: %s", row.run, base.run, exc)
        return TestResult("none", None, None, 0, {"reason": f"bootstrap impossible: {exc}"})
    res.detail.update({"seed_method": ra["seed"], "seed_baseline": rb["seed"]})
    return res


# --------------------------------------------------------------------------------------------
# formatting

def _fmt(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _test_short(t: TestResult | None, is_baseline: bool) -> tuple[str, str]:
    """(p cell, test cell)."""
    if is_baseline:
        return "baseline", "–"
    if t is None or t.p_value is None:
        return "–", "none: " + (t.detail.get("reason", "") if t else "not computed")
    if t.test.startswith("paired t-test"):
        return _fmt_p(t.p_value), f"paired t-test, {t.n} seeds"
    return _fmt_p(t.p_value), f"paired bootstrap, {t.n} resamples"


def _deltas(row: Row, pub: dict) -> list[float | None]:
    return [None if v is None or math.isnan(m) else float(m - v) for m, v in zip(row.mean, pub["values"])]


def table_lines(rows: list[Row], kind: str) -> list[dict]:
    """The table as a list of line dicts (kind: ours | published | delta), shared by all formats."""
    out = []
    for row in rows:
        p_cell, test_cell = _test_short(row.test, row.is_baseline)
        std = row.std
        out.append({"type": "ours", "row": row, "backbone": row.backbone_label, "method": row.method_label, "run": row.run,
                    "seeds": len(row.seeds), "values": row.mean.tolist(),
                    "std": std.tolist() if std is not None else None, "p": p_cell, "test": test_cell,
                    "source": "ours"})
        for pub in row.published:
            src = "; ".join(pub["sources"])
            notes = sorted({e["note"] for e in pub["entries"] if e.get("note")})
            label = pub["entries"][0]["row"]
            out.append({"type": "published", "row": row, "backbone": row.backbone_label, "method": row.method_label,
                        "run": row.run, "seeds": None, "values": pub["values"], "std": None, "p": "", "test": "",
                        "source": src, "label": label, "note": "; ".join(notes)})
            out.append({"type": "delta", "row": row, "backbone": row.backbone_label, "method": row.method_label,
                        "run": row.run, "seeds": None, "values": _deltas(row, pub), "std": None, "p": "", "test": "",
                        "source": src})
    return out


def protocol_notes(records: list[dict]) -> list[str]:
    """The distinct warnings of results scored off the papers' protocol (CPU demo caps)."""
    return sorted({r["warning"] for r in records if r.get("protocol") == "capped" and r.get("warning")})


def render_markdown(rows: list[Row], kind: str, suite: str, notes: list[str] | None = None) -> str:
    k = KINDS[kind]
    header = ["Backbone", "Method", "Run", "Seeds", *k.columns, "Avg.", "p", "Paired test"]
    md = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * 4 + ["---:"] * (len(k.columns) + 1) + ["---:", "---"]) + "|"]
    for ln in table_lines(rows, kind):
        if ln["type"] == "ours":
            cells = [_fmt(m) + (f" ± {s:.2f}" if ln["std"] is not None and not math.isnan(s) else "")
                     for m, s in zip(ln["values"], ln["std"] or [float("nan")] * len(ln["values"]))]
            first = [f"**{ln['backbone']}**", f"**{ln['method']}**", ln["run"], str(ln["seeds"])]
            md.append("| " + " | ".join([*first, *cells, ln["p"], ln["test"]]) + " |")
        elif ln["type"] == "published":
            note = f" ({ln['note']})" if ln["note"] else ""
            md.append("| " + " | ".join(["", f"↳ published: {ln['source']}", f"“{ln['label']}”{note}", "",
                                         *[_fmt(v) for v in ln["values"]], "", ""]) + " |")
        else:
            md.append("| " + " | ".join(["", "↳ Δ ours − published", "", "",
                                         *[_fmt(v, signed=True) for v in ln["values"]], "", ""]) + " |")
    body = "\n".join(md)
    return (f"# {k.title}: suite `{suite}`\n\n"
            f"Scores: {k.unit}. Ours: mean ± sample std over the seeds present (no ± with one seed). "
            f"Published rows are printed as in the papers (source table named); Δ = ours − published.\n"
            f"p: two-sided paired test of the average against SimCSE on the same backbone "
            f"(per-seed paired t-test with ≥ 2 common seeds, else a paired bootstrap over STS sentence pairs).\n\n"
            + "".join(f"**Demo scale:** {n}.\n\n" for n in notes or [])
            + f"{body}\n\n{provenance_line(rows)}\n")


def render_csv_rows(rows: list[Row], kind: str, suite: str) -> tuple[list[str], list[list]]:
    k = KINDS[kind]
    cols = [*k.columns, "Avg."]
    header = ["suite", "backbone", "method", "run", "kind", "source", "seeds", *cols, *[f"{c} std" for c in cols],
              "p_vs_simcse", "test", "published_row", "note", "provenance"]
    footer = provenance_line(rows)  # a column, not a footer row: CSV readers see a table and nothing else
    out = []
    for ln in table_lines(rows, kind):
        r = ln["row"]
        vals = ["" if v is None or (isinstance(v, float) and math.isnan(v)) else round(v, 4) for v in ln["values"]]
        stds = ["" if s is None or math.isnan(s) else round(s, 4) for s in (ln["std"] or [None] * len(cols))]
        p = ""
        if ln["type"] == "ours" and r.test is not None and r.test.p_value is not None:
            p = f"{r.test.p_value:.6g}"
        test = r.test.test if (ln["type"] == "ours" and r.test is not None) else ("baseline" if ln["type"] == "ours" and r.is_baseline else "")
        out.append([suite, r.backbone, r.method, r.run, ln["type"], ln["source"], ln["seeds"] or "", *vals, *stds, p, test,
                    ln.get("label", ""), ln.get("note", ""), footer])
    return header, out


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "−": "-", "Δ": r"$\Delta$", "±": r"$\pm$", "♣": r"$\clubsuit$", "♡": r"$\heartsuit$", "“": "``", "”": "''",
                  "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$", "–": "--", "—": "---", "↳": ""}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def render_latex(rows: list[Row], kind: str, suite: str) -> str:
    k = KINDS[kind]
    ncols = len(k.columns) + 1
    footer = provenance_line(rows)
    lines = [r"% Generated by csebench report; needs \usepackage{booktabs}.", "% " + footer,
             r"\begin{table*}[t]", r"\centering", r"\small",
             r"\begin{tabular}{ll" + "r" * ncols + "l}", r"\toprule",
             " & ".join(["Backbone", "Method", *map(latex_escape, k.columns), "Avg.", "$p$"]) + r" \\", r"\midrule"]
    prev_backbone = None
    for ln in table_lines(rows, kind):
        if ln["type"] == "ours":
            if prev_backbone is not None and ln["backbone"] != prev_backbone:
                lines.append(r"\midrule")
            prev_backbone = ln["backbone"]
            method = ln["method"] + (f" ({ln['run']})" if ln["run"] not in (ln["row"].method, ln["method"]) else "")
            cells = []
            for i, m in enumerate(ln["values"]):
                s = ln["std"][i] if ln["std"] is not None else float("nan")
                cells.append(latex_escape(_fmt(m)) + (rf"$_{{\pm {s:.2f}}}$" if not math.isnan(s) else ""))
            p = latex_escape(ln["p"]).replace("<", "$<$")
            t = ln["row"].test
            if t is not None and t.p_value is not None:  # which test: t = paired t-test, b = paired bootstrap
                p += "$^{t}$" if t.test.startswith("paired t-test") else "$^{b}$"
            lines.append(" & ".join([latex_escape(ln["backbone"]), latex_escape(method) + f" (ours, n={ln['seeds']})",
                                     *cells, p]) + r" \\")
        elif ln["type"] == "published":
            lines.append(" & ".join(["", r"\quad\textit{" + latex_escape(ln["source"]) + "}",
                                     *[latex_escape(_fmt(v)) for v in ln["values"]], ""]) + r" \\")
        else:
            lines.append(" & ".join(["", r"\quad $\Delta$ ours$-$published",
                                     *[latex_escape(_fmt(v, signed=True)) for v in ln["values"]], ""]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}",
              r"\caption{" + latex_escape(f"{k.title} ({k.unit}), suite {suite}. Ours: mean ± std over seeds; "
                                          "published rows as printed in the named table; Δ = ours − published; "
                                          "p: paired test of the average against SimCSE on the same backbone "
                                          "(t: paired t-test over seeds, with ≥ 2 common seeds; b: paired bootstrap "
                                          "over STS sentence pairs)." + mixed_note(footer)) + "}",
              r"\label{tab:" + latex_escape(f"{kind}-{suite}").replace("\\_", "-") + "}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def write_tables(records: list[dict], out_dir: str | os.PathLike, kind: str = "sts", suite: str = "",
                 n_boot: int = 1000) -> list[Row]:
    """Write ``{kind}.md``, ``{kind}.csv`` and ``{kind}.tex`` into ``out_dir``; return the rows."""
    rows = group_rows(records, kind)
    add_significance(rows, kind, n_boot=n_boot)
    out_dir = Path(out_dir)
    suite = suite or (records[0].get("suite") if records else "") or ""
    write_text(out_dir / f"{kind}.md", render_markdown(rows, kind, suite, protocol_notes(records)))
    header, csv_rows = render_csv_rows(rows, kind, suite)
    write_csv(out_dir / f"{kind}.csv", header, csv_rows)
    write_text(out_dir / f"{kind}.tex", render_latex(rows, kind, suite))
    return rows


def write_sts_tables(records: list[dict], out_dir: str | os.PathLike, suite: str = "", n_boot: int = 1000) -> list[Row]:
    return write_tables(records, out_dir, "sts", suite, n_boot)


# --------------------------------------------------------------------------------------------
# training curves

def _run_label(path: Path) -> str:
    seed_dir = path.parent
    m = re.fullmatch(r"seed(\d+)", seed_dir.name)
    return f"{seed_dir.parent.name} (seed {m.group(1)})" if m else seed_dir.name


def read_curve(path: str | os.PathLike) -> dict[str, np.ndarray]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {}
    header, data = rows[0], rows[1:]
    cols: dict[str, np.ndarray] = {}
    for i, name in enumerate(header):
        vals = []
        for r in data:
            try:
                vals.append(float(r[i]))
            except (ValueError, IndexError):
                vals.append(float("nan"))
        cols[name] = np.asarray(vals)
    return cols


def plot_curves(curve_files: list[str | os.PathLike], out_png: str | os.PathLike, suite: str = "", footer: str = "") -> bool:
    """One PNG: training loss (left) and STS-B dev Spearman x100 (right) against step, a line per run/seed."""
    train = [Path(f) for f in curve_files if Path(f).name == "train_curve.csv" and Path(f).is_file()]
    dev = [Path(f) for f in curve_files if Path(f).name == "dev_curve.csv" and Path(f).is_file()]
    if not train and not dev:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted({f.parent.parent.name for f in train + dev})
    cmap = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20")
    run_color = {r: cmap(i % cmap.N) for i, r in enumerate(runs)}
    seeds = sorted({f.parent.name for f in train + dev})
    dashes = ["-", "--", ":", "-."]
    style = {s: dashes[i % len(dashes)] for i, s in enumerate(seeds)}  # colour = run, line style = seed

    def color(label_path: Path) -> dict:
        return {"color": run_color[label_path.parent.parent.name], "linestyle": style[label_path.parent.name]}
    fig, (ax_l, ax_d) = plt.subplots(1, 2, figsize=(12, 4.5))
    for f in sorted(train):
        c = read_curve(f)
        ykey = "loss" if "loss" in c else next((k for k in c if k != "step"), None)
        if ykey is None or "step" not in c:
            continue
        ax_l.plot(c["step"], c[ykey], **color(f), label=_run_label(f), lw=1.3)
    for f in sorted(dev):
        c = read_curve(f)
        if "step" not in c or "stsb_dev" not in c:
            continue
        ax_d.plot(c["step"], c["stsb_dev"], marker="o", ms=3, **color(f), label=_run_label(f), lw=1.3)
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
    save_png(fig, out_png, dpi=120, footer=footer)
    return True


def plot_sts_summary(rows: list[Row], out_png: str | os.PathLike, suite: str = "", kind: str = "sts") -> bool:
    """Horizontal bars: our average per backbone x run (mean, ± std, one dot per seed), published averages as diamonds."""
    rows = [r for r in rows if not math.isnan(r.mean[-1])]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
            if p["values"][-1] is not None:
                ax.scatter([p["values"][-1]], [yi], marker="D", s=36, color="black", zorder=4,
                           label=None if pub_labelled else "published Avg. (sources in the table)")
                pub_labelled = True
    ax.set_yticks(y, [f"{r.backbone_label} · {r.run}" + (f" (n={len(r.seeds)})" if len(r.seeds) > 1 else "") for r in rows])
    xs = [float(v) for r in rows for v in r.per_seed[:, -1] if not math.isnan(v)]
    xs += [p["values"][-1] for r in rows for p in r.published if p["values"][-1] is not None]
    lo, hi = min(xs), max(xs)
    ax.set_xlim(lo - 2, hi + 2)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(f"average over the 7 {'STS' if kind == 'sts' else 'transfer'} tasks ({k.unit})")
    ax.set_title(f"{k.title}: average per run" + (f" — suite {suite}" if suite else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    save_png(fig, out_png, dpi=120, footer=provenance_line(rows))
    return True


def dvc_plots_spec(run_dirs: list[str], suite: str, figures: list[str] | None = None,
                   trained: list[str] | None = None) -> list[dict]:
    """The ``plots:`` entries of dvc.yaml for a suite's curves (``dvc plots show`` / ``dvc plots diff``).

    ``run_dirs`` are the run/seed folders (``results/{suite}/runs/{run}/seed{seed}``) holding
    ``train_curve.csv`` and ``dev_curve.csv``; ``trained`` those with a loss curve (default: all; an
    evaluation-only run's train_curve.csv has no loss column); ``figures`` are PNGs shown as image plots.
    """
    spec = [
        {f"{suite}-train-loss": {"template": "linear", "x": "step",
                                 "y": {f"{d}/train_curve.csv": "loss" for d in (run_dirs if trained is None else trained)},
                                 "title": f"{suite}: training loss", "x_label": "training step",
                                 "y_label": "training loss (cross-entropy, nats)"}},
        {f"{suite}-stsb-dev": {"template": "linear", "x": "step", "y": {f"{d}/dev_curve.csv": "stsb_dev" for d in run_dirs},
                               "title": f"{suite}: STS-B dev", "x_label": "training step",
                               "y_label": "STS-B dev Spearman x100"}},
    ]
    spec += [{f: {}} for f in figures or []]
    return spec


def dvc_plots_spec_for_suite(params: dict, suite: str) -> list[dict]:
    from . import workflow as wf

    results = params.get("paths", {}).get("results", "results")
    jobs = wf.jobs(params, suite)
    return dvc_plots_spec([wf.run_dir(params, suite, run, seed) for run, seed in jobs], suite,
                          [f"{results}/{suite}/figures/training_curves.png"],
                          [wf.run_dir(params, suite, run, seed) for run, seed in jobs if wf.trains(params, suite, run)])


# --------------------------------------------------------------------------------------------
# README index

def write_readme(path: str | os.PathLike, suite: str, tables: dict[str, list[Path]], figures: list[Path],
                 rows: dict[str, list[Row]], description: str = "", extra_tables: list[Path] | None = None) -> None:
    """``results/{suite}/README.md``: links to every table and figure given (paths relative to it)."""
    path = Path(path)
    base = path.parent

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, base)).as_posix()

    out = [f"# csebench results — suite `{suite}`", ""]
    if description:
        out += [description, ""]
    out += ["Generated by `csebench report` (do not edit by hand).", "", "## Tables", ""]
    for kind, files in tables.items():
        if not files:
            continue
        k = KINDS[kind]
        links = " · ".join(f"[{f.suffix.lstrip('.').upper().replace('MD', 'Markdown').replace('TEX', 'LaTeX')}]({rel(f)})"
                           for f in files)
        out.append(f"- {k.title} ({k.unit}): {links}")
    for t in extra_tables or []:
        out.append(f"- {t.stem.replace('_', ' ')}: [{t.name}]({rel(t)})")
    out.append("")
    if rows.get("sts"):
        out += ["## STS average at a glance", "", "| Backbone | Run | Seeds | Avg. (ours) | Published Avg. | p (vs baseline) |",
                "|---|---|---:|---:|---|---:|"]
        for r in rows["sts"]:
            pub = "; ".join(f"{_fmt(p['values'][-1])} ({', '.join(p['sources'])})" for p in r.published) or "–"
            sd = r.std
            ours = _fmt(r.mean[-1]) + (f" ± {sd[-1]:.2f}" if sd is not None else "")
            out.append(f"| {r.backbone_label} | {r.run} | {len(r.seeds)} | {ours} | {pub} | {_test_short(r.test, r.is_baseline)[0]} |")
        out.append("")
    if figures:
        out += ["## Figures", ""]
        for f in figures:
            title = f.stem.replace("_", " ").replace("-", " ")
            out += [f"### {title}", "", f"[{f.name}]({rel(f)})", "", f"![{title}]({rel(f)})", ""]
    out += ["## Notes", "",
            "- Published numbers: `src/csebench/resources/published.yaml` (paper, table and row named per entry).",
            "- Significance: paired t-test over seeds when a method and SimCSE share ≥ 2 seeds; otherwise a paired "
            "bootstrap over the STS test sentence pairs (1 model each, `eval-sts --pairs-out`); the test used is "
            "named in each table row.",
            "- Training curves in DVC: `dvc plots show` / `dvc plots diff` (plots defined in `dvc.yaml`).",
            f"- {provenance_line([r for kind_rows in rows.values() for r in kind_rows])}", ""]
    write_text(path, "\n".join(out))


def report(suite: str, sts: list[str], out_dir: str | os.PathLike, transfer: list[str] | None = None,
           curves: list[str] | None = None, figures: list[str] | None = None, readme: str | None = None,
           curves_png: str | None = None, n_boot: int = 1000, description: str = "",
           summary_png: str | None = None, extra_tables: list[str] | None = None) -> dict:
    """Everything ``csebench report`` writes. Only ``sts`` is required."""
    out_dir = Path(out_dir)
    suite_dir = out_dir.parent
    rows: dict[str, list[Row]] = {"sts": write_tables(collect(sts, "sts"), out_dir, "sts", suite, n_boot)}
    tables = {"sts": [out_dir / f"sts.{e}" for e in ("md", "csv", "tex")]}
    if transfer:
        rows["transfer"] = write_tables(collect(transfer, "transfer"), out_dir, "transfer", suite, n_boot)
        tables["transfer"] = [out_dir / f"transfer.{e}" for e in ("md", "csv", "tex")]
    figs: list[Path] = []
    summary = Path(summary_png) if summary_png else suite_dir / "figures" / "sts_avg.png"
    if plot_sts_summary(rows["sts"], summary, suite):
        figs.append(summary)
    if curves:
        png = Path(curves_png) if curves_png else suite_dir / "figures" / "training_curves.png"
        if plot_curves(curves, png, suite, provenance_line([r for kind_rows in rows.values() for r in kind_rows])):
            figs.append(png)
    figs += [Path(f) for f in figures or [] if Path(f).is_file() and Path(f) not in figs]
    readme_path = Path(readme) if readme else suite_dir / "README.md"
    extra = [Path(t) for t in extra_tables or [] if Path(t).is_file()]
    write_readme(readme_path, suite, tables, figs, rows, description, extra)
    return {"rows": rows, "tables": tables, "figures": figs, "readme": readme_path}

"""Figures (PNG, matplotlib Agg) and suite-level tables of the analyses; inputs are the analysis JSONs."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from csebench.core.io import save_png, write_csv, write_text
from csebench.results.plotting import pyplot
from csebench.results.tables import Table, fmt


def plot_align_uniform(points: Sequence[dict], out: str | os.PathLike, title: str = "", footer: str = "") -> None:
    """IS-CSE Fig. 3: l_align (x) vs l_uniform (y), colour and bracketed number = average STS.

    points: dicts with label, alignment, uniformity, sts_avg (may be None)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    xs = np.array([p["alignment"] for p in points])
    ys = np.array([p["uniformity"] for p in points])
    sts = np.array([np.nan if p.get("sts_avg") is None else p["sts_avg"] for p in points], dtype=float)
    has = ~np.isnan(sts)
    if has.any():
        sc = ax.scatter(xs[has], ys[has], c=sts[has], cmap="viridis", s=70, edgecolors="k", zorder=3)
        fig.colorbar(sc, ax=ax, label="average STS (Spearman x100)")
    if (~has).any():
        ax.scatter(xs[~has], ys[~has], c="lightgray", s=70, edgecolors="k", zorder=3, label="no STS result")
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(r"$\ell_{align}$ (mean squared distance of positive pairs; lower is better)")
    ax.set_ylabel(r"$\ell_{uniform}$ (log mean Gaussian potential, t=2; lower is better)")
    ax.set_title(title or "Alignment vs uniformity on STS-B (Wang & Isola)")
    ax.grid(alpha=0.3)
    pad_x = max(1e-3, 0.15 * (xs.max() - xs.min()))
    pad_y = max(1e-3, 0.15 * (ys.max() - ys.min()))
    ax.set_xlim(xs.min() - pad_x, xs.max() + 2 * pad_x)
    ax.set_ylim(ys.min() - pad_y, ys.max() + pad_y)
    labels = [f"{p['label']}" + ("" if np.isnan(s) else f" ({s:.2f})") for p, s in zip(points, sts)]
    x0, x1 = ax.get_xlim()
    for i, y_text in label_slots(xs, ys, (x0, x1), ax.get_ylim()).items():
        right_half = (xs[i] - x0) / (x1 - x0) > 0.55  # label on the side with room
        ax.annotate(labels[i], (xs[i], ys[i]), xytext=(xs[i] + (-0.03 if right_half else 0.03) * (x1 - x0), y_text),
                    fontsize=8, va="center", ha="right" if right_half else "left",
                    arrowprops={"arrowstyle": "-", "color": "gray", "lw": 0.6})
    save_png(fig, out, footer=footer)  # footer: the provenance line of the results drawn


def label_slots(xs: np.ndarray, ys: np.ndarray, xlim, ylim, min_gap: float = 0.055, x_near: float = 0.35) -> dict[int, float]:
    """y position (data units) of each point's label: at the point, pushed down while it would sit within
    ``min_gap`` (axes fraction) of a label already placed near the same x (near-identical runs overlap)."""
    nx = (np.asarray(xs) - xlim[0]) / (xlim[1] - xlim[0])
    ny = (np.asarray(ys) - ylim[0]) / (ylim[1] - ylim[0])
    placed: list[tuple[float, float]] = []
    out = {}
    for i in np.argsort(-ny, kind="stable"):
        y = ny[i]
        while any(abs(y - py) < min_gap and abs(nx[i] - px) < x_near for px, py in placed):
            y -= min_gap
        placed.append((nx[i], y))
        out[int(i)] = ylim[0] + y * (ylim[1] - ylim[0])
    return out


def plot_cosine_dist(models: dict[str, dict], out: str | os.PathLike, title: str = "", footer: str = "") -> None:
    """IS-CSE Fig. 4: per gold-score group (y), the distribution of pair cosines (x), one violin per model."""
    plt = pyplot()
    names = list(models)
    fig, ax = plt.subplots(figsize=(6.5, 1.0 + 0.9 * len(GROUP_LABELS) * max(1, len(names)) ** 0.5))
    width = 0.8 / max(1, len(names))
    colors = plt.get_cmap("tab10").colors
    for m, name in enumerate(names):
        groups = models[name]["groups"]
        data, pos = [], []
        for g, label in enumerate(GROUP_LABELS):
            c = groups.get(label, {}).get("cosines") or []
            if len(c) >= 2:
                data.append(c)
                pos.append(g - 0.4 + width * (m + 0.5))
        if not data:
            continue
        parts = ax.violinplot(data, positions=pos, widths=width * 0.95, orientation="horizontal", showmedians=True)
        for body in parts["bodies"]:
            body.set_facecolor(colors[m % 10])
            body.set_alpha(0.6)
        for key in ("cmedians", "cmins", "cmaxes", "cbars"):
            if key in parts:
                parts[key].set_color(colors[m % 10])
        ax.plot([], [], color=colors[m % 10], lw=6, alpha=0.6, label=name)
    ax.set_yticks(range(len(GROUP_LABELS)))
    ax.set_yticklabels(GROUP_LABELS)
    ax.set_ylabel("STS-B gold similarity group (0 = unrelated, 5 = equivalent)")
    ax.set_xlabel("cosine similarity of the sentence pair")
    ax.set_title(title or "Cosine similarity of STS-B pairs by human score")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    save_png(fig, out, footer=footer)  # footer: the provenance line of the results drawn


def plot_layers(models: dict[str, dict], out: str | os.PathLike, title: str = "", footer: str = "") -> None:
    """SSCL Fig. 1 (inter-layer SetSim of adjacent layers) and Fig. 4 (TokSim per layer), side by side."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, res in models.items():
        inter = res["inter_layer"]
        a1.plot(range(len(inter)), list(inter.values()), "o--", label=name)
        tok = res["toksim"]
        a2.plot([int(k) for k in tok], list(tok.values()), "o--", label=name)
    first = next(iter(models.values()))
    a1.set_xticks(range(len(first["inter_layer"])))
    a1.set_xticklabels(list(first["inter_layer"]), rotation=45 if len(first["inter_layer"]) > 8 else 0)
    a1.set_xlabel("adjacent layer pair (i, i+1)")
    a1.set_ylabel("mean cosine of sentence representations")
    a1.set_title("Inter-layer similarity (SSCL Fig. 1)")
    a2.set_xlabel("layer")
    a2.set_ylabel("TokSim: mean cosine between tokens")
    a2.set_title("Token-wise similarity (SSCL Fig. 4)")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(title or "Over-smoothing on STS-B test")
    fig.tight_layout()
    save_png(fig, out, footer=footer)  # footer: the provenance line of the results drawn


def plot_token_matrices(res: dict, out: str | os.PathLike, title: str = "", footer: str = "") -> None:
    """SSCL Fig. 5: one token-by-token cosine heatmap per model, side by side, one colour scale."""
    plt = pyplot()
    models = res["models"]
    n = len(models)
    width = max(len(m["tokens"]) for m in models.values())
    side = 1.5 + 0.32 * width
    fig, axes = plt.subplots(1, n, figsize=(side * n + 1.0, side), squeeze=False)
    lo = min(0.0, min(float(np.min(m["matrix"])) for m in models.values()))
    im = None
    for ax, (label, m) in zip(axes[0], models.items()):
        im = ax.imshow(np.asarray(m["matrix"]), vmin=lo, vmax=1.0, cmap="viridis")
        ticks = range(len(m["tokens"]))
        ax.set_xticks(ticks)
        ax.set_xticklabels(m["tokens"], rotation=90, fontsize=8)
        ax.set_yticks(ticks)
        same = ax is not axes[0][0] and m["tokens"] == next(iter(models.values()))["tokens"]
        ax.set_yticklabels([] if same else m["tokens"], fontsize=8)  # shared tokens: labels on the first panel only
        extra = f", TokSim {m['toksim']:.3f}" if m.get("toksim") is not None else ""
        ax.set_title(f"{label}\n(layer {m['layer']}{extra})", fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label="cosine similarity")
    fig.suptitle(title or "Token representation cosine similarity (SSCL Fig. 5)")
    save_png(fig, out, footer=footer)  # footer: the provenance line of the results drawn


def plot_topk_negatives(res: dict, out: str | os.PathLike, model_label: str = "", footer: str = "") -> None:
    """GS-InfoNCE Fig. 1: the cosine of each sentence's r-th nearest other sentence of its batch (mean over the
    batch's sentences, then over batches; error bars: std over batches) against batch size, r = 1..k, and the
    same of each sentence against the batch's Gaussian noise vectors (dotted)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    sizes = [int(n) for n in res["batch_sizes"]]
    at = lambda key: np.array([res["batch_sizes"][str(n)][key] for n in sizes])  # noqa: E731  (sizes, k)
    tops, sds, gauss = at("topk_mean"), at("topk_std"), at("gaussian_topk_mean")
    for i in range(tops.shape[1]):
        line = ax.errorbar(sizes, tops[:, i], yerr=sds[:, i], marker="o", capsize=3, label=f"top-{i + 1} in-batch neighbour")
        ax.plot(sizes, gauss[:, i], ":", marker="x", color=line[0].get_color(),
                label=f"top-{i + 1} Gaussian noise (M = {res.get('gaussian_ratio', 3)}N)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(n) for n in sizes])
    ax.set_xlabel("batch size N (sentences)")
    ax.set_ylabel("cosine similarity (mean over sentences)")
    ax.set_title(f"Top-{tops.shape[1]} negative similarities per sentence"
                 + (f"\n({model_label}, {res['repeats']} batches each)" if model_label else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="best")
    save_png(fig, out, footer=footer)  # footer: the provenance line of the results drawn


def plot_teacher_logits(res: dict, out: str | os.PathLike, title: str = "", footer: str = "") -> None:
    """DistillCSE Fig. 1: descending-sorted 1st-order values and 2nd-order logits, training batches
    vs STS-B dev (teacher 1), against relative rank."""
    plt = pyplot()
    t = res["teachers"][0]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, ylabel, name in ((a1, "first_order", r"$\frac{1}{D}\sum_d h_{i,d}$ (l2-normalized embedding)", "1st order: embedding mean"),
                                  (a2, "logits", r"cosine logit $t_{ij}$", "2nd order: similarity logits")):
        s = t[key]
        x = np.linspace(0, 1, len(s["train_sorted"]))
        extra = f", sharpness {s['train_sharpness']:.3f}" if "train_sharpness" in s else ""
        ax.plot(x, s["train_sorted"], "-", label=f"in-batch training sentences{extra}")
        extra = f", sharpness {s['test_sharpness']:.3f}" if s.get("test_sharpness") is not None else ""
        ax.plot(x, s["test_sorted"], "--", label=f"STS-B dev{extra}")
        ax.set_xlabel("relative rank (0 = largest)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}\nKL(train||test): Gaussian {s['kl_gaussian']:.3f}, histogram {s['kl_histogram']:.3f} nats", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title or f"Sharpness of teacher logits (DistillCSE Fig. 1), batch size {res['batch_size']}")
    fig.tight_layout()
    save_png(fig, out, footer=footer)  # footer: the provenance line of the results drawn


def embed_dim_table(models: dict[str, dict], out_md: str | os.PathLike, out_csv: str | os.PathLike | None = None,
                    footer: str = "") -> None:
    """SSCL Table 5 layout: model, dimension, avg STS (one row per projection)."""
    rows = []
    for name, res in models.items():
        for key, p in sorted(res["projected"].items(), key=lambda kv: (kv[1]["method"], kv[1]["dim"])):
            rows.append([name, p["dim"], f"linear ({p['method']})", p["avg"]])
        own = "linear head trained with the model (training.projection_dim)" if res.get("trained_projection") else "none (model output)"
        rows.append([name, res["full_dim"], own, res["full"]["avg"]])
    lines = Table(["Model", "Dimension", "Projection", "Avg. STS"], "lrlr",
                  [[str(r[0]), str(r[1]), r[2], fmt(r[3])] for r in rows]).markdown()
    note = ("\nAvg. STS = mean Spearman x100 over STS12-16, STS-B, SICK-R (test sets). "
            "random = Gaussian N(0, 1/dim) map; pca = top principal directions of the evaluation sentences' embeddings "
            "(post-hoc references). SSCL's own projection is trained jointly: runs with training.projection_dim.\n")
    capped = sorted({res["max_sts_pairs"] for res in models.values() if res.get("protocol") == "capped"})
    if capped:  # the CPU demo's STS pair cap: not the papers' protocol
        note += f"\n**Capped STS sets**: each task scored on a seeded subset of about {capped[0]} pairs (CPU demo scale, as in sts.md).\n"
    write_text(out_md, "\n".join(lines) + "\n\n" + footer + "\n" + note)
    if out_csv:
        write_csv(out_csv, ["model", "dimension", "projection", "avg_sts", "provenance"], [r + [footer] for r in rows])

GROUP_LABELS = ["0-1", "1-2", "2-3", "3-4", "4-5"]

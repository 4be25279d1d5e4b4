"""Matplotlib for every figure of the package and of csebench.analysis: the headless set-up, the
"not yet run" placeholder, legends, and one training-curve line. Saving (with the provenance footer)
is csebench.core.io.save_png."""

from __future__ import annotations

import os

import numpy as np

from csebench.core.io import save_png
from csebench.results.runs import read_curve


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display; imported only when a figure is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def placeholder(png: str | os.PathLike, footer: str = "") -> None:
    """The figure of an item whose runs do not exist yet."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.text(0.5, 0.5, "not yet run", ha="center", va="center", color="grey")
    ax.set_axis_off()
    save_png(fig, png, footer=footer)


def legend_or_empty(ax) -> None:
    """A legend, or "not yet run" on an axis with nothing drawn."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not yet run", transform=ax.transAxes, ha="center", va="center", color="grey")


def plot_curve(ax, path: str | os.PathLike, column: str, first_other: bool = False, **style):
    """One curve of a run (train_curve.csv / dev_curve.csv) against the training step: ``column``
    (else, with ``first_other``, the first column after the step); returns (steps, values), or None
    when the file has neither. A curve of one point (a run that logged once) is drawn as a marker: a line
    through one point draws nothing."""
    c = read_curve(path)
    if column not in c and first_other:
        column = next((k for k in c if k != "step"), None)
    y = c.get(column) if column else None
    if y is None or "step" not in c:
        return None
    if np.isfinite(y).sum() == 1 and not style.get("marker"):
        style = {**style, "marker": "o"}
    ax.plot(c["step"], y, **style)
    return c["step"], y

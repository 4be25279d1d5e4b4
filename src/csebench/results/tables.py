"""Numbers as the tables print them, and one table model written as Markdown or as a LaTeX tabular.

Every table of the package (the paper grids, the suite tables, the figure companions, the pages)
formats its numbers with ``fmt`` and writes its lines through ``Table``; LaTeX cells go through
``latex_escape``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

DASH = "–"  # a cell without a value


def fmt(x, digits: int = 2, signed: bool = False) -> str:
    """A cell: ``digits`` decimals (signed: with its sign, as a Δ); whole numbers as they are; an
    unsigned value below 0.001 or from 100 000 on in scientific notation (learning rates, losses);
    None or NaN as a dash; text as it is."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int) and not signed:
        return str(x)
    if not signed and isinstance(x, float) and x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.2e}"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def ours_text(mean, std, digits: int = 2) -> str:
    """Ours in a cell: the mean, and ± the sample std where there are two seeds or more."""
    has_std = std is not None and not (isinstance(std, float) and math.isnan(std))
    return fmt(mean, digits) + (f" ± {fmt(std, digits)}" if has_std else "")


def delta(ours, published):
    """Δ = ours − published, None where either is missing."""
    if ours is None or published is None or isinstance(published, bool):
        return None
    if isinstance(ours, float) and math.isnan(ours):
        return None
    return float(ours) - float(published)


def csv_number(x):
    """A number in a CSV cell: 4 decimals, empty where missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return round(x, 4) if isinstance(x, float) else x


def rel(path: str | os.PathLike, start: str | os.PathLike) -> str:
    """A link from a page in ``start`` to ``path``."""
    return Path(os.path.relpath(path, start)).as_posix()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "−": "-", "Δ": r"$\Delta$", "±": r"$\pm$", "♣": r"$\clubsuit$", "♡": r"$\heartsuit$", "“": "``", "”": "''",
                  "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$", "–": "--", "—": "---", "↳": ""}


def latex_escape(text) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


@dataclass
class Table:
    """A header, each column's alignment (``l`` or ``r``) and rows of cell texts; a row None is a
    rule (``\\midrule`` in LaTeX, nothing in Markdown). Cells are written as given: Markdown and
    LaTeX tables of one layout are two Tables (LaTeX cells escaped by the caller)."""
    header: list[str]
    align: str
    rows: list[list[str] | None] = field(default_factory=list)

    def markdown(self) -> list[str]:
        sep = {"l": "---", "r": "---:"}
        return ["| " + " | ".join(self.header) + " |", "|" + "|".join(sep[a] for a in self.align) + "|",
                *("| " + " | ".join(r) + " |" for r in self.rows if r is not None)]

    def latex(self) -> list[str]:
        """The tabular environment, booktabs rules."""
        lines = [r"\begin{tabular}{" + self.align + "}", r"\toprule", " & ".join(self.header) + r" \\", r"\midrule"]
        lines += [r"\midrule" if r is None else " & ".join(r) + r" \\" for r in self.rows]
        return lines + [r"\bottomrule", r"\end{tabular}"]

"""Published values: one source, the registry (resources/reproduction/*.yaml).

Every grid row carries the values its paper prints (``published``, aligned with its block's
columns), and its run binding (the row's ``run`` or ``runs``, else each column's ``run``) says which
of our runs stands for them. The paper items print them cell by cell. The suite tables print, beside
each run, every registry row bound to that run whose cells are STS or transfer scores (``sts:<task>``,
``transfer:<task>``; paper scale), identical values merged into one line naming all their sources, each
with its source kind (the paper, the authors' README or notebook, or a third-party reprint: registry.SOURCE_KINDS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from csebench.results.registry import SOURCE_KINDS, Registry, cell_metric, cell_run, load_registry
from csebench.results.runs import KINDS, parse_run, task_key


def row_values(row: dict, columns: list[dict]) -> list:
    """A registry row's published values, aligned with its block's columns (None where none)."""
    return list(row["published"]) if row.get("published") is not None else [None] * len(columns)


def row_labels(block: dict) -> list[str]:
    """Each row's label as one text; a label part left empty continues the row above (a spanned cell)."""
    out, above = [], []
    for row in block.get("rows") or []:
        lab = row.get("label", "")
        parts = [str(x) for x in lab] if isinstance(lab, list) else [str(lab)]
        parts = [p or (above[i] if i < len(above) else "") for i, p in enumerate(parts)]
        above = parts
        out.append(" / ".join(p for p in parts if p))
    return out


@dataclass
class Published:
    """Printed values bound to one run, as a suite table shows them: the values in the table's
    columns (its tasks, then Avg.), the sources (paper and table), each source's kind (registry.SOURCE_KINDS)
    and the first source's row label."""
    values: list
    sources: list[str] = field(default_factory=list)
    label: str = ""
    kinds: list[str] = field(default_factory=list)

    @property
    def source_text(self) -> str:
        """The sources as a table prints them: each with its kind unless it is the paper's own text."""
        return "; ".join(s + (f" ({SOURCE_KINDS[k]})" if k and k != "paper" else "")
                         for s, k in zip(self.sources, self.kinds + [""] * len(self.sources)))

    @property
    def note(self) -> str:
        """Where the printed average is not the mean of the printed tasks (kept as printed)."""
        tasks, avg = self.values[:-1], self.values[-1]
        if avg is None or len(tasks) != 7 or any(v is None for v in tasks):
            return ""
        mean = sum(tasks) / len(tasks)
        return f"reported Avg differs from the mean of the 7 tasks ({mean:.2f})" if abs(mean - avg) > 0.011 else ""


def bindings(reg: Registry) -> dict[tuple[str, str], list[tuple[str, str, dict, str]]]:
    """(kind, "suite/run") -> [(source, row label, {task key or "Avg": value}, source kind)] in registry order."""
    out: dict[tuple[str, str], list] = {}
    for it in reg.items:
        source = f"{reg.papers.get(it.paper, {}).get('short', it.paper)} {it.number}"
        for block in it.blocks():
            cols = block.get("columns") or []
            for row, label in zip(block.get("rows") or [], row_labels(block)):
                # a study's row copied from a paper item names that item (its ``source``), not the study
                where_from = row.get("source") or source
                cells: dict[tuple[str, str], dict] = {}
                for j, (col, value) in enumerate(zip(cols, row_values(row, cols))):
                    run, metric = cell_run(row, col, j), cell_metric(block, row, col, j)
                    kind, _, task = (metric or "").partition(":")
                    if run and kind in ("sts", "transfer") and isinstance(value, (int, float)) and \
                            row.get("scale", col.get("scale", block.get("scale", 1))) == 1:
                        key = "Avg" if task == "Avg" else task_key(kind, task)
                        cells.setdefault((kind, str(parse_run(run, it.suites[0]))), {})[key] = value
                for where, values in cells.items():
                    out.setdefault(where, []).append((where_from, label, values, reg.source_kind(it, row) or ""))
    return out


@lru_cache(maxsize=1)
def _registry_bindings() -> dict:
    return bindings(load_registry())


def for_run(kind: str, suite: str, run: str, reg: Registry | None = None) -> list[Published]:
    """The published rows bound to ``suite/run`` that a ``kind`` suite table shows (paper scale)."""
    columns = [*KINDS[kind].tasks, "Avg"]
    merged: list[Published] = []
    for source, label, values, source_kind in (bindings(reg) if reg else _registry_bindings()).get((kind, f"{suite}/{run}"), []):
        vals = [values.get(c) for c in columns]
        same = next((m for m in merged if m.values == vals), None)
        if same is None:
            merged.append(Published(vals, [source], label, [source_kind]))
        elif source not in same.sources:
            same.sources.append(source)
            same.kinds.append(source_kind)
    return merged

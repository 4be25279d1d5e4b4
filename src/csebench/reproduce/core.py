"""What a renderer gets: the item, params, where results live, the scale, and cell values.

Scale ``paper`` reads the suites the registry names; scale ``demo`` maps them through the item's
``demo:`` section (``suites: {paper suite: demo suite}`` and/or ``runs: {"suite/run": "suite/run"}``)
so the same layout is drawn from CPU-sized runs, marked as demo scale.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from . import metrics as M
from .registry import Item

SCALES = ("paper", "demo")


@dataclass
class Context:
    item: Item
    params: dict
    results: str = "results"
    scale: str = "paper"
    out_dir: Path = Path("results/papers")
    published: dict = field(default_factory=dict)

    @property
    def published_paper_short(self) -> str:
        from .registry import load_registry

        return (load_registry().papers.get(self.item.paper) or {}).get("short", self.item.paper)

    @property
    def default_suite(self) -> str:
        return self.item.suites[0]

    def ref(self, spec: str) -> M.RunRef | None:
        """A run reference of the layout, mapped to this scale; None where params.yaml has no such run
        (a demo-scale table shows only the rows the demo trains)."""
        ref = M.parse_run(spec, self.default_suite)
        if self.scale == "paper":  # a run left out of params.yaml (a trimmed suite) draws as n/a
            return ref if self.has_run(ref) else None
        demo = self.item.demo or {}
        runs = demo.get("runs") or {}
        suites = demo.get("suites") or {}
        if str(ref) in runs:
            ref = M.parse_run(runs[str(ref)], self.default_suite)
        elif ref.suite in suites:
            ref = M.RunRef(suites[ref.suite], ref.run)
        else:
            return None
        return ref if self.has_run(ref) else None

    def suite(self, name: str | None = None) -> str:
        """A suite of the layout (default: the item's first) at this scale."""
        name = name or self.default_suite
        return name if self.scale == "paper" else ((self.item.demo or {}).get("suites") or {}).get(name, name)

    def has_run(self, ref: M.RunRef) -> bool:
        from ..config import find_run

        try:
            find_run(self.params, ref.suite, ref.run)
        except ConfigError:
            return False
        return True

    def seeds(self, ref: M.RunRef) -> list[int]:
        return M.seeds_of(self.params, ref)

    def values(self, metric: str, ref: M.RunRef) -> tuple[list[float], list[int]]:
        """The metric over the run's seeds that have it: (values, seeds)."""
        vals, seeds = [], []
        per_run = M.kind_of(metric) in ("run_analysis", "suite_analysis")  # one value, whatever the seeds
        for s in self.seeds(ref)[:1] if per_run else self.seeds(ref):
            v = M.value(metric, self.results, ref, s, self.params)
            if v is not None:
                vals.append(v)
                seeds.append(s)
        return vals, seeds

    def path(self, ext: str) -> Path:
        return self.out_dir / f"{self.item.slug}.{ext}"

    @cached_property
    def provenance(self) -> str:
        """The footer line of the item: the provenance of every result file it reads that exists."""
        from ..provenance import blocks_of, result_json, summary_line
        from .renderers import get

        files = dict.fromkeys(j for f in get(self.item.renderer).inputs(self) if (j := result_json(f)) is not None)
        return summary_line([b for f in files for b in blocks_of(M.read_json_cached(str(f)))])

    @property
    def scale_note(self) -> str:
        if self.scale == "demo":
            return ("**Demo scale**: CPU-sized runs (packaged MiniLM, a few training steps, capped evaluation sets where the suite says so: STS pairs, STS-B dev during training, transfer splits; see `params.yaml` suite "
                    f"{', '.join(sorted(set(self.demo_suites())))}); the layout and published values are the paper's, "
                    "our numbers are not comparable to them.")
        return f"Paper scale: suites {', '.join(f'`{s}`' for s in self.item.suites)} (`params.yaml`)."

    def demo_suites(self) -> list[str]:
        demo = self.item.demo or {}
        out = list((demo.get("suites") or {}).values())
        out += [v.split("/", 1)[0] for v in (demo.get("runs") or {}).values()]
        return out


def mean_std(vals: list[float]) -> tuple[float | None, float | None]:
    if not vals:
        return None, None
    return float(np.mean(vals)), (float(np.std(vals, ddof=1)) if len(vals) > 1 else None)


def input_files(item: Item, params: dict, results: str = "results", scale: str = "paper") -> list[str]:
    """Every file the item's renderer reads (Snakemake inputs), in a stable order."""
    from .renderers import get

    ctx = Context(item, params, results, scale)
    files = get(item.renderer).inputs(ctx)
    return list(dict.fromkeys(files))


def fmt(x, nd: int = 2, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int) and not signed:
        return str(x)
    if isinstance(x, float) and x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:+.2e}" if signed else f"{x:.2e}"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def rel(path: str | os.PathLike, start: str | os.PathLike) -> str:
    return Path(os.path.relpath(path, start)).as_posix()

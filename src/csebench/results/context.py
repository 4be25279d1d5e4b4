"""What a renderer gets (a Context: the item, params, where results live, the scale, cell values and
the provenance footer) and what a renderer is (inputs + render).

Scale ``paper`` reads the suites the registry names; scale ``demo`` maps them through the item's
``demo:`` section (``suites: {paper suite: demo suite}`` and/or ``runs: {"suite/run": "suite/run"}``)
so the same layout is drawn from CPU-sized runs, marked as demo scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

from csebench.core.errors import ConfigError
from csebench.results import metrics as M
from csebench.results.registry import Item, load_registry
from csebench.results.runs import RunRef, caveat_line, parse_run, read_json_cached, same_run_text
from csebench.study.typed import Params

SCALES = ("paper", "demo")


@dataclass(frozen=True)
class Renderer:
    """A kind of table or figure: ``inputs(ctx)`` lists the result files it reads (Snakemake inputs),
    ``render(ctx)`` writes the item's files and returns their paths."""
    inputs: Callable[["Context"], list[str]]
    render: Callable[["Context"], list[Path]]


@dataclass
class Context:
    item: Item
    params: Params
    results: str = "results"
    scale: str = "paper"
    out_dir: Path = Path("results/papers")
    renderer: Renderer | None = None  # set by csebench.results.render: its inputs are the footer's files
    links: list[str] = field(default_factory=list)  # a suite README's extra links (analysis figures, tables)
    n_boot: int = 1000  # paired bootstrap resamples of a suite table's significance test

    @property
    def paper_short(self) -> str:
        return (load_registry().papers.get(self.item.paper) or {}).get("short", self.item.paper)

    @property
    def default_suite(self) -> str:
        return self.item.suites[0]

    def ref(self, spec: str) -> RunRef | None:
        """A run reference of the layout, mapped to this scale; None where params.yaml has no such run
        (a demo-scale table shows only the rows the demo trains)."""
        ref = parse_run(spec, self.default_suite)
        if self.scale == "paper":  # a run left out of params.yaml (a trimmed suite) draws as n/a
            return ref if self.has_run(ref) else None
        demo = self.item.demo or {}
        runs = demo.get("runs") or {}
        suites = demo.get("suites") or {}
        if str(ref) in runs:
            ref = parse_run(runs[str(ref)], self.default_suite)
        elif ref.suite in suites:
            ref = RunRef(suites[ref.suite], ref.run)
        else:
            return None
        return ref if self.has_run(ref) else None

    def suite(self, name: str | None = None) -> str:
        """A suite of the layout (default: the item's first) at this scale."""
        name = name or self.default_suite
        return name if self.scale == "paper" else ((self.item.demo or {}).get("suites") or {}).get(name, name)

    def has_run(self, ref: RunRef) -> bool:
        try:
            self.params.suite(ref.suite).run(ref.run)
        except ConfigError:
            return False
        return True

    def seeds(self, ref: RunRef) -> list[int]:
        return M.seeds_of(self.params, ref)

    def files(self, metric: str, ref: RunRef, seed: int) -> list[str]:
        return M.files_for(metric, self.results, ref, seed, self.params)

    def value(self, metric: str, ref: RunRef, seed: int):
        return M.value(metric, self.results, ref, seed, self.params)

    def values(self, metric: str, ref: RunRef) -> tuple[list[float], list[int]]:
        """The metric over the run's seeds that have it: (values, seeds)."""
        vals, seeds = [], []
        per_run = M.kind_of(metric) in ("run_analysis", "suite_analysis")  # one value, whatever the seeds
        for s in self.seeds(ref)[:1] if per_run else self.seeds(ref):
            v = self.value(metric, ref, s)
            if v is not None:
                vals.append(v)
                seeds.append(s)
        return vals, seeds

    def same_run(self, metric: str, ref: RunRef) -> str:
        """"same run as S/R" where the suite's view of ``ref`` shows another suite's run (the views'
        ``same_run_as``, docs/runs.md), read from the metric's result files that exist; "" otherwise."""
        by_seed = {}
        for s in self.seeds(ref):
            files = [f for f in self.files(metric, ref, s) if f.endswith(".json")]
            data = read_json_cached(files[0]) if files else None
            if isinstance(data, dict):
                by_seed[s] = data.get("same_run_as")
        return same_run_text(by_seed, list(by_seed))

    def path(self, ext: str) -> Path:
        return self.out_dir / f"{self.item.slug}.{ext}"

    @cached_property
    def provenance(self) -> str:
        """The footer line of the item: the provenance of every result file it reads that exists."""
        from csebench.core.provenance import blocks_of, summary_line

        return summary_line([b for f in self._result_files for b in blocks_of(read_json_cached(str(f)))])

    @cached_property
    def _result_files(self) -> list:
        """The result JSONs behind the item: of every input that exists, itself or the JSON that carries its
        provenance (csebench.core.provenance.result_json)."""
        from csebench.core.provenance import result_json

        inputs = self.renderer.inputs(self) if self.renderer else []
        return list(dict.fromkeys(j for f in inputs if (j := result_json(f)) is not None))

    @cached_property
    def caveat(self) -> str:
        """The capped-evaluation caveat of the item's numbers, with the numbers of pairs or items (from the result
        files behind it: csebench.results.runs.caveat_line); "" where every number is the papers' protocol. Every
        rendering carries it: the Markdown under the scale note, the LaTeX caption, a CSV column, a figure's caption."""
        return caveat_line(read_json_cached(str(f)) for f in self._result_files)

    def figure_caption(self) -> str:
        """What goes under a figure: the caveat, if any, then the provenance line."""
        return f"{self.caveat} {self.provenance}" if self.caveat else self.provenance

    @property
    def scale_note(self) -> str:
        """The Markdown note on the item's scale, then its caveat (bold) where its numbers were scored on capped sets."""
        return self._scale_text() + (f"\n\n**{self.caveat}**" if self.caveat else "")

    def _scale_text(self) -> str:
        if self.scale == "demo":
            theirs = ("the layout is the paper-scale study's, whose numbers these are not comparable to" if
                      load_registry().is_study(self.item.paper) else
                      "the layout and published values are the paper's, our numbers are not comparable to them")
            return ("**Demo scale**: CPU-sized runs (packaged MiniLM, a few training steps, capped evaluation sets where the suite says so: STS pairs, STS-B dev during training, transfer splits; see `params.yaml` suite "
                    f"{', '.join(sorted(set(self.demo_suites())))}); {theirs}.")
        return f"Paper scale: suites {', '.join(f'`{s}`' for s in self.item.suites)} (`params.yaml`)."

    def demo_suites(self) -> list[str]:
        demo = self.item.demo or {}
        out = list((demo.get("suites") or {}).values())
        out += [v.split("/", 1)[0] for v in (demo.get("runs") or {}).values()]
        return out

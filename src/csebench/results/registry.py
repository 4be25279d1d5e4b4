"""The items: every table and figure of the four papers (and SimCSE's main table), and one
suite-level item per suite of params.yaml (its report: tables, figures, README).

Paper items are data, not code: ``resources/reproduction/<paper>.yaml`` lists each paper's items. An
item names what it shows, its metric, its status (``rebuilt`` | ``not-applicable`` | ``not-rebuilt``
with a reason), the suites whose runs it reads, the renderer that draws it (csebench.results.render),
the layout (rows, columns, which run and metric fills each cell) and the published values, each with
its row and column named: the one source of published values (csebench.results.published).
``docs/reproduction.md`` is generated from it.

Cells: a cell's run is the row's ``run`` (or ``runs[i]``), else the column's ``run``; its metric is
the row's ``metrics[i]``, the row's ``metric``, the column's ``metric``, else the block's. Runs are
``suite/run`` or a bare run name of the item's first suite. Metrics: see ``csebench.results.metrics``.

Studies beyond the papers (e.g. ``combinations.yaml``) are registry files whose ``paper:`` says
``study: true``: their items are drawn like a paper's, are labelled as csebench's own study wherever
they are listed, and are not counted in the papers' coverage. A study's row may carry its method's own
published number only where its ``source`` names the paper item it is copied from (zoo/table-1;
tests/test_published.py checks the two are equal).

A paper whose text is not in ../shared/papers may name ``printed: <file>``: its printed numbers, labels and
source URL kept in ``resources/printed/`` (the authors' README, notebook or abstract, or a third-party reprint), which
the order-aware check of tests/test_reproduce.py reads as it reads a paper text.

Every row with published values has a source kind (SOURCE_KINDS): where its numbers were read. The row's
``source_kind``, else its paper's ``source_kind``, else ``paper`` where the paper's text is in
../shared/papers; a row without one is an error. A paper's ``sources: {kind: where}`` names the place of
each kind it uses (a URL and commit); every table that prints the row shows its kind (renderers/grid.py,
renderers/suite.py: the published line, a footnote, a CSV column).

Suite items (``suite/<name>``) are not listed in the YAML: every suite has one, drawn by the
``suite`` renderer; a suite with an ``mteb:`` section also has ``mteb/<name>``, its MTEB table.
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass, field
from functools import lru_cache

from csebench.core.errors import ConfigError
from csebench.core.paths import check_name
from csebench.core.schema import load_yaml_text
from csebench.study.typed import Params

STATUSES = ("rebuilt", "not-applicable", "not-rebuilt")
KINDS = ("table", "figure")
PAPER_FILES = ("simcse", "is-cse", "gs-infonce", "sscl", "distillcse")  # in this order; other files after them
ITEM_KEYS = {"id", "paper", "number", "kind", "title", "shows", "metric", "status", "reason", "renderer", "suites",
             "layout", "published_text", "notes", "demo", "figure"}
SOURCE_KINDS = {  # where a published row's values were read: kind -> its label beside the published line
    "paper": "paper",                       # the paper's own text (../shared/papers, or its abstract)
    "readme": "authors' README",            # the authors' own release, outside the paper's text
    "notebook": "authors' notebook",        # the same, the printed output of a notebook in the authors' repository
    "reprint": "third-party reprint",       # another paper or a leaderboard reprinting the authors' numbers
}
SUITE = "suite"  # the "paper" of suite-level items: suite/<name>
MTEB = "mteb"  # a suite's MTEB table: mteb/<name> (results/<name>/tables/mteb.{md,csv,tex})


@dataclass
class Item:
    id: str                      # "<paper>/<slug>", e.g. "is-cse/table-4"; "suite/<name>" for a suite's report
    paper: str
    number: str                  # as printed: "Table 4", "Figure 3a"
    kind: str                    # table | figure | suite
    title: str
    shows: str
    metric: str
    status: str
    reason: str = ""
    renderer: str | None = None
    suites: list[str] = field(default_factory=list)
    layout: dict = field(default_factory=dict)
    published_text: list[dict] = field(default_factory=list)  # values quoted from the paper's text
    notes: list[str] = field(default_factory=list)
    demo: dict | None = None     # {suites: {paper suite: demo suite}, runs: {"suite/run": "suite/run"}, make_demo: bool}
    figure: dict = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return self.id.split("/", 1)[1]

    @property
    def rebuilt(self) -> bool:
        return self.status == "rebuilt"

    def blocks(self) -> list[dict]:
        lay = self.layout or {}
        return lay.get("blocks") or ([lay] if lay.get("rows") or lay.get("columns") else [])

    @property
    def in_make_demo(self) -> bool:
        """Drawn at demo scale by `make demo` (config `reproduce: demo`): an item with a ``demo:`` section,
        unless it says ``make_demo: false`` (a demo scale that is built only on request)."""
        return bool(self.demo) and self.demo.get("make_demo", True) is not False

    @property
    def configuration(self) -> bool:
        """A table that only echoes hyperparameters (every cell a ``config:`` metric): no run measures it."""
        metrics = [m for b in self.blocks() for m in
                   [b.get("metric"), *(c.get("metric") for c in b.get("columns") or []),
                    *(m for r in b.get("rows") or [] for m in [r.get("metric"), *(r.get("metrics") or [])])] if m]
        return self.renderer == "grid" and bool(metrics) and all(str(m).startswith("config:") for m in metrics)


def _rst(text: str) -> str:
    """Plain text in reStructuredText: inline markup characters escaped, so a caption reads as written."""
    return re.sub(r"([\\`*_|])", r"\\\1", " ".join(str(text).split()))


def cell_run(row: dict, column: dict, j: int) -> str | None:
    """The run of a grid cell (column ``j``): the row's ``runs[j]``, else the row's ``run``, else the column's."""
    runs = row.get("runs")
    return runs[j] if runs is not None else row.get("run", column.get("run"))


def cell_metric(block: dict, row: dict, column: dict, j: int) -> str | None:
    """The metric of a grid cell: the row's ``metrics[j]``, ``metric``, the column's, else the block's."""
    metrics = row.get("metrics")
    return metrics[j] if metrics is not None else row.get("metric") or column.get("metric") or block.get("metric")


def suite_item(suite: str) -> Item:
    """The report of one suite: its STS and transfer tables, figures and README."""
    return Item(id=f"{SUITE}/{suite}", paper=SUITE, number=f"suite {suite}", kind=SUITE, title=f"suite `{suite}`",
                shows="every run of the suite: STS and transfer tables with the published rows bound to its runs, "
                      "training curves, the STS average figure and a README index",
                metric="STS test Spearman × 100 and SentEval transfer accuracy", status="rebuilt", renderer="suite",
                suites=[suite])


def mteb_item(suite: str) -> Item:
    """The MTEB scores of one suite's runs (its ``mteb:`` section), under MTEB's own protocol."""
    return Item(id=f"{MTEB}/{suite}", paper=MTEB, number=f"suite {suite}, MTEB", kind="table",
                title=f"suite `{suite}` on MTEB (MTEB protocol)",
                shows="every evaluated run of the suite on its MTEB tasks (csebench eval-mteb: mteb's own evaluation loop)",
                metric="each task's MTEB main score × 100 (STS: cosine Spearman per split as MTEB defines it, not "
                       "SentEval's \"all\" setting; classification: accuracy; retrieval: nDCG@10)",
                status="rebuilt", renderer="mteb", suites=[suite])


@dataclass
class Registry:
    papers: dict[str, dict]
    items: list[Item]

    def item(self, item_id: str) -> Item:
        if item_id.startswith(f"{SUITE}/"):
            return suite_item(item_id.split("/", 1)[1])
        if item_id.startswith(f"{MTEB}/"):
            return mteb_item(item_id.split("/", 1)[1])
        for it in self.items:
            if it.id == item_id:
                return it
        close = [i.id for i in self.items if i.id.split("/")[0] == item_id.split("/")[0]]
        which = f"of that paper: {', '.join(close)}" if close else "`csebench results list` lists them"
        raise ConfigError(f"unknown item '{item_id}': give a paper item ({which}), suite/<suite> or mteb/<suite>")

    def built(self, scale: str) -> list[Item]:
        """The items a build at this scale makes: every rebuilt item at paper scale; at demo scale
        those with a demo section that do not say ``make_demo: false`` (config ``reproduce:``)."""
        return [it for it in self.items if it.rebuilt and (scale == "paper" or it.in_make_demo)]

    def by_paper(self) -> dict[str, list[Item]]:
        out: dict[str, list[Item]] = {p: [] for p in self.papers}
        for it in self.items:
            out.setdefault(it.paper, []).append(it)
        return out

    def suites(self, rebuilt_only: bool = True) -> list[str]:
        seen: dict[str, None] = {}
        for it in self.items:
            if it.rebuilt or not rebuilt_only:
                for s in it.suites:
                    seen.setdefault(s, None)
        return list(seen)

    def category(self, item: Item) -> str:
        """The item's group in the Snakemake report: its paper's short name, a study marked as one."""
        if item.paper in (SUITE, MTEB):
            return "Suites"
        short = (self.papers.get(item.paper) or {}).get("short", item.paper)
        return f"{short} (a study beyond the papers)" if self.is_study(item.paper) else short

    def caption(self, item: Item, scale: str = "paper") -> str:
        """The item's caption in the Snakemake report (reStructuredText): what it shows, the metric,
        how ours stands beside the published values, the registry's notes."""
        if item.paper in (SUITE, MTEB):
            published = ("Ours: mean ± std over the seeds present"
                         + (", beside the published rows bound to each run (Δ = ours − published)." if item.paper == SUITE
                            else "; MTEB protocol, never beside SentEval's numbers."))
            head = item.title
        else:
            if not self.is_study(item.paper):
                published = ("Ours (mean ± std over the seeds present) beside the published value as printed, Δ = ours − published"
                             + ("." if item.kind == "table" else "; the numbers in the .md and .csv beside it."))
            elif any(r.get("published") for b in item.blocks() for r in b.get("rows") or []):
                published = ("A study of csebench's own: no paper prints this table; beside a row, its method's own paper's "
                             "number where its source names the item it is copied from (Δ = ours − published, across protocols).")
            else:
                published = "A study of csebench's own: no paper prints these numbers, no published values."
            head = f"{self.category(item)} {item.number} ({scale} scale): {item.title}"
        lines = [f"**{_rst(head)}**", "", _rst(item.shows), "", f"Metric: {_rst(item.metric.rstrip('.'))}.", "", _rst(published), ""]
        return "\n".join(lines + [f"- {_rst(n)}" for n in item.notes]) + "\n"

    def source_kind(self, item: Item, row: dict) -> str | None:
        """A published row's source kind (SOURCE_KINDS): the row's, else its paper's, else ``paper`` where
        the paper's text is shipped; None for a row without published values or without a kind."""
        if not any(v is not None for v in row.get("published") or []):
            return None
        meta = self.papers.get(item.paper) or {}
        return row.get("source_kind") or meta.get("source_kind") or ("paper" if meta.get("text") else None)

    def source_where(self, item: Item, row: dict) -> str:
        """Where a published row's values were read, in words: its paper's ``sources`` entry of its kind (a
        study's row: the paper of the item its ``source`` names), else the paper's own text."""
        kind = self.source_kind(item, row)
        paper = item.paper
        if row.get("source"):  # a study's row copies a paper item: "<short> <number>..."
            named = [it for it in self.paper_items
                     if str(row["source"]).startswith(f"{(self.papers.get(it.paper) or {}).get('short', it.paper)} {it.number}")]
            paper = named[0].paper if named else paper
        meta = self.papers.get(paper) or {}
        short = meta.get("short", paper)
        where = (meta.get("sources") or {}).get(kind)
        return f"{short}: {where}" if where else f"{short}: the paper's own text"

    def is_study(self, paper: str) -> bool:
        """A study of csebench's own (``paper: {study: true}``), not a paper's items."""
        return bool((self.papers.get(paper) or {}).get("study"))

    @property
    def paper_items(self) -> list[Item]:
        return [it for it in self.items if not self.is_study(it.paper)]

    def coverage(self) -> dict[str, int]:
        """The papers' items per status (studies left out), and the rebuilt ones split into measured
        items and configuration tables."""
        count = {s: 0 for s in STATUSES}
        items = self.paper_items
        for it in items:
            count[it.status] += 1
        count["total"] = len(items)
        count["applicable"] = count["total"] - count["not-applicable"]
        count["configuration"] = sum(it.rebuilt and it.configuration for it in items)
        count["measured"] = count["rebuilt"] - count["configuration"]
        return count


def default_suites(params: Params) -> list[str]:
    """The default target's suites: SimCSE's main table (`paper`) and every suite the registry reads."""
    suites = ["paper"] + [s for s in load_registry().suites() if s != "paper"]
    known = Params.of(params).suites
    return [s for s in suites if s in known]


def _parse_item(raw: dict, paper: str, where: str) -> Item:
    unknown = set(raw) - ITEM_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)} (valid: {', '.join(sorted(ITEM_KEYS))})")
    for key in ("id", "number", "kind", "title", "shows", "metric", "status"):
        if key not in raw:
            raise ConfigError(f"{where}: missing '{key}'")
    it = Item(paper=raw.get("paper", paper), **{k: v for k, v in raw.items() if k != "paper"})
    if not it.id.startswith(f"{it.paper}/"):
        raise ConfigError(f"{where}: id '{it.id}' must start with '{it.paper}/'")
    check_name(f"{where}: paper", it.paper)  # results/papers/<paper>/<slug>.md
    check_name(f"{where}: item", it.slug)
    if it.status not in STATUSES:
        raise ConfigError(f"{where}: status '{it.status}' (valid: {', '.join(STATUSES)})")
    if it.kind not in KINDS:
        raise ConfigError(f"{where}: kind '{it.kind}' (valid: {', '.join(KINDS)})")
    if it.status == "rebuilt" and not (it.renderer and it.suites):
        raise ConfigError(f"{where}: a rebuilt item needs 'renderer' and 'suites'")
    if it.status != "rebuilt" and not it.reason:
        raise ConfigError(f"{where}: status '{it.status}' needs a 'reason'")
    if not it.slug.startswith(("table-", "figure-")) or it.slug.split("-", 1)[0] != it.kind:
        raise ConfigError(f"{where}: id '{it.id}' must end in '{it.kind}-<number>'")
    return it


def parse_registry(docs: dict[str, dict]) -> Registry:
    papers, items, ids = {}, [], set()
    for name, doc in docs.items():
        if name in (SUITE, MTEB):
            raise ConfigError(f"reproduction/{name}.yaml: '{name}' names suite-level items; rename the paper")
        papers[name] = doc.get("paper") or {}
        for i, raw in enumerate(doc.get("items") or []):
            it = _parse_item(raw, name, f"reproduction/{name}.yaml, item {i + 1}")
            if it.id in ids:
                raise ConfigError(f"reproduction/{name}.yaml: item '{it.id}' appears twice")
            ids.add(it.id)
            items.append(it)
    reg = Registry(papers, items)
    for it in items:  # every published row says where its values were read
        meta = papers.get(it.paper) or {}
        for kind in [meta.get("source_kind"), *(meta.get("sources") or {})]:
            if kind is not None and kind not in SOURCE_KINDS:
                raise ConfigError(f"reproduction/{it.paper}.yaml: paper: source kind '{kind}' (valid: {', '.join(SOURCE_KINDS)})")
        for block in it.blocks():
            for row in block.get("rows") or []:
                kind = reg.source_kind(it, row)
                where = f"reproduction/{it.paper}.yaml, {it.id}, row '{row.get('label', '')}'"
                if row.get("source_kind") is not None and row["source_kind"] not in SOURCE_KINDS:
                    raise ConfigError(f"{where}: source_kind '{row['source_kind']}' (valid: {', '.join(SOURCE_KINDS)})")
                if kind is None and any(v is not None for v in row.get("published") or []):
                    raise ConfigError(f"{where}: published values without a source kind: set source_kind "
                                      f"({' | '.join(SOURCE_KINDS)}) on the row or its paper")
    return reg


def read_registry(root) -> Registry:
    """The registry files of a folder: PAPER_FILES in their order, then any other ``*.yaml`` (sorted)."""
    others = sorted(f.name[:-5] for f in root.iterdir() if f.name.endswith(".yaml") and f.name[:-5] not in PAPER_FILES)
    docs = {}
    for name in (*PAPER_FILES, *others):  # a new paper or study: one more file
        f = root.joinpath(f"{name}.yaml")
        docs[name] = (load_yaml_text(f.read_text(encoding="utf-8"), f"resources/reproduction/{name}.yaml") or {}) if f.is_file() else {}
    return parse_registry(docs)


@lru_cache(maxsize=1)
def load_registry() -> Registry:
    return read_registry(importlib.resources.files("csebench").joinpath("resources/reproduction"))

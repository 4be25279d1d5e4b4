"""The index pages: ``docs/reproduction.md`` (the registry as a coverage matrix; a test fails when it
is stale), ``results/README.md`` (the front page: every paper -> its tables and figures, each linked
when built, else "not yet run" with its suites and their GPU-hours) and ``results/{suite}/README.md``
(a suite's tables and figures)."""

from __future__ import annotations

import os
from pathlib import Path

from csebench.core.io import write_text
from csebench.results.registry import Item, Registry, load_registry
from csebench.results.render import item_outputs
from csebench.results.tables import Table, rel
from csebench.study.typed import Params

STATUS_TEXT = {"rebuilt": "rebuilt", "not-applicable": "not applicable", "not-rebuilt": "not rebuilt"}


def link(path: str | os.PathLike, text: str, base: str | os.PathLike) -> str:
    return f"[{text}]({rel(path, base)})"


def _published_summary(it: Item) -> str:
    n = 0
    for b in it.blocks():
        for row in b.get("rows") or []:
            n += sum(v is not None for v in row.get("published") or [])
    lay = it.layout or {}
    n += sum(p.get("published") is not None for s in lay.get("series") or [] for p in s.get("points") or [])
    n += sum(v.get("published") is not None for v in lay.get("values") or [])
    n += len(lay.get("published") or [])
    t = len(it.published_text)
    source = f" (from {lay['published_from']})" if lay.get("published_from") else ""
    parts = ([f"{n} printed{source}"] if n else []) + ([f"{t} from the text"] if t else [])
    return ", ".join(parts) or "–"


def coverage_line(reg: Registry) -> str:
    """Measured items, configuration tables (they echo params.yaml) and not-applicable items counted apart."""
    c = reg.coverage()
    replots = [f"{reg.papers.get(it.paper, {}).get('short', it.paper)} {it.number} re-plots {it.layout['published_from']}'s "
               "values" for it in reg.items if it.rebuilt and (it.layout or {}).get("published_from")]
    return (f"**Coverage: {c['measured']} measured tables and figures** (rebuilt from runs by a DAG target in the "
            f"paper's layout{'; ' + ', '.join(replots) if replots else ''}), **{c['configuration']} configuration tables** "
            f"(hyperparameters read from `params.yaml`: Δ is = or ≠), {c['not-rebuilt']} not rebuilt and "
            f"**{c['not-applicable']} not applicable** (no measurement), each with its reason: {c['total']} listed.")


STUDY_NOTE = ("beyond the papers: a study of csebench's own, not a paper item (not in the coverage; a published value only "
              "where a row names the paper item it is copied from)")


def _demo_text(it: Item, results: str = "results") -> str:
    if it.in_make_demo:
        return " (demo scale in `make demo`)"
    return f" (demo scale: `{item_outputs(it, results, 'demo')[0]}`, built when asked for, not in `make demo`)" if it.demo else ""


def _papers(reg: Registry) -> list[tuple[str, list, dict]]:
    """(paper, its items, its registry header) in the registry's order."""
    return [(paper, items, reg.papers.get(paper) or {}) for paper, items in reg.by_paper().items()]


def reproduction_md(reg: Registry | None = None) -> str:
    reg = reg or load_registry()
    out = ["# Reproduction: every table and figure of the four papers, and the zoo methods' main tables", "",
           "Generated from `src/csebench/resources/reproduction/*.yaml` by `csebench results docs` "
           "(do not edit; `tests/test_reproduce.py` fails when this page is stale).", "",
           coverage_line(reg), "",
           "Build everything with `snakemake --cores all --resources gpu=1` (every suite below; "
           "`csebench plan` prints the jobs and GPU-hours first), or one item with its DAG target, "
           "e.g. `snakemake --cores all --resources gpu=1 results/papers/is-cse/table-4.md`. "
           "Each table is written as Markdown, CSV and LaTeX; each figure as PNG with a Markdown/CSV "
           "companion holding the plotted numbers. Ours (mean ± std over seeds) stands beside the "
           "published value and Δ = ours − published. The front page of built results is `results/README.md`.", ""]
    for paper, items, meta in _papers(reg):
        out += [f"## {meta.get('short', paper)}: {meta.get('title', '')}", ""]
        if reg.is_study(paper):
            out += [f"**{STUDY_NOTE[0].upper() + STUDY_NOTE[1:]}.**", ""]
        if meta.get("source"):
            out += [meta["source"], ""]
        table = Table(["item", "shows", "metric", "suites", "DAG target", "published values", "status"], "lllllll")
        for it in items:
            target = f"`{item_outputs(it)[0]}`" if it.rebuilt else "–"
            suites = ", ".join(f"`{s}`" for s in it.suites) or "–"
            status = STATUS_TEXT[it.status] + (f": {it.reason}" if it.reason else "")
            table.rows.append([f"{it.number}{_demo_text(it)}", it.title, it.metric, suites, target, _published_summary(it), status])
        out += table.markdown() + [""]
    return "\n".join(out).rstrip() + "\n"


def front_page(results: str = "results", params: Params | None = None, reg: Registry | None = None,
               out_path: str | Path | None = None) -> str:
    """The front page: built items linked (paper and demo scale), the others with their suites' cost
    given what is built: a run whose outputs are on disk (whichever suite built it) is not counted again."""
    from csebench.results.plan import GPU_PEAKS, built_units, distinct, suite_plan

    reg = reg or load_registry()
    base = Path(out_path).parent if out_path else Path(results)
    suites = sorted(p.name for p in Path(results).iterdir() if (p / "README.md").is_file()) if Path(results).is_dir() else []
    known = Params.of(params).suites
    plans: dict = {}
    done: set = set()

    def cost(suite: str) -> str:
        if suite not in known:
            return ""
        if suite not in plans:
            plans[suite] = suite_plan(known[suite])
            done.update(built_units([plans[suite]], results))
        return f"{plans[suite].gpu_hours(GPU_PEAKS['H100'], done=done):.1f}"

    def links(files: list[str]) -> str:
        return " · ".join(link(f, Path(f).suffix.lstrip("."), base) for f in files)

    out = ["# csebench results", "", "Generated by `csebench results front-page` (the `front_page` rule). " + coverage_line(reg), "",
           "Each paper's tables and figures: linked where built (paper scale, and demo scale where the demo "
           "builds one), else the suites that build them and their estimated GPU-hours (H100, `csebench plan`) "
           "given what is built: a run whose outputs are on disk, whichever suite built it, is not counted again "
           "(each distinct run is trained once, docs/runs.md).", ""]
    for paper, items, meta in _papers(reg):
        table = Table(["item", "what", "paper scale", "demo scale"], "llll")
        for it in items:
            if not it.rebuilt:
                table.rows.append([it.number, it.title, f"{STATUS_TEXT[it.status]}: {it.reason}", ""])
                continue
            paper_files, demo_files = item_outputs(it, results, "paper"), item_outputs(it, results, "demo")
            if Path(paper_files[0]).is_file():
                cell = links(paper_files)
            else:
                cell = "not yet run: " + ", ".join(f"`{s}`" + (f" ({c} GPU-h)" if (c := cost(s)) else "") for s in it.suites)
            table.rows.append([it.number, it.title, cell, links(demo_files) if Path(demo_files[0]).is_file() else ""])
        study = f" ({STUDY_NOTE})" if reg.is_study(paper) else ""
        out += [f"## {meta.get('short', paper)}{study}", ""] + table.markdown() + [""]
    if todo := list(plans.values()):
        hours = distinct(todo).gpu_hours(GPU_PEAKS["H100"], done=done)
        out += [f"Everything not yet run: {len(todo)} suites, {hours:.1f} GPU-hours (H100), each distinct run once, "
                "what is built not counted.", ""]
    if suites:
        out += ["## Suites built", ""] + [f"- {link(f'{results}/{s}/README.md', s, base)}" for s in suites] + [""]
    return "\n".join(out).rstrip() + "\n"


def suite_readme(path: str | os.PathLike, suite: str, tables: dict, figures: list[Path], glance: list[list[str]],
                 footer: str, description: str = "", extra_tables: list[Path] | None = None, caveat: str = "") -> None:
    """``results/{suite}/README.md``: links to every table (``tables``: kind -> (Kind, files)) and figure
    given, paths relative to it, and the STS averages at a glance (``glance``: one row of cells per run), under
    ``caveat`` where they were scored on capped sets."""
    path = Path(path)
    base = path.parent
    names = {".md": "Markdown", ".csv": "CSV", ".tex": "LaTeX"}
    out = [f"# csebench results — suite `{suite}`", ""]
    if description:
        out += [description, ""]
    out += [f"Generated by `csebench results render --item suite/{suite}` (do not edit by hand).", "", "## Tables", ""]
    for kind, files in tables.values():
        if files:
            out.append(f"- {kind.title} ({kind.unit}): " + " · ".join(link(f, names.get(f.suffix, f.suffix.lstrip(".").upper()), base) for f in files))
    titles = {"mteb": "MTEB tasks (MTEB protocol, not SentEval's \"all\" setting)"}
    out += [f"- {titles.get(t.stem, t.stem.replace('_', ' '))}: {link(t, t.name, base)}" for t in extra_tables or []] + [""]
    if glance:
        table = Table(["Backbone", "Run", "Seeds", "Avg. (ours)", "Published Avg.", "p (vs baseline)"], "llrrlr", glance)
        out += ["## STS average at a glance", ""] + ([f"**{caveat}**", ""] if caveat else []) + table.markdown() + [""]
    if figures:
        out += ["## Figures", ""]
        for f in figures:
            title = f.stem.replace("_", " ").replace("-", " ")
            out += [f"### {title}", "", link(f, f.name, base), "", f"![{title}]({rel(f, base)})", ""]
    out += ["## Notes", "",
            "- Published numbers: the registry rows bound to these runs (`src/csebench/resources/reproduction/*.yaml`; "
            "paper, table and row named in each table).",
            "- Significance: paired t-test over seeds when a method and SimCSE share ≥ 2 seeds; otherwise a paired "
            "bootstrap over the STS test sentence pairs (1 model each, `eval-sts --pairs-out`); the test used is "
            "named in each table row.",
            "- Training curves in DVC: `dvc plots show` / `dvc plots diff` (plots defined in `dvc.yaml`).",
            f"- {footer}", ""]
    write_text(path, "\n".join(out))

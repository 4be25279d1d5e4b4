"""`csebench results ...`: render items (paper tables and figures, suite reports), list them, write
docs/reproduction.md and the front page. Thin wrappers over csebench.results."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from csebench.core.argtypes import positive_int
from csebench.core.commands import OUT, PARAMS, Command, Commands, option
from csebench.study.cli import params_of

log = logging.getLogger("csebench")
COMMANDS = Commands(stage=50)


def _results_folder(args) -> list[tuple[str, bool]]:
    """`results render` without --out-dir writes into the results folder itself."""
    if getattr(args, "out_dir", None) is None and getattr(args, "results", None):
        return [(args.results, True)]
    return []



def cmd_render(args) -> None:
    from csebench.core.io import staged_outputs
    from csebench.results.render import render_item

    params = params_of(args)
    for item in args.item:
        with staged_outputs():  # an item's files appear together, or (error, Ctrl-C) not at all
            written = render_item(item, params, args.results, args.scale, args.out_dir, links=args.link, n_boot=args.n_boot)
        scale = "" if item.startswith(("suite/", "mteb/")) else f" ({args.scale} scale)"  # a suite's items have one scale
        log.info("%s%s: %s", item, scale, ", ".join(map(str, written)))


def cmd_docs(args) -> None:
    from csebench.core.io import write_text
    from csebench.results.pages import reproduction_md

    text = reproduction_md()
    if args.check:
        current = Path(args.out).read_text(encoding="utf-8") if Path(args.out).is_file() else ""
        if current != text:
            print(f"{args.out} is stale: run `csebench results docs`", file=sys.stderr)
            raise SystemExit(1)
        return
    write_text(args.out, text)
    log.info("wrote %s", args.out)


def cmd_front_page(args) -> None:
    from csebench.core.io import write_text
    from csebench.results.pages import front_page

    write_text(args.out, front_page(args.results, params_of(args), out_path=args.out))
    log.info("wrote %s", args.out)


def cmd_list(args) -> None:
    from csebench.results.registry import load_registry
    from csebench.results.render import item_outputs

    for it in load_registry().items:
        if args.suite and args.suite not in it.suites:
            continue
        target = item_outputs(it, args.results)[0] if it.rebuilt else ""
        print(f"{it.id:<28} {it.status:<15} {','.join(it.suites):<40} {target}")


def _build(parser) -> None:
    from csebench.core.commands import PARAMS, add_commands
    from csebench.results.context import SCALES

    results = option("--results", default="results", help="results root (default: results)")
    add_commands(parser.add_subparsers(dest="results_command", required=True, metavar="COMMAND", title="commands"), [
        Command("render", "write one or more items", cmd_render, (
            PARAMS,
            option("--item", nargs="+", required=True,
                   help="item id(s): a paper item, e.g. is-cse/table-4 (see `results list`), suite/<suite> (its report) "
                        "or mteb/<suite> (its MTEB table)"),
            option("--scale", default="paper", choices=SCALES), results,
            option("--out-dir", default=None,
                   help="default: results/papers/<paper> (demo: results/demo/papers/<paper>); a suite's: results/<suite>"),
            option("--link", nargs="*", default=[], help="a suite README's other files to link (analysis figures and tables)"),
            option("--n-boot", type=positive_int, default=1000, help="a suite table's paired bootstrap resamples (default: 1000)"))),
        Command("docs", "write docs/reproduction.md from the registry", cmd_docs, (
            option("--out", default="docs/reproduction.md"), option("--check", action="store_true", help="exit 1 if the file is stale"))),
        Command("front-page", "write results/README.md: every paper's items, linked when built", cmd_front_page, (
            PARAMS, results.but(default="results", help=None), option("--out", default="results/README.md"))),
        Command("list", "one line per registry item: id, status, suites, DAG target", cmd_list, (
            option("--suite", default=None), results.but(help=None))),
    ])


COMMANDS.command("results", "tables, figures and pages: paper items, suite reports, the front page", build=_build,
                 also_writes=_results_folder)(None)


@COMMANDS.command("plan", "suites, jobs, training runs and GPU-hours before anything runs", PARAMS,
                  option("--suites", nargs="+", default=None, help="default: every suite of the default target"), writes=False)
def cmd_plan(args) -> None:
    from csebench.results.plan import plan, render_plan
    from csebench.results.registry import default_suites

    params = params_of(args)
    print(render_plan(plan(params, args.suites or default_suites(params))))


@COMMANDS.command("suite-metrics", "a suite's tidy metrics.json (run -> seed -> metric): DVC's metrics", PARAMS,
                  option("--suite", required=True), option("--results", default="results", help="results folder (default: results)"),
                  OUT.but(help="output file, RESULTS/SUITE/metrics.json"))
def cmd_suite_metrics(args) -> None:
    from csebench.core.io import write_json
    from csebench.results.tidy import suite_metrics

    write_json(args.out, suite_metrics(params_of(args).suite(args.suite), args.results))


@COMMANDS.command("compare", "runs side by side from their folders: STS (and transfer) with the paired test against the first",
                  option("runs", nargs="+", metavar="RUN_DIR",
                         help="run folders: results/runs/KEY/seedN (or results/runs/KEY, its seeds), a suite's view "
                              "results/SUITE/runs/RUN/seedN, or a `csebench train --out` folder; the first is the baseline"),
                  option("--markdown", default=None, help="also write the tables as Markdown to this file"),
                  option("--latex", default=None, help="also write them as LaTeX (booktabs) to this file"),
                  option("--csv", default=None, help="also write them as CSV (a row per run and column) to this file"),
                  option("--n-boot", type=positive_int, default=1000,
                         help="paired bootstrap resamples, for runs with fewer than 2 common seeds (default: 1000)"))
def cmd_compare(args) -> None:
    from csebench.core.io import write_csv, write_text
    from csebench.results.compare import CSV_HEADER, compare, csv_rows, latex, markdown, terminal_lines

    tables = compare(args.runs, args.n_boot)
    print("\n\n".join("\n".join(terminal_lines(c)) for c in tables))
    if args.markdown:
        write_text(args.markdown, markdown(tables))
    if args.latex:
        write_text(args.latex, latex(tables))
    if args.csv:
        write_csv(args.csv, CSV_HEADER, csv_rows(tables))

"""`csebench rehearse`, `view-run`, `dvc-yaml`, `dvc-commit`: the whole DAG rehearsed offline, a suite's view of a
shared run, and DVC's side of the build.
"""

from __future__ import annotations

import argparse
import logging

from csebench.core.commands import OUT, PARAMS, Commands, option, positive_int
from csebench.core.errors import TrainingError
from csebench.study.cli import params_of

COMMANDS = Commands(stage=70)


def _depth(text: str) -> int | None:
    if text == "published":
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of layers >= 1 or 'published', got {text!r}") from None


@COMMANDS.command("rehearse", "every distinct run of the default target through the real code, offline: random-weight "
                  "BERT/RoBERTa of the published shapes, 2 steps (README, Rehearsal)", PARAMS,
                  option("--suites", nargs="+", default=None, help="default: every suite of the default target"),
                  option("--out", default="results/rehearsal", help="the rehearsal's folder (default: results/rehearsal)"),
                  option("--only", default=None, help="only the distinct runs listed as SUITE/RUN containing this text"),
                  option("--limit", type=positive_int, default=None, help="only the first N distinct runs"),
                  option("--stop", action="store_true", help="stop at the first failure (default: rehearse every run, list failures)"),
                  option("--depth", type=_depth, default=2, help="layers of each backbone (default 2, or as many as a run's "
                "settings use); 'published': 12 or 24, as the papers' models"),
                  option("--keep-models", action="store_true", help="keep every rehearsed model's weights (default: delete "
                "them once nothing reads them, several GB otherwise)"))
def cmd_rehearse(args) -> None:
    from pathlib import Path

    from csebench.workflow.rehearse import rehearse, report, select

    # the settings (a suite named ../x, an unknown suite) are checked before --out is made: nothing written yet
    selection = select(args.params, args.config, args.suites, limit=args.limit, only=args.only)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    quiet = logging.Filter()  # the console shows the rehearsal's lines and errors; every command's log goes to the file
    quiet.filter = lambda rec: rec.name == "csebench.workflow.rehearse" or rec.levelno >= logging.ERROR
    for h in root.handlers:
        h.addFilter(quiet)
    fh = logging.FileHandler(out / "rehearse.log", mode="w", encoding="utf-8")
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(fh)
    try:
        outcome = rehearse(args.run_command, selection, out, keep_going=not args.stop, keep_models=args.keep_models, depth=args.depth)
    finally:
        root.removeHandler(fh)
        fh.close()
        for h in root.handlers:
            h.removeFilter(quiet)
    print(report(outcome))
    if outcome.failed:
        raise TrainingError(f"{len(outcome.failed)} rehearsal(s) failed (listed above; {out / 'rehearse.log'} has each traceback)")


@COMMANDS.command("view-run", "a suite's view of a shared run: relabelled JSON results, links to the rest", PARAMS,
                  option("--suite", required=True), option("--run", required=True), option("--seed", type=int, required=True),
                  option("--from", dest="source", required=True, help="the run's folder (or its evaluation/analysis folder)"),
                  OUT.but(help="the suite's folder, e.g. results/SUITE/runs/RUN/seedN"),
                  option("--first", help="SUITE/RUN: the first suite and run of params.yaml listing this run (default: worked out)"),
                  option("names", nargs="+", help="entries of --from to show in --out"), out_folder=True)
def cmd_view_run(args) -> None:
    from csebench.workflow.runviews import write_view

    params = params_of(args)
    first = args.first
    if first is None:  # by hand: resolve every run of params.yaml (Snakemake passes --first)
        runs = params.runs
        first = "/".join(runs.first(runs.key(args.suite, args.run), args.seed))
    write_view(params.suite(args.suite).run_info(args.run, args.seed), first, args.source, args.out, args.names)


@COMMANDS.command("dvc-yaml", "generate dvc.yaml: a stage per suite and per paper item (docs/dvc.md)", PARAMS,
                  option("--out", default="dvc.yaml", help="output file, '-' for stdout"),
                  option("--check", action="store_true", help="exit 1 if the file is out of date"), writes=False)
def cmd_dvc_yaml(args) -> None:
    from csebench.workflow.dvcgen import main_dvc_yaml

    rc = main_dvc_yaml(args.params, args.out, args.check)
    if rc:
        raise SystemExit(rc)


@COMMANDS.command("dvc-commit", "dvc commit --force, after refusing any link out of the repository in what it records (the "
                  "run store: docs/dvc.md)",
                  option("targets", nargs="*", default=["runs.dvc"], metavar="TARGET",
                help=".dvc files or dvc.yaml stages (default: runs.dvc, the run store)"))
def cmd_dvc_commit(args) -> None:
    from csebench.workflow.dvccommit import dvc_commit

    rc = dvc_commit(args.targets)
    if rc:
        raise SystemExit(rc)

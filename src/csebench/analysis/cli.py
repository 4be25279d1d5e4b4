"""`csebench analyze NAME` (one analysis -> its JSON, some also a figure or a Markdown table) and
`csebench analyze-figure NAME` (a suite's figure or table drawn from several of its results): a command
per analysis, built from its declaration (csebench.analysis.base): its inputs, settings and outputs.

    csebench analyze --help                       every analysis, one line each
    csebench analyze align_uniform --help         its inputs and settings
    csebench analyze align_uniform --model M --senteval S --out a.json
    csebench analyze-figure align_uniform --inputs a.json ... --sts sts.json ... --out f.png
"""

from __future__ import annotations

import os

from csebench.core.commands import NO_VERIFY, PARAMS, Commands, add_options, option
from csebench.analysis import ANALYSES

COMMANDS = Commands(stage=40)


def _build_analyze(parser) -> None:
    from csebench.analysis.base import ENCODING, INPUTS, STS_CAP, settings_options

    sub = parser.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS", title="analyses")
    for name, a in ANALYSES.items():
        sp = sub.add_parser(name, help=a.summary, description=a.summary)
        needs = [INPUTS[i].but(help=f"{INPUTS[i].kwargs['help']} (required)") for i in a.needs]
        sts_cap = [STS_CAP] if "senteval" in a.inputs() else []
        add_options(sp, *needs, *(INPUTS[i] for i in a.inputs()), *sts_cap, a.options, ENCODING,
                    option("--out", required=True, help="JSON result"), settings_options(a.Settings), PARAMS, NO_VERIFY)
        # the inputs it does not take read as not given (the envelope asks every analysis the same)
        sp.set_defaults(**{i: opt.kwargs.get("default") for i, opt in INPUTS.items() if i not in a.inputs()})
        if not sts_cap:
            sp.set_defaults(max_sts_pairs=None)


@COMMANDS.command("analyze", "one of the papers' analyses of a model (JSON; some also PNG or Markdown): analyze NAME --help",
                  build=_build_analyze)
def cmd_analyze(args) -> None:
    from csebench.core.corpus import read_corpus  # noqa: F401  its checks, and the corpus sha256 in the provenance
    from csebench.core.errors import ConfigError
    from csebench.analysis.base import Context

    a = ANALYSES.get(args.analysis)
    missing = [f"--{n.replace('_', '-')}" for n in a.needs if not getattr(args, n)]
    if missing:
        raise ConfigError(f"analyze {a.name} needs {', '.join(missing)}")
    if a.check:
        a.check(args)
    ctx = Context(a, args)
    ctx.write(a.run(ctx))


def _build_figure(parser) -> None:
    sub = parser.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS", title="analyses")
    for name, a in ANALYSES.items():
        if a.combine is None:
            continue
        what = "PNG" if a.combine.output == "figure" else "Markdown table"
        sp = sub.add_parser(name, help=f"a suite's {what}: {a.summary}", description=a.summary)
        sp.add_argument("--inputs", nargs="+", required=True, help=f"the models' {name}.{a.combine.reads}")
        if a.combine.sts:
            sp.add_argument("--sts", nargs="*", default=[], help="each input's sts.json, in the same order (average STS colour)")
        sp.add_argument("--out", required=True, help=what)
        if a.combine.csv:
            sp.add_argument("--csv", default=None, help="also a CSV table")
        sp.add_argument("--title", default="")


def _label_of(path: str, res: dict) -> str:
    if res.get("label"):
        return res["label"]
    parts = os.path.normpath(path).split(os.sep)
    return "/".join(parts[-3:-1]) if len(parts) >= 3 else os.path.basename(path)


@COMMANDS.command("analyze-figure", "a suite's figure or table from analysis results: analyze-figure NAME --help", build=_build_figure)
def cmd_analyze_figure(args) -> None:
    from csebench.core.io import read_json
    from csebench.core.provenance import blocks_of, result_json, summary_line

    a = ANALYSES.get(args.analysis)
    # the footer: the provenance of every result drawn (an input .md stands for its .json sibling)
    drawn = dict.fromkeys(j for f in [*args.inputs, *getattr(args, "sts", [])] if (j := result_json(f)) is not None)
    footer = summary_line([b for f in drawn for b in blocks_of(read_json(f))])
    if a.combine.reads == "json":
        results: dict = {}
        for path in args.inputs:
            res = read_json(path)
            label = _label_of(path, res)
            while label in results:
                label += "'"
            results[label] = res
    else:
        results = {path: open(path, encoding="utf-8").read() for path in args.inputs}
    a.combine.draw(results, args.out, args, footer)

"""How a csebench command is declared: beside its handler, with its options.

    @COMMANDS.command("eval-sts", "STS12-16, STS-B, SICK-R (Spearman x100)", PARAMS, EVAL_ENCODING, MODEL, ...)
    def cmd_eval_sts(args): ...

A package's ``cli`` module holds its commands (``COMMANDS = Commands(stage=N)``, its handlers decorated with
``@COMMANDS.command``); csebench.cli builds the parser from every package's, so `csebench --help` lists every
command with its one-line summary, and adding a command is its handler (and its test), beside its package.
An option is declared once (``option``) and shared by the commands that take it, in groups (tuples).
A command with commands of its own (`results render`, `analyze NAME`) gives ``build(parser)``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from csebench.core.argtypes import positive_int
from csebench.core.choices import EVAL_PRECISIONS


@dataclass(frozen=True)
class Option:
    """One command-line option: argparse's flags and keyword arguments."""

    flags: tuple[str, ...]
    kwargs: dict

    @property
    def dest(self) -> str:
        return self.kwargs.get("dest") or self.flags[0].lstrip("-").replace("-", "_")

    def add_to(self, parser) -> None:
        parser.add_argument(*self.flags, **self.kwargs)

    def but(self, **kwargs) -> "Option":
        """The same option with other keyword arguments (another help, required, default)."""
        return Option(self.flags, {**self.kwargs, **kwargs})


def option(*flags: str, **kwargs) -> Option:
    return Option(flags, kwargs)


def add_options(parser, *groups) -> None:
    """Options and groups of options (tuples or lists), in order; an option given again replaces the earlier one."""
    flat: dict[str, Option] = {}
    for g in groups:
        for opt in (g if isinstance(g, (tuple, list)) else (g,)):
            flat[opt.dest] = opt
    for opt in flat.values():
        opt.add_to(parser)


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    func: Callable | None
    options: tuple
    build: Callable | None = None  # build(parser): commands of its own
    out_folder: bool = False  # its --out names a folder (checked writable as one before any work)
    writes: bool = True  # False: it only reads and prints (nothing to check before it runs)
    also_writes: Callable | None = None  # args -> [(path, is a folder)]: other outputs checked before any work


class Commands(list):
    """A package's commands, in the order its module declares them: each package with commands has a ``cli``
    module whose ``COMMANDS = Commands(stage=N)`` holds them (csebench.cli builds the parser from every package's).
    ``stage``: where the package's commands come in `csebench --help`, the pipeline's order (the study's 10,
    training 20, evaluation 30, analysis 40, results 50, sharing 60, the workflow's 70); a package that gives none
    comes last."""

    def __init__(self, stage: int = 100):
        super().__init__()
        self.stage = stage

    def command(self, name: str, summary: str, *options, build: Callable | None = None, out_folder: bool = False,
                writes: bool = True, also_writes: Callable | None = None):
        """Declare the decorated function as the handler of `csebench NAME`, taking ``options``."""
        def register(func):  # a name declared twice, here or by another package: csebench.cli.declared_commands
            self.append(Command(name, summary, func, options, build, out_folder, writes, also_writes))
            return func
        return register


def add_commands(sub, commands: list[Command]) -> None:
    """A subparser per command: its summary as help and description, its options, its handler."""
    for c in commands:
        sp = sub.add_parser(c.name, help=c.summary, description=c.summary)
        add_options(sp, *c.options)
        if c.build:
            c.build(sp)
        if c.func:
            sp.set_defaults(func=_current(c.func))


def _current(func: Callable) -> Callable:
    """The handler as its module holds it now (a test may have replaced it there)."""
    module = sys.modules.get(func.__module__)
    return getattr(module, func.__name__, func) if module is not None else func


# ------------------------------------------------------------------------------------------- shared options

PARAMS = (option("--params", default="params.yaml", help="hyperparameter file (default: params.yaml here, else the one of the "
                                                                "checkout csebench is installed from)"),
          option("--config", action="append", default=[], help="YAML file merged over params (repeatable)"))
NO_VERIFY = option("--no-verify", action="store_true",
                   help="load a run's model even if its weight files differ from the sha256 its train.json recorded")
NO_PROGRESS = option("--no-progress", action="store_true")
MODEL = option("--model", required=True,
               help="a run's model/ folder, a backbone name of params.yaml (e.g. minilm, bert-base), a Hugging Face "
                    "hub id (e.g. princeton-nlp/unsup-simcse-bert-base-uncased) or packaged:minilm")
SENTEVAL = option("--senteval", default=None,
                  help="SentEval folder or prepared pointer folder (default: the shared data params.yaml names, "
                       "paths.shared/senteval, or $CSEBENCH_SHARED/senteval)")
OUT = option("--out", required=True)
POOLER = option("--pooler", default=None, help="override the saved evaluation pooler")
PREFIX = option("--prefix", default=None, metavar="TEXT",
                help="a text put before every sentence, e.g. 'query: ' (E5's for STS) (default: the saved run's "
                     "training.prefix, else the model's default prompt in config_sentence_transformers.json, else none)")
BATCH_SIZE = option("--batch-size", type=positive_int, default=None,
                    help="encoding batch size (default: 128 on a GPU, 64 on CPU, the faster there)")
PRECISION = option("--precision", default=None, choices=EVAL_PRECISIONS,
                   help="encoding precision (default: the table's, else auto = bf16 on bf16 GPUs, fp32 on CPU; "
                        "int8: a CPU screening precision, not exact)")
TABLE = option("--embeddings", default=None,
               help="embeddings table from `csebench embed` (RUN_DIR/embeddings.npz): look sentences up instead of encoding")
# how an evaluation encodes: the model (or its embeddings table), its pooler, batch size and precision
EVAL_ENCODING = (NO_VERIFY, POOLER, BATCH_SIZE, TABLE, PRECISION)
KEY = option("--key", help="instead of --suite/--run: the run's key (its folder results/runs/KEY), named "
                           "by the first suite and run of params.yaml that list it")
# the run a result is booked to (its run_info), for the eval commands
EVALUATED_RUN = (option("--suite"), option("--run"), option("--seed", type=int, default=0), KEY, NO_PROGRESS)
# a run of params.yaml; --run-name: the same option for torchrun, whose own parser takes --run for an
# abbreviation of its --run-path and stops
RUN = (option("--suite"), option("--run", "--run-name", dest="run", help="run name within the suite"),
       option("--seed", type=int, required=True), KEY)

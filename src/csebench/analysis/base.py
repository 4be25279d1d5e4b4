"""The shape of an analysis. An analysis is one file, csebench/analysis/analyses/NAME.py,
whose ``ANALYSIS = Analysis(__name__, ...)`` declares

    summary    one line: what it measures, for which paper item (`csebench analyze --help`)
    reads      "model" (one run at one seed), "run" (every seed of a run) or "suite" (models a suite chooses)
    run        ``run(ctx) -> dict``: the result; the envelope (model, pooler, label, timing, provenance) is
               written around it in one place (Context.write)
    Settings   a dataclass of its settings and their defaults: `csebench analyze NAME --option`, and in the
               Snakemake config `analysis: {NAME: {option: value}}`
    needs      the inputs it must be given, ``takes`` those it may be (INPUTS: --model, --senteval, ...),
               ``writes`` the files besides its JSON that the pipeline has it write (--figure, --markdown)
    combine    a suite's figure or table drawn from the per-model results (`csebench analyze-figure NAME`)
    pipeline   ``pipeline(job)``: the files the pipeline gives it (csebench.analysis.pipeline)

NAME is its one spelling: the command, the config, its result files (NAME.json) and the rules
(analysis_NAME). The CLI, the Snakemake rules and targets and the config check are generated from
these declarations: adding an analysis is its file and its test.
"""

from __future__ import annotations

import dataclasses
import os
import time
import typing
from dataclasses import dataclass, field
from typing import Any, Callable

from csebench.core.argtypes import positive_int
from csebench.core.commands import BATCH_SIZE, POOLER, PRECISION, Option, option
from csebench.core.errors import ConfigError


# What an analysis may read or write besides its JSON, named once: an analysis lists the names it
# needs and takes. The pipeline gives files of the kinds in MODEL_INPUTS as a run's train.json (the
# model folder beside it is passed) and ``senteval`` as the prepared pointer file (its folder is passed).
INPUTS: dict[str, Option] = {
    "model": option("--model", help="model folder (or packaged:minilm)"),
    "teacher": option("--teacher", action="append", default=[], help="teacher model folder (repeatable)"),
    "models": option("--models", nargs="+", default=[], help="models side by side"),
    "labels": option("--labels", nargs="+", default=[], help="their names (default: run/seed folders)"),
    "senteval": option("--senteval", help="SentEval folder or prepared pointer folder"),
    "corpus": option("--corpus", help="training corpus (one sentence per line)"),
    "embeddings": option("--embeddings", nargs="+", default=None, help="embeddings table(s) (`csebench embed`)"),
    "figure": option("--figure", help="also draw a PNG figure"),
    "markdown": option("--markdown", help="also write a Markdown table"),
    "title": option("--title", default="", help="figure title"),
}
# with --senteval: a capped evaluation's STS pairs (the suite's evaluation.max_sts_pairs, CPU demo scale): an
# analysis of STS-B sentences reads the seeded subset eval-sts scores at that cap (analysis.core.stsb_pairs)
STS_CAP = option("--max-sts-pairs", type=positive_int, default=None,
                 help="read each STS-B split as the seeded subset of about N pairs that `eval-sts --max-sts-pairs N` "
                      "scores (CPU demo scale; the pipeline passes its suite's evaluation.max_sts_pairs)")
MODEL_INPUTS = ("model", "teacher", "models", "self_teacher", "other_teachers", "other_students")
# every analysis: its name in figures, how the vectors are made
ENCODING = (option("--label", default="", help="model name in figures (default: the run folder)"), POOLER, BATCH_SIZE, PRECISION)


# ------------------------------------------------------------------------------------------- settings

def setting(default: Any, help: str, *, choices: tuple | None = None, minimum: float | None = None,
            cli: bool = True, repeat: bool = False):
    """A field of an analysis's Settings: its default, its help, its allowed values. ``cli=False``: a
    setting of the pipeline only (which models a suite analysis reads), not of the command;
    ``repeat``: a list option given once per value (``--query A --query B``)."""
    meta = {"help": help, "choices": choices, "minimum": minimum, "cli": cli, "repeat": repeat}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


class Settings:
    """The base of every analysis's settings: the choices and minimums its fields declare, checked
    where the settings are read (the Snakemake config; argparse checks the command line's)."""

    def validate(self, where: str) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            values = value if isinstance(value, list) else [value]
            for v in values:
                if v is None:
                    continue
                if f.metadata.get("choices") and v not in f.metadata["choices"]:
                    raise ConfigError(f"{where}.{f.name}: {v!r} is not one of {', '.join(map(str, f.metadata['choices']))}")
                if f.metadata.get("minimum") is not None and v < f.metadata["minimum"]:
                    raise ConfigError(f"{where}.{f.name}: must be at least {f.metadata['minimum']}, got {v!r}")


@dataclass
class NoSettings(Settings):
    pass


@dataclass
class StsbSplit(Settings):
    """The settings of an analysis of STS-B sentences: which split."""

    split: str = setting("test", "STS-B split", choices=("dev", "test"))


def _base_type(hint) -> tuple[type, bool, bool]:
    """(element type, is a list, may be None) of a Settings field's annotation."""
    optional = False
    args = typing.get_args(hint)
    if args and type(None) in args:
        optional = True
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is list:
        return typing.get_args(hint)[0], True, optional
    return hint, False, optional


def settings_options(cls: type) -> list[Option]:
    """The command-line options of a Settings dataclass: ``--field-name``, typed as annotated."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("cli", True):
            continue
        kind, many, _ = _base_type(hints[f.name])
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kw: dict = {"dest": f.name, "default": default, "help": _help(f, default)}
        if kind is bool:
            kw["action"] = "store_true"
        else:
            kw["type"] = positive_int if kind is int and f.metadata.get("minimum") == 1 else kind
            if f.metadata.get("choices"):
                kw["choices"] = list(f.metadata["choices"])
            if many:
                kw["action" if f.metadata.get("repeat") else "nargs"] = "append" if f.metadata.get("repeat") else "+"
        out.append(option(f"--{f.name.replace('_', '-')}", **kw))
    return out


def _help(f, default) -> str:
    if default is None or default is False or default == [] or default == "":
        return f.metadata.get("help", "")
    shown = " ".join(map(str, default)) if isinstance(default, list) else default
    return f"{f.metadata.get('help', '')} (default: {shown})"


def settings_argv(settings) -> list[str]:
    """The command-line form of settings (what the pipeline passes): every option the command takes."""
    argv: list[str] = []
    for f in dataclasses.fields(settings):
        if not f.metadata.get("cli", True):
            continue
        value, flag = getattr(settings, f.name), f"--{f.name.replace('_', '-')}"
        if value is None or value is False or value == []:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [a for v in value for a in (flag, str(v))] if f.metadata.get("repeat") else [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


# ------------------------------------------------------------------------------------------- the declaration

@dataclass(frozen=True)
class Combine:
    """A suite's figure or table drawn from every evaluated run's result (`csebench analyze-figure NAME`):
    ``draw(inputs, out, args, footer)`` with ``inputs`` the result files, ``args`` the command's options."""

    draw: Callable
    output: str = "figure"      # figure: results/{suite}/figures/NAME.png; table: results/{suite}/tables/NAME.md
    csv: bool = False           # a table: also NAME.csv
    reads: str = "json"         # the per-model file it reads: NAME.json or NAME.md
    sts: bool = False           # also each run's sts.json, in the same order (--sts)


@dataclass(frozen=True)
class Analysis:
    module: str
    summary: str
    reads: str
    run: Callable[["Context"], dict]
    Settings: type = NoSettings
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()           # what the pipeline has it write besides its JSON: figure, markdown
    options: tuple[Option, ...] = ()       # options of its own (inputs no other analysis reads)
    sentence_embeddings: bool = False      # reads sentence embeddings only: its --embeddings table serves them
    check: Callable | None = None          # check(args): what argparse cannot say about its arguments
    combine: Combine | None = None
    pipeline: Callable | None = None       # pipeline(job): its inputs in the pipeline; None: built on request only
    listed: bool = True                    # may be listed in the config's `analyses:` (its suite outputs)
    shared: bool = True                    # reads a model: computed once per run (False: per suite, e.g. its groups)
    gpu: bool = False                      # its job holds a GPU (the pipeline's `gpu` resource)
    threads: int | None = None             # its job's threads (None: the config's `threads`)

    def __post_init__(self):
        if self.reads not in ("model", "run", "suite"):
            raise ValueError(f"{self.module}: reads must be model, run or suite, not {self.reads!r}")

    @property
    def name(self) -> str:
        return self.module.rsplit(".", 1)[-1]

    def settings(self, given: dict | None = None, where: str | None = None):
        """Its Settings from a mapping (the Snakemake config), defaults filled in, checked."""
        from csebench.core.schema import from_dict

        return from_dict(self.Settings, given, where or f"analysis.{self.name}")

    def inputs(self) -> tuple[str, ...]:
        """The names of INPUTS its command takes: what it needs, may take, and writes besides its JSON."""
        return tuple(dict.fromkeys((*self.needs, *self.takes, *self.writes)))


# ------------------------------------------------------------------------------------------- running one

class Context:
    """What ``run(ctx)`` is given: the arguments, the settings, and the ways to encode."""

    def __init__(self, analysis: Analysis, args):
        self.analysis = analysis
        self.args = args
        self.settings = analysis.Settings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(analysis.Settings)
                                             if f.metadata.get("cli", True)})
        self.tables: list = []  # the embeddings tables that served the result (their provenance goes with it)
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()

    def __getattr__(self, name: str):  # the inputs: ctx.model, ctx.corpus_path, ...
        return getattr(self.args, name)

    def options(self, *leave: str) -> dict:
        """The settings the command takes, as keyword arguments (but those named in ``leave``)."""
        return {f.name: getattr(self.settings, f.name) for f in dataclasses.fields(self.settings)
                if f.metadata.get("cli", True) and f.name not in leave}

    @property
    def senteval_root(self) -> str:
        from csebench.evaluation.locate import senteval_root

        return senteval_root(self.args.senteval)

    def corpus(self) -> list[str]:
        from csebench.core.corpus import read_corpus

        return read_corpus(self.args.corpus)

    def encoder(self, path: str | None = None, what: str = "--model", pooler: Any = "given"):
        """A saved model (evaluation pooler, the command's --pooler unless ``pooler`` says otherwise)."""
        from csebench.evaluation.embeddings import load_eval_model

        return load_eval_model(path or self.args.model, self.args.pooler if pooler == "given" else pooler, what)

    def encode_with(self, enc, precision: Any = "given"):
        from csebench.evaluation.embeddings import encode_with

        return encode_with(enc, self.args.batch_size, (self.args.precision if precision == "given" else precision) or "auto")

    def encode(self):
        """The model's encode function: its --embeddings table when the analysis is served by one
        (sentence embeddings only), else the model at --precision."""
        if self.analysis.sentence_embeddings:
            from csebench.evaluation.embeddings import evaluation_encoder

            tables = self.args.embeddings or []
            if len(tables) > 1:
                raise ConfigError(f"analyze {self.analysis.name} takes one --embeddings table (the model's)")
            encode = evaluation_encoder(self.args.model, self.args.pooler, self.args.batch_size, self.args.precision,
                                        tables[0] if tables else None)
            self.tables.append(getattr(encode, "table", None))
            return encode
        return self.encode_with(self.encoder())

    def footer(self) -> str:
        """The provenance line under a figure or table this command draws from its own result."""
        from csebench.evaluation.envelope import for_evaluation
        from csebench.core.provenance import summary_line

        return summary_line([for_evaluation(self.args.precision)])

    def write(self, res: dict) -> None:
        """The result JSON: what ``run`` returned, in the envelope every analysis result has."""
        import logging

        from csebench.evaluation.envelope import write_result

        args = self.args
        model = args.model or args.teacher or args.models
        # which pooler made the vectors (resolved), per model where they differ
        pooler = res["pooler"] if "pooler" in res else _poolers(model, args.pooler)
        label = args.label or (os.path.basename(os.path.dirname(os.path.normpath(args.model))) if args.model else "")
        envelope = {"model": model, "pooler": pooler, "label": label,
                    "seconds": round(time.perf_counter() - self.t0, 2),  # wall clock, model loading excluded
                    "cpu_seconds": round(time.process_time() - self.cpu0, 2)}  # CPU time of all threads
        write_result(args.out, res, envelope, args.precision, self.tables)
        logging.getLogger("csebench.analysis").info("%s: %.1f s -> %s", res["analysis"], envelope["seconds"], args.out)


def _poolers(model, pooler: str | None):
    from csebench.model.encoder import eval_pooler_of

    models = model if isinstance(model, list) else [model]
    poolers = {m: eval_pooler_of(m, pooler) for m in models if m}
    return next(iter(poolers.values())) if len(set(poolers.values())) == 1 else (poolers or None)


def model_label(path: str) -> str:
    """runs/NAME/seedS/model -> NAME/seedS; other paths: their last component."""
    parts = os.path.normpath(path).split(os.sep)
    return "/".join(parts[-3:-1]) if parts[-1] == "model" and len(parts) >= 3 else parts[-1]


def unique_labels(labels: list[str]) -> list[str]:
    out: list[str] = []
    for label in labels:
        while label in out:
            label += "'"
        out.append(label)
    return out

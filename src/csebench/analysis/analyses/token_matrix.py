"""SSCL Fig. 5: the token-by-token cosine matrix of one sentence at one layer, one heatmap per model."""

from __future__ import annotations

from dataclasses import dataclass

from csebench.core.commands import option
from csebench.core.errors import ConfigError
from csebench.analysis.base import Analysis, Settings, model_label, setting, unique_labels


@dataclass
class TokenMatrixSettings(Settings):
    layer: int = setting(-1, "hidden_states index (-1 = last layer)")
    include_special: bool = setting(False, "keep [CLS]/[SEP]")


def run(ctx) -> dict:
    from pathlib import Path

    from csebench.evaluation.sts import load_stsb
    from csebench.analysis.core import token_matrices

    s = ctx.settings
    models = ctx.models or [ctx.model]
    labels = unique_labels(ctx.labels or [model_label(m) for m in models])
    sentence = ctx.sentence or load_stsb(Path(ctx.senteval_root), "test").sent1[0]
    res = token_matrices({lb: ctx.encoder(m) for lb, m in zip(labels, models)}, sentence, layer=s.layer,
                         exclude_special=not s.include_special)
    res["paths"] = dict(zip(labels, models))
    if ctx.figure:
        from csebench.results.analysis_plots import plot_token_matrices

        plot_token_matrices(res, ctx.figure, title=ctx.title, footer=ctx.footer())
    return res


def check(args) -> None:
    if not (args.models or args.model):
        raise ConfigError("analyze token_matrix needs --models (or --model)")
    if not (args.sentence or args.senteval):
        raise ConfigError("analyze token_matrix needs --sentence or --senteval (its first STS-B test sentence)")
    if args.labels and len(args.labels) != len(args.models or [args.model]):
        raise ConfigError("--labels needs one label per --models entry")


def pipeline(job) -> None:
    job.model(name="models"), job.senteval(), job.label()
    job.option("labels", job.key)


ANALYSIS = Analysis(__name__, "SSCL Fig. 5: token-by-token cosines of one sentence", reads="model", run=run,
                    Settings=TokenMatrixSettings, takes=("model", "models", "labels", "senteval", "figure", "title"),
                    options=(option("--sentence", default=None, help="the sentence (default: the first STS-B test sentence)"),),
                    check=check, pipeline=pipeline, listed=False, threads=1)

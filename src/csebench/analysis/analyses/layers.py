"""SSCL Figs. 1 and 4: the similarity of adjacent layers' sentence representations (SetSim) and the
mean token similarity per layer (TokSim) over STS-B sentences; the suite's figure draws one line per run."""

from __future__ import annotations

from dataclasses import dataclass

from csebench.analysis.base import Analysis, Combine, StsbSplit, setting


@dataclass
class LayersSettings(StsbSplit):
    include_special: bool = setting(False, "count [CLS]/[SEP] in TokSim")


def run(ctx) -> dict:
    from csebench.analysis.core import layer_similarities, stsb_data, stsb_sentences

    s = ctx.settings
    res = layer_similarities(ctx.encoder(), stsb_sentences(ctx.senteval_root, s.split, ctx.max_sts_pairs),
                             batch_size=ctx.batch_size, exclude_special=not s.include_special)
    res["data"] = stsb_data(s.split, ctx.max_sts_pairs)
    return res


def draw(results: dict, out: str, args, footer: str) -> None:
    from csebench.results.analysis_plots import plot_layers

    plot_layers(results, out, title=args.title, footer=footer)


def pipeline(job) -> None:
    job.model(), job.senteval(), job.label()


ANALYSIS = Analysis(__name__, "SSCL Figs. 1, 4: inter-layer similarity and TokSim per layer", reads="model", run=run,
                    Settings=LayersSettings, needs=("model", "senteval"), combine=Combine(draw), pipeline=pipeline)

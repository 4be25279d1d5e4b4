"""GS-InfoNCE Fig. 1 as its v1 text computes it: in random batches of corpus sentences, each sentence's k nearest
other sentences of its batch (the cosine matrix's diagonal masked, each column sorted, its top k rows), each rank
averaged over the batch's sentences and then over the batches, by batch size; beside it the same statistic of
each sentence against the batch's 3N Gaussian noise vectors, over the same batches. One model per suite
(``model`` setting)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from csebench.analysis.base import Analysis, Settings, setting


@dataclass
class TopkNegativesSettings(Settings):
    model: str | None = setting(None, "the model the pipeline scores: run:NAME (its first seed in the suite), a model "
                                      "folder or packaged:minilm (default: the suite's first run)", cli=False)
    batch_sizes: list[int] = setting([16, 32, 64, 128, 256, 512, 1024], "batch sizes N", minimum=1)
    repeats: int = setting(100, "batches per size", minimum=1)
    pool_size: int = setting(4096, "corpus sentences embedded", minimum=1)
    k: int = setting(4, "nearest other sentences per sentence (ranks drawn)", minimum=1)
    seed: int = setting(0, "sampling seed")


def run(ctx) -> dict:
    from csebench.analysis.core import topk_negatives

    res = topk_negatives(ctx.encode(), ctx.corpus(), **ctx.options())
    if ctx.figure:
        from csebench.results.analysis_plots import plot_topk_negatives

        plot_topk_negatives(res, ctx.figure, model_label=ctx.label or os.path.basename(os.path.normpath(ctx.model)),
                            footer=ctx.footer())
    return res


def pipeline(job) -> None:
    chosen = job.settings.model or f"run:{job.runs()[0][0]}"
    if chosen.startswith("run:"):
        run = chosen[len("run:"):]
        seed = next(s for r, s in job.runs() if r == run)
        job.view_models([(run, seed)])
        job.option("label", f"{run} seed {seed}")
    else:  # a model the pipeline does not build
        job.option("model", chosen)
        job.option("label", os.path.basename(os.path.normpath(chosen)))
    job.corpus()


ANALYSIS = Analysis(__name__, "GS-InfoNCE Fig. 1: each sentence's top-k negative cosines by batch size", reads="suite", run=run,
                    Settings=TopkNegativesSettings, needs=("model", "corpus"), writes=("figure",), pipeline=pipeline)

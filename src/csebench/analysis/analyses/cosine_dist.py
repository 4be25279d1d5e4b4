"""IS-CSE Fig. 4: the cosines of STS-B pairs grouped by their gold score; the suite's figure draws one
violin per run and group."""

from __future__ import annotations

from csebench.analysis.base import Analysis, Combine, StsbSplit


def run(ctx) -> dict:
    from csebench.analysis.core import cosine_distribution

    return cosine_distribution(ctx.encode(), ctx.senteval_root, split=ctx.settings.split, max_pairs=ctx.max_sts_pairs)


def draw(results: dict, out: str, args, footer: str) -> None:
    from csebench.results.analysis_plots import plot_cosine_dist

    plot_cosine_dist(results, out, title=args.title, footer=footer)


def pipeline(job) -> None:
    job.model(), job.senteval(), job.embeddings(), job.label()


ANALYSIS = Analysis(__name__, "IS-CSE Fig. 4: STS-B pair cosines by gold-score group", reads="model", run=run,
                    Settings=StsbSplit, needs=("model", "senteval"), takes=("embeddings",), sentence_embeddings=True,
                    combine=Combine(draw), pipeline=pipeline, threads=1)

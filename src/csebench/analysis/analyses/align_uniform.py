"""IS-CSE Fig. 3: alignment and uniformity (Wang & Isola) of a model's STS-B sentence embeddings; the
suite's figure places every run by the two, coloured by its average STS."""

from __future__ import annotations

from csebench.analysis.base import Analysis, Combine, StsbSplit


def run(ctx) -> dict:
    from csebench.analysis.core import align_uniform

    return align_uniform(ctx.encode(), ctx.senteval_root, split=ctx.settings.split, max_pairs=ctx.max_sts_pairs)


def draw(results: dict, out: str, args, footer: str) -> None:
    from csebench.core.errors import ConfigError
    from csebench.core.io import read_json
    from csebench.results.analysis_plots import plot_align_uniform

    sts = args.sts or []
    if sts and len(sts) != len(results):
        raise ConfigError("--sts needs one sts.json per --inputs file, in the same order")
    points = [{"label": label, "alignment": res["alignment"], "uniformity": res["uniformity"],
               "sts_avg": read_json(sts[i]).get("avg") if sts else None} for i, (label, res) in enumerate(results.items())]
    plot_align_uniform(points, out, title=args.title, footer=footer)


def pipeline(job) -> None:
    job.model(), job.senteval(), job.embeddings(), job.label()


ANALYSIS = Analysis(__name__, "IS-CSE Fig. 3: alignment / uniformity of STS-B embeddings", reads="model", run=run,
                    Settings=StsbSplit, needs=("model", "senteval"), takes=("embeddings",), sentence_embeddings=True,
                    combine=Combine(draw, sts=True), pipeline=pipeline, threads=1)

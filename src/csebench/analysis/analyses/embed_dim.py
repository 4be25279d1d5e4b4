"""SSCL Table 5: STS of a model's embeddings through a linear projection to fewer dimensions (post-hoc
random and PCA references; a run's own trained head is marked); the suite's table lists every run."""

from __future__ import annotations

from dataclasses import dataclass

from csebench.core.commands import option
from csebench.analysis.base import Analysis, Combine, Settings, setting


@dataclass
class EmbedDimSettings(Settings):
    dims: list[int] = setting([128, 256], "projection sizes", minimum=1)
    methods: list[str] = setting(["random", "pca"], "projections", choices=("random", "pca"))
    seed: int = setting(0, "seed of the random projection")


def run(ctx) -> dict:
    from csebench.model.encoder import read_encoder_meta
    from csebench.analysis.core import projected_sts

    s = ctx.settings
    res = projected_sts(ctx.encode(), ctx.senteval_root, dims=s.dims, methods=s.methods, seed=s.seed,
                        max_pairs=ctx.max_sts_pairs)
    res["trained_projection"] = read_encoder_meta(ctx.model).get("projection_dim")  # SSCL Table 5
    return res


def draw(results: dict, out: str, args, footer: str) -> None:
    from csebench.results.analysis_plots import embed_dim_table

    embed_dim_table(results, out, args.csv, footer=footer)


def pipeline(job) -> None:
    job.model(), job.senteval(), job.embeddings(), job.label()
    job.option("max_sts_pairs", job.evaluation("max_sts_pairs"))  # the suite's STS cap: the subsets its embeddings table holds


ANALYSIS = Analysis(__name__, "SSCL Table 5: STS through a projection to fewer dimensions", reads="model", run=run,
                    Settings=EmbedDimSettings, needs=("model", "senteval"), takes=("embeddings",), sentence_embeddings=True,
                    options=(option("--max-sts-pairs", type=int, default=None,
                                    help="score each STS task on the seeded subset eval-sts uses (CPU demo scale; default all pairs)"),),
                    combine=Combine(draw, output="table", csv=True), pipeline=pipeline, threads=1)

"""Anisotropy: how far a model's sentence embeddings crowd into a narrow cone, read as the mean cosine between
the embeddings of two distinct STS-B sentences (0: no preferred direction; near 1: every sentence alike).

csebench's own measure: Ethayarajh (2019) measures the anisotropy of contextual word representations as the
expected cosine of randomly drawn words' representations; this is that expectation taken over the sentence
embeddings of an STS-B split. No paper of the project's prints it; SimCSE's section on anisotropy (its Sec. 5,
which this analysis was once labelled with) argues through the embedding matrix's singular values and
Wang & Isola's uniformity (our `align_uniform`), and defines no mean pair cosine. Computed exactly over every
pair of distinct sentences of the split, from the l2-normalized embeddings x_i: (||sum_i x_i||^2 - n) / (n (n - 1)).
Also the mean cosine of each sentence to the centroid direction. The suite's table lists every run."""

from __future__ import annotations

from csebench.analysis.base import Analysis, Combine, StsbSplit


def mean_pair_cosine(emb) -> dict:
    """The mean cosine over distinct pairs of rows and the mean cosine of a row to their mean direction."""
    import torch

    x = torch.nn.functional.normalize(torch.as_tensor(emb, dtype=torch.float64), dim=-1)
    n = x.shape[0]
    total = x.sum(0)
    pairs = (float(total @ total) - n) / (n * (n - 1)) if n > 1 else float("nan")
    centroid = torch.nn.functional.normalize(total, dim=0)
    return {"n_sentences": n, "mean_cosine": pairs, "mean_cosine_to_centroid": float((x @ centroid).mean())}


def run(ctx) -> dict:
    from csebench.analysis.core import stsb_data, stsb_sentences

    split = ctx.settings.split
    sentences = stsb_sentences(ctx.senteval_root, split, ctx.max_sts_pairs)
    return {"analysis": "anisotropy", "data": stsb_data(split, ctx.max_sts_pairs), **mean_pair_cosine(ctx.encode()(sentences))}


def draw(results: dict, out: str, args, footer: str) -> None:
    from csebench.core.io import write_csv, write_text
    from csebench.results.tables import Table, fmt

    rows = [[label, res["n_sentences"], res["mean_cosine"], res["mean_cosine_to_centroid"]] for label, res in results.items()]
    lines = Table(["Model", "Sentences", "Mean pair cosine", "Mean cosine to centroid"], "lrrr",
                  [[str(r[0]), str(r[1]), fmt(r[2], 4), fmt(r[3], 4)] for r in rows]).markdown()
    write_text(out, "\n".join(["# Anisotropy of the sentence embeddings", "", *lines, "", footer, ""]))
    if args.csv:
        write_csv(args.csv, ["model", "sentences", "mean_pair_cosine", "mean_cosine_to_centroid", "provenance"],
                  [r + [footer] for r in rows])


def pipeline(job) -> None:
    job.model(), job.senteval(), job.embeddings(), job.label()


ANALYSIS = Analysis(__name__, "Anisotropy (csebench's measure, after Ethayarajh 2019): the mean cosine of distinct sentences", reads="model", run=run,
                    Settings=StsbSplit, needs=("model", "senteval"), takes=("embeddings",), sentence_embeddings=True,
                    combine=Combine(draw, output="table", csv=True), pipeline=pipeline, threads=1)

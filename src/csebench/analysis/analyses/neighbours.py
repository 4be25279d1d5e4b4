"""IS-CSE Table 9: the nearest neighbours, by cosine, of a few query sentences in a buffer of corpus
sentences; the suite's table puts every run's side by side.

Retrieved on what IS-CSE's kNN retrieves on in training (``representation: training``, the default): the
normalised outputs of the run's saved training head (SimCSE's MLP over [CLS]), with dropout off so the table
is deterministic (analysis.core.training_representation says why); ``representation: eval`` retrieves on the
evaluation embedding (raw [CLS] for a cls run), which this analysis used earlier."""

from __future__ import annotations

from dataclasses import dataclass

from csebench.analysis.base import Analysis, Combine, Settings, setting


@dataclass
class NeighboursSettings(Settings):
    buffer_size: int = setting(1024, "buffer length L", minimum=1)
    k: int = setting(3, "neighbours per query", minimum=1)
    n_queries: int = setting(4, "random queries when no --query", minimum=1)
    query: list[str] = setting([], "query sentence (repeatable)", repeat=True)
    seed: int = setting(0, "sampling seed")
    representation: str = setting("training", "training = the run's training head over its pooler, dropout off (what "
                                              "IS-CSE's kNN retrieves on); eval = the evaluation embedding",
                                  choices=("training", "eval"))


def run(ctx) -> dict:
    from csebench.analysis.core import neighbours_markdown, retrieve_neighbours

    if ctx.settings.representation == "training":
        from csebench.analysis.core import training_representation

        encode, what = training_representation(ctx.encoder(), ctx.model, ctx.batch_size)
    else:
        encode, what = ctx.encode(), {"representation": "eval"}
    res = retrieve_neighbours(encode, ctx.corpus(), queries=ctx.settings.query, **ctx.options("query", "representation"))
    res.update(what)
    if ctx.markdown:
        from csebench.core.io import write_text

        write_text(ctx.markdown, neighbours_markdown(res, f"Retrieved neighbours ({ctx.label or ctx.model})") + f"\n{ctx.footer()}\n")
    return res


def draw(tables: dict, out: str, args, footer: str) -> None:
    """The per-model Markdown tables, one after the other."""
    from csebench.core.io import write_text

    parts = ["# Retrieved neighbours (IS-CSE Table 9 case study)", ""] + [text.strip() + "\n" for text in tables.values()]
    write_text(out, "\n".join(parts + [footer, ""]))


def pipeline(job) -> None:
    job.model(), job.corpus(), job.label()


ANALYSIS = Analysis(__name__, "IS-CSE Table 9: nearest corpus neighbours of query sentences", reads="model", run=run,
                    Settings=NeighboursSettings, needs=("model", "corpus"), writes=("markdown",),
                    combine=Combine(draw, output="table", reads="md"), pipeline=pipeline)

"""The papers' analyses: metrics (pure), core (model + data -> dict), plots (figures, tables);
one file per analysis in analyses/ (its declaration: base.Analysis), looked up by name in ANALYSES;
cli (`csebench analyze`), pipeline (the Snakemake rules).

    align_uniform        IS-CSE Fig. 3    alignment / uniformity on STS-B (Wang & Isola)
    cosine_distribution  IS-CSE Fig. 4    pair cosines by gold-score group
    layer_similarities   SSCL Fig. 1, 4   inter-layer SetSim, TokSim per layer
    topk_negatives       GS-InfoNCE Fig. 1 top-4 negative cosines vs batch size
    teacher_logit_stats  DistillCSE Fig. 1, Tables 1-2
    projected_sts        SSCL Table 5     STS through a linear projection to 128/256 dims
    retrieve_neighbours  IS-CSE Table 9   kNN of queries in a buffer of corpus embeddings
    token_matrices       SSCL Fig. 5      token-by-token cosine matrix of one sentence per model
    distill.model_correlation   DistillCSE Table 8  student vs S.T. / O.T. / O.S. on STS-B dev
    distill.distillation_loss   DistillCSE Table 9  distillation loss on training vs test batches
    distill.ensemble_encode     DistillCSE Table 5  mean of members' normalized embeddings (STS)
"""

from csebench.core.lazy import LazyRegistry

# name -> its base.Analysis: the ANALYSIS of analyses/NAME.py, then those other installed packages add through
# the entry-point group csebench.analyses (name -> "module:ANALYSIS", the Analysis of a module named NAME)
ANALYSES = LazyRegistry("analysis", package="csebench.analysis.analyses", attr="ANALYSIS", group="csebench.analyses",
                        named="name")

__all__ = ["align_uniform", "cosine_distribution", "layer_similarities", "neighbours_markdown", "projected_sts",
           "retrieve_neighbours", "stsb_sentences", "teacher_logit_stats", "token_matrices", "token_similarity_matrix",
           "topk_negatives"]


def __getattr__(name: str):
    # core imports torch and scipy (about 2 s): loaded when a function is used, not when the CLI
    # builds its parser (every csebench command does, the second-long ones too)
    if name in __all__:
        from csebench.analysis import core

        return getattr(core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

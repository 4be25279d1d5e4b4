"""InfoNCE with in-batch negatives (unsup-SimCSE, Gao et al. 2021, Eq. 1):

    l_i = -log  exp(sim(h_i, h_i+)/tau) / sum_j exp(sim(h_i, h_j+)/tau)

Extra negative columns (from other terms) join the denominator.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from csebench.objectives.base import StepContext, cosine_matrix


def contrastive_logits(ctx: StepContext) -> torch.Tensor:
    return cosine_matrix(ctx.z1, ctx.z2) / ctx.temperature


def info_nce(ctx: StepContext, extra: list[torch.Tensor] | None = None,
             log_weights: torch.Tensor | None = None) -> torch.Tensor:
    logits = contrastive_logits(ctx)
    if log_weights is not None:  # instance weights of the in-batch columns (DCLR), as log-weights
        logits = logits + log_weights
    if extra:
        logits = torch.cat([logits, *[e.float() for e in extra]], dim=1)
    return F.cross_entropy(logits, ctx.labels)

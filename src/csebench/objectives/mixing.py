"""MixCSE (Zhang et al., "Unsupervised Sentence Representation via Contrastive Learning with Mixing
Negatives", AAAI 2022): hard negatives mixed from positive and negative features, constants (no gradient).

The paper's text is not readable from here (AAAI proceedings; no arXiv copy in the stored corpora), so
the computation follows the released code (BDBC-KG-NLP/MixCSE_AAAI2022, mixcse/models_mix.py at commit
7334d1b, read, not copied), with lambda = ``--lambdas`` 0.6 of its run_unsup_example.sh:

  m_j  = sg(lambda h_j^+ + (1 - lambda) h_{j+1}^+)         mixed positives (j+1 taken cyclically)
  a_j  = sg(lambda h_j   + (1 - lambda) h_{j+1})           mixed anchors
  logits of anchor i: [ sim(h_i, h_j^+)/tau ]_j  ++  [ sim(h_i, m_j)/tau ]_j  ++  [ sim(a_i, h_j^+)/tau ]_j
  with the logit of m_{i-1} (which holds h_i^+ with weight 1 - lambda) and of (a_i, h_{i+1}^+) set to 0
  (the code multiplies them by a 0/1 mask: they stay in the denominator as e^0 = 1).

``variant: released`` (default) is that; ``variant: own`` keeps only each anchor's own mixed negative
m_i (one extra column, sim(h_i, m_i)/tau), the reading of "a hard negative mixed from the positive and
a negative feature" without the released code's other columns. The cosine normalizes the mixture, so
the paper's normalization of it (if any) changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from csebench.core.errors import ConfigError
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix

VARIANTS = ("released", "own")


@dataclass
class MixingSettings:
    mix: float = 0.6  # lambda: the positive's share of a mixed negative (released run_unsup_example.sh --lambdas 0.6)
    variant: str = "released"  # released (both mixed blocks, masked logits) | own (each anchor's own mixed negative)

    def validate(self, where: str) -> None:
        if not 0 < self.mix < 1:  # the ends make the term degenerate: nothing is mixed in, or the positive is the negative
            raise ConfigError(f"{where}.mix must be between 0 and 1 (exclusive), got {self.mix}: at 0 each mixed "
                              "negative is another sentence's positive, an in-batch negative again; at 1 it is the "
                              "anchor's own positive, which the loss would push away")
        if self.variant not in VARIANTS:
            raise ConfigError(f"{where}.variant: unknown '{self.variant}' (valid: {', '.join(VARIANTS)})")


def roll_next(x: torch.Tensor) -> torch.Tensor:
    """Row j -> row j+1 (cyclic): torch.cat([x[1:], x[:1]]) as the released code builds it."""
    return torch.roll(x, shifts=-1, dims=0)


class MixedNegatives(ObjectiveTerm):
    key = "mixed_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "mixcse"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = MixingSettings

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        if ctx.world_size > 1:
            raise RuntimeError("objectives.mixed_negatives runs on one process only (its mixed anchors are this rank's)")
        lam = self.settings.mix
        z1, z2 = ctx.z1.float(), ctx.z2.float()
        mixed_pos = (lam * z2 + (1 - lam) * roll_next(z2)).detach()
        if self.settings.variant == "own":
            own = torch.nn.functional.normalize(mixed_pos, dim=-1)
            return (torch.nn.functional.normalize(z1, dim=-1) * own).sum(-1, keepdim=True) / ctx.temperature
        n = z1.shape[0]
        eye = torch.eye(n, dtype=torch.bool, device=z1.device)
        block_a = cosine_matrix(z1, mixed_pos) / ctx.temperature
        block_a = block_a.masked_fill(torch.roll(eye, shifts=-1, dims=1), 0.0)  # (i, i-1): m_{i-1} holds h_i^+
        mixed_anchor = (lam * z1 + (1 - lam) * roll_next(z1)).detach()
        block_b = cosine_matrix(mixed_anchor, z2) / ctx.temperature
        block_b = block_b.masked_fill(torch.roll(eye, shifts=1, dims=1), 0.0)  # (i, i+1): a_i holds h_{i+1}
        return torch.cat([block_a, block_b], dim=1)

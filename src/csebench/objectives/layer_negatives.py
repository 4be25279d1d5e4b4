"""SSCL (Chen et al., "Alleviating Over-smoothing for Unsupervised Sentence Representation", ACL 2023 Findings).

The representation of an intermediate layer, pooled like the final one and passed through the
same training head, is a negative for the final-layer representation (Eq. 4):

    -log  e^{Psi(h_i, h_i+)/tau} / sum_{j=1..N} ( e^{Psi(h_i, h_j)/tau} + e^{Psi(h_i, h_i^-)/tau} )

The intermediate term has no j, so the sum counts it N times: one extra logit column per
negative layer, Psi(h_i, h_i^-)/tau + log N (``repeat_in_sum``; false counts it once). This is
also how Appendix B.2 counts it ("from N pairs to 2N pairs"). h_i^- comes from the same forward
pass (dropout view) as the anchor h_i.

A third reading of Eq. 4 (``variant: in_batch``): the denominator's second term stands for the
intermediate representations h_j^- of *all* N in-batch sentences of the anchor's view, one column
each (weight 1), which is what Appendix B.2's "from N pairs to 2N pairs" counts literally; no
averaging with SimCSE. The three readings give clearly different losses on the same inputs
(tests/test_objective_layer_negatives.py); docs/methods.md discusses which the published numbers used.

Default layer: the penultimate one (hidden_states index num_layers-1). Progressive SSCL
(``stacked: n``) uses layers layer, layer-1, ..., layer-n+1; the paper's best is n=2.

``variant: released`` follows the released code (nuochenpku/SSCL, --do_neg): for each negative
layer the intermediate representations of *all* in-batch sentences from *both* views are extra
columns (2N per layer, weight 1), and the loss is averaged with the plain SimCSE loss:
(L_with_negatives + L_simcse) / 2. Under DDP view 1's intermediate rows are this rank's only (as
the trainer gathers z2-side tensors only).

SSCL-BERT ("no augmentation to construct positives") is this term with dropout off
(training.dropout: 0), so the two views coincide and each sentence is its own positive;
SSCL-SimCSE keeps dropout positives. Both are method entries in params.yaml.

``positives: self`` is the released SSCL-BERT code (nuochenpku/SSCL commit 8c97d82, sscl/models.py:
``cos_sim = sim(z1, z1)``; the authors' reply in the repository's tracker,
https://github.com/nuochenpku/SSCL/issues/1, says that version is SSCL-BERT's and sim(z1, z2) SSCL-SimCSE's):
the contrastive loss compares the anchors with the anchors, so each sentence's positive is its own
representation (cosine 1) and the other anchors of the same dropout pass are the in-batch negatives,
while dropout stays on in the encoder. Single process only (the released code gathers the anchors
across GPUs; the trainer gathers view 2 only).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from csebench.core.errors import ConfigError
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix
from csebench.objectives.contrastive import info_nce

VARIANTS = ("paper", "in_batch", "released")
POSITIVES = ("dropout", "self")


@dataclass
class LayerNegativesSettings:
    layer: int | None = None  # hidden_states index of the (top) negative layer; None: num_layers - 1
    stacked: int = 1  # progressive SSCL: number of consecutive layers, counting down from `layer`
    variant: str = "paper"  # paper (Eq. 4) | in_batch (anchor view, all sentences) | released (both views, averaged with SimCSE)
    repeat_in_sum: bool = True  # paper: h_i^- inside sum_{j=1..N} counts N times
    positives: str = "dropout"  # dropout: view 2 (SimCSE); self: the anchor itself, sim(z1, z1) (released SSCL-BERT)

    def validate(self, where: str) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"{where}.variant: unknown '{self.variant}' (valid: {', '.join(VARIANTS)})")
        if self.positives not in POSITIVES:
            raise ConfigError(f"{where}.positives: unknown '{self.positives}' (valid: {', '.join(POSITIVES)})")
        if self.layer is not None and self.layer < 1:
            raise ConfigError(f"{where}.layer must be >= 1 (a transformer layer; 0 is the embeddings), got {self.layer}")
        if self.stacked < 1:
            raise ConfigError(f"{where}.stacked must be >= 1, got {self.stacked}")
        if self.layer is not None and self.layer - self.stacked + 1 < 1:
            raise ConfigError(f"{where}: stacked={self.stacked} layers below layer {self.layer} reach below layer 1")


class LayerNegatives(ObjectiveTerm):
    key = "layer_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "sscl"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = LayerNegativesSettings

    @classmethod
    def own_positives(cls, settings: LayerNegativesSettings) -> str | None:
        return "each anchor its own positive (positives: self)" if settings.positives == "self" else None

    def __init__(self, settings: LayerNegativesSettings, hidden_size: int, num_layers: int):
        super().__init__(settings, hidden_size, num_layers)
        top = settings.layer if settings.layer is not None else num_layers - 1
        if not 1 <= top <= num_layers - 1:
            raise ConfigError(f"objectives.layer_negatives.layer must be in [1, {num_layers - 1}] for a "
                              f"{num_layers}-layer backbone (the last layer is the representation itself), got {top}")
        if top - settings.stacked + 1 < 1:
            raise ConfigError(f"objectives.layer_negatives.stacked={settings.stacked} needs {settings.stacked} intermediate layers "
                              f"(layers {top - settings.stacked + 1}..{top}), but a {num_layers}-layer backbone has "
                              f"{num_layers - 1} (layers 1..{num_layers - 1}): set stacked <= {top} or use a deeper backbone")
        self.layers = list(range(top, top - settings.stacked, -1))

    def intermediate_layers(self) -> list[int]:
        return list(self.layers)

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        cols = []
        if self.settings.variant == "paper":
            shift = math.log(ctx.z2.shape[0]) if self.settings.repeat_in_sum else 0.0
            anchor = torch.nn.functional.normalize(ctx.z1.float(), dim=-1)
            for layer in self.layers:
                own = torch.nn.functional.normalize(ctx.layer_z1[layer].float(), dim=-1)
                cols.append(((anchor * own).sum(-1, keepdim=True) / ctx.temperature) + shift)
        else:  # in_batch: the anchor view's rows of every sentence; released: and the other view's
            for layer in self.layers:
                cols.append(cosine_matrix(ctx.z1, ctx.layer_z1[layer]) / ctx.temperature)
                if self.settings.variant == "released":
                    cols.append(cosine_matrix(ctx.z1, ctx.layer_z2[layer]) / ctx.temperature)
        return torch.cat(cols, dim=1)

    def contrastive_context(self, ctx: StepContext) -> StepContext:
        if self.settings.positives == "dropout":
            return ctx
        if ctx.world_size > 1:
            raise RuntimeError("objectives.layer_negatives.positives: self (the released SSCL-BERT code) runs on one "
                               "process only: its in-batch candidates are the anchors, which the trainer does not gather")
        return dataclasses.replace(ctx, z2=ctx.z1, all_indices=ctx.indices, positive_offset=0)

    def replaces_contrastive(self, contrastive: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        if self.settings.variant == "released":
            return (contrastive + info_nce(ctx)) / 2
        return contrastive

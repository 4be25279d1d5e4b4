"""DCLR (Zhou et al., "Debiased Contrastive Learning of Unsupervised Sentence Representations",
arXiv 2205.00656, ACL 2022): instance weights from a frozen complementary model against false
negatives, and noise-based negatives against anisotropy.

    l_i = -log  e^{sim(h_i, h_i^+)/tau} / ( sum_{j != i} a_ij e^{sim(h_i, h_j^+)/tau} + sum_k e^{sim(h_i, n_k)/tau}
                                             + e^{sim(h_i, h_i^+)/tau} )
    a_ij = 0 if sim_C(x_i, x_j) >= phi else 1          (sim_C: the complementary model's cosine)
    n_k  = g_k + beta * grad_k / ||grad_k||,  g_k ~ N(0, sigma^2 I),  grad_k = d l / d g_k at g (no gradient
           reaches the encoder through it; the n_k are constants)

The complementary model is a frozen SimCSE run of the same suite, read through the teacher machinery
DistillCSE uses (``teachers: {run: simcse}``; ``csebench teacher-cache`` caches its corpus embeddings).
Its weights a_ij enter InfoNCE as log-weights on the in-batch columns (``negative_weights``), the noise
vectors as extra columns.

Sources: neither the paper's text nor its released code (RUCAIBox/DCLR) is readable from here (the
stored index holds neither; only the README's opening paragraph). The structure above is the one the
README and abstract describe (instance weighting from a complementary model; noise-based negatives
optimized by a gradient step); the gradient's target (this loss), and the defaults phi = 0.9,
sigma = 1, beta = 1e-3 and k = batch size, are ours, flagged in docs/methods.md as not checked against
the paper. One process only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..teacherspec import parse_teachers
from .base import ObjectiveTerm, StepContext, cosine_matrix
from .contrastive import contrastive_logits


@dataclass
class DebiasedSettings:
    teachers: Any = None  # the complementary model(s): {run: simcse, seeds: [..]} (runs of the same suite)
    threshold: float = 0.9  # phi (not checked against the paper)
    noise_ratio: float = 1.0  # k = noise_ratio x batch size (not checked against the paper)
    noise_std: float = 1.0  # sigma (not checked against the paper)
    step: float = 1.0e-3  # beta of the gradient step on the noise (not checked against the paper)
    seed: int | None = None  # base seed of the noise draws; None: the run's seed

    def validate(self, where: str) -> None:
        parse_teachers(self.teachers, where)
        if not -1 <= self.threshold <= 1:
            raise ConfigError(f"{where}.threshold must be a cosine in [-1, 1], got {self.threshold}")
        if self.noise_ratio < 0:
            raise ConfigError(f"{where}.noise_ratio must be >= 0, got {self.noise_ratio}")
        if self.noise_std <= 0:
            raise ConfigError(f"{where}.noise_std must be > 0, got {self.noise_std}")
        if self.step < 0:
            raise ConfigError(f"{where}.step must be >= 0, got {self.step}")


def false_negative_mask(teacher_cos: torch.Tensor, labels: torch.Tensor, threshold: float) -> torch.Tensor:
    """(B, N) True where the complementary model calls an in-batch negative a false negative (a_ij = 0);
    the positive column is never masked."""
    mask = teacher_cos >= threshold
    mask[torch.arange(mask.shape[0], device=mask.device), labels] = False
    return mask


def perturb_noise(noise: torch.Tensor, inbatch_logits: torch.Tensor, anchors: torch.Tensor, labels: torch.Tensor,
                  temperature: float, step: float) -> torch.Tensor:
    """n = g + step * grad / ||grad|| (per vector), grad of the loss (in-batch logits as given, constants)
    with respect to the noise vectors g."""
    if step == 0:
        return noise
    with torch.enable_grad():
        g = noise.detach().clone().requires_grad_(True)
        logits = torch.cat([inbatch_logits.detach().float(), cosine_matrix(anchors.detach(), g) / temperature], dim=1)
        (grad,) = torch.autograd.grad(F.cross_entropy(logits, labels), g)
    return (noise + step * F.normalize(grad, dim=-1)).detach()


class DebiasedNegatives(ObjectiveTerm):
    key = "debiased_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "dclr"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = DebiasedSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("run_config", "corpus_size", "teacher_cache", "corpus_path", "tokenizer")

    def __init__(self, settings: DebiasedSettings, hidden_size: int, num_layers: int, run_config=None,
                 corpus_size=None, teacher_cache=None, corpus_path=None, tokenizer=None, bank=None):
        super().__init__(settings, hidden_size, num_layers)
        run_seed = int(getattr(run_config, "seed", 0) or 0)
        self.base_seed = settings.seed if settings.seed is not None else run_seed
        if bank is None:
            from .distillation import open_teacher_bank

            bank = open_teacher_bank(self.key, settings.teachers, run_seed, run_config, corpus_size, teacher_cache,
                                     corpus_path, tokenizer)
        self.bank = bank
        self._masked = torch.zeros(())

    def negative_weights(self, ctx: StepContext) -> torch.Tensor:
        """(B, N) log-weights of the in-batch columns: -inf where a_ij = 0."""
        with torch.no_grad():
            cos = self.bank.logits(ctx.indices, ctx.all_indices, ctx.z1.device)
            mask = false_negative_mask(cos, ctx.labels, self.settings.threshold)
        self._masked = mask.float().sum(1).mean().detach()
        return torch.zeros_like(cos).masked_fill(mask, float("-inf"))

    def noise(self, ctx: StepContext) -> torch.Tensor:
        k = int(round(self.settings.noise_ratio * ctx.z2.shape[0]))
        gen = torch.Generator(device=ctx.z1.device)
        state = np.random.SeedSequence([self.base_seed, ctx.step, 0xDC1]).generate_state(1, dtype=np.uint64)[0]
        gen.manual_seed(int(state) & ((1 << 63) - 1))
        return torch.randn(k, ctx.z1.shape[1], generator=gen, device=ctx.z1.device) * self.settings.noise_std

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        if ctx.world_size > 1:
            raise RuntimeError("objectives.debiased_negatives runs on one process only")
        g = self.noise(ctx)
        if g.shape[0] == 0:
            return None
        inbatch = contrastive_logits(ctx) + self.negative_weights(ctx)
        n = perturb_noise(g, inbatch, ctx.z1, ctx.labels, ctx.temperature, self.settings.step)
        return cosine_matrix(ctx.z1, n) / ctx.temperature

    def logs(self) -> dict[str, float]:
        return {}

"""GS-InfoNCE (Wu et al., "Smoothed Contrastive Learning for Unsupervised Sentence Embedding", Eq. 2):

    l_i = -log  e^{sim(h_i, h_i+)/tau} / ( sum_j e^{sim(h_j, h_i)/tau} + lambda * sum_{k=1..M} e^{sim(g_k, h_i)/tau} )

with M vectors g_k ~ N(mu, sigma^2) of the embedding dimension, drawn afresh every step. They are
constants (no gradient) and never positives, so they enter InfoNCE as M extra logit columns
cos(h_i, g_k)/tau + log(lambda). Paper defaults: mu=0, sigma=1, lambda=1, M = 3 x batch size.

Released code (paper Listing 1) differs only in bookkeeping: it draws with the global RNG
(``torch.normal``) and has no lambda (i.e. lambda=1). We draw from a generator seeded by
(seed, step) so every DDP rank sees the same vectors and a resumed run redraws the same ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from csebench.core.errors import ConfigError
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix


@dataclass
class GaussianSettings:
    ratio: float = 3.0  # M = ratio x batch size (paper: 3; its Table 3 ablates 0..16)
    num_negatives: int | None = None  # M given directly; overrides ratio
    mean: float = 0.0  # mu
    std: float = 1.0  # sigma
    weight: float = 1.0  # lambda in Eq. 2
    seed: int | None = None  # base seed of the per-step generator; None: the run's seed

    def validate(self, where: str) -> None:
        if self.ratio < 0:
            raise ConfigError(f"{where}.ratio must be >= 0, got {self.ratio}")
        if self.num_negatives is not None and self.num_negatives < 0:
            raise ConfigError(f"{where}.num_negatives must be >= 0, got {self.num_negatives}")
        if self.std <= 0:
            raise ConfigError(f"{where}.std must be > 0, got {self.std}")
        if self.weight < 0:
            raise ConfigError(f"{where}.weight must be >= 0, got {self.weight}")


def step_seed(base: int, step: int) -> int:
    """A generator seed that differs per step and per base seed (splitmix-style mixing, 63 bits)."""
    x = (base * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % (1 << 64)
    x ^= x >> 31
    x = (x * 0xD6E8FEEBC4F1A2B5) % (1 << 64)
    return x & ((1 << 63) - 1)


class GaussianNegatives(ObjectiveTerm):
    key = "gaussian_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "gs-infonce"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = GaussianSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("run_config",)

    def __init__(self, settings: GaussianSettings, hidden_size: int, num_layers: int, run_config: Any = None):
        super().__init__(settings, hidden_size, num_layers)
        run_seed = int(getattr(run_config, "seed", 0) or 0)
        self.base_seed = settings.seed if settings.seed is not None else run_seed
        self._last_m = 0

    def num_vectors(self, batch_size: int) -> int:
        s = self.settings
        return int(s.num_negatives) if s.num_negatives is not None else int(round(s.ratio * batch_size))

    def draw(self, m: int, dim: int, step: int, device: torch.device) -> torch.Tensor:
        """The step's M Gaussian vectors (float32), identical on every rank and on resume."""
        gen = torch.Generator(device=device)
        gen.manual_seed(step_seed(self.base_seed, step))
        g = torch.randn(m, dim, generator=gen, device=device, dtype=torch.float32)
        return g * self.settings.std + self.settings.mean

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        # M scales with the whole (all-rank) batch, as the paper's single-GPU batch.
        m = self.num_vectors(ctx.z2.shape[0])
        self._last_m = m
        if m == 0 or self.settings.weight == 0:
            return None
        g = self.draw(m, ctx.z1.shape[1], ctx.step, ctx.z1.device)
        return cosine_matrix(ctx.z1, g) / ctx.temperature + math.log(self.settings.weight)

    def logs(self) -> dict[str, float]:
        return {"num_gaussian": float(self._last_m)}

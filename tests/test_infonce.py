import math

import torch

from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.contrastive import info_nce


def naive_info_nce(z1, z2, tau):
    """Eq. 1 of SimCSE, one anchor at a time."""
    total = 0.0
    for i in range(z1.shape[0]):
        def sim(a, b):
            return float(torch.dot(a, b) / (a.norm() * b.norm()))
        num = math.exp(sim(z1[i], z2[i]) / tau)
        den = sum(math.exp(sim(z1[i], z2[j]) / tau) for j in range(z2.shape[0]))
        total += -math.log(num / den)
    return total / z1.shape[0]


def ctx_for(z1, z2, tau=0.05):
    return StepContext(z1=z1, z2=z2, temperature=tau, step=0, total_steps=1,
                       indices=torch.arange(z1.shape[0]), all_indices=torch.arange(z2.shape[0]))


def test_info_nce_matches_equation():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    for tau in (0.05, 1.0):
        assert abs(float(info_nce(ctx_for(z1, z2, tau))) - naive_info_nce(z1, z2, tau)) < 1e-4


def test_info_nce_extra_negatives_enter_denominator():
    g = torch.Generator().manual_seed(1)
    z1, z2 = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    extra = torch.randn(4, 3, generator=g)
    ctx = ctx_for(z1, z2, 0.1)
    logits = torch.cat([torch.nn.functional.normalize(z1) @ torch.nn.functional.normalize(z2).T / 0.1, extra], 1)
    expected = -(logits.diagonal()[:4] - torch.logsumexp(logits, 1)).mean()
    assert torch.allclose(info_nce(ctx, [extra]), expected, atol=1e-5)


def test_positive_offset_selects_local_rows():
    g = torch.Generator().manual_seed(2)
    z2 = torch.randn(8, 4, generator=g)
    z1 = torch.randn(4, 4, generator=g)
    ctx = ctx_for(z1, z2)
    ctx.positive_offset = 4
    logits = torch.nn.functional.normalize(z1) @ torch.nn.functional.normalize(z2).T / 0.05
    expected = torch.nn.functional.cross_entropy(logits, torch.arange(4) + 4)
    assert torch.allclose(info_nce(ctx), expected, atol=1e-5)


def test_plain_objective_is_simcse():
    g = torch.Generator().manual_seed(3)
    z1, z2 = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    loss, logs = Objective({}, hidden_size=8, num_layers=2)(ctx_for(z1, z2))
    assert abs(float(loss) - naive_info_nce(z1, z2, 0.05)) < 1e-4 and "loss_contrastive" in logs

"""DCLR (objectives/debiased.py): instance weights and noise negatives against a direct computation of
the loss written in the module docstring (the paper's text and released code are not readable here:
docs/methods.md), and a tiny-model training run with a frozen complementary model."""

from __future__ import annotations

import math

import pytest
import torch

from csebench.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.debiased import DebiasedNegatives, DebiasedSettings
from runhelpers import FakeBank


def naive(z1, z2, teacher_cos, noise, tau, phi, step):
    """l_i = -log e^{s_ii/tau} / (e^{s_ii/tau} + sum_{j != i, cosC_ij < phi} e^{s_ij/tau} + sum_k e^{sim(h_i, n_k)/tau}),
    n_k = g_k + step grad_k/||grad_k||, grad of this loss (at g) with respect to g_k."""
    def loss(noise_vecs):
        total = 0.0
        for i in range(len(z1)):
            pos = torch.nn.functional.cosine_similarity(z1[i], z2[i], dim=0) / tau
            den = torch.exp(pos)
            for j in range(len(z2)):
                if j != i and teacher_cos[i, j] < phi:
                    den = den + torch.exp(torch.nn.functional.cosine_similarity(z1[i], z2[j], dim=0) / tau)
            for nv in noise_vecs:
                den = den + torch.exp(torch.nn.functional.cosine_similarity(z1[i], nv, dim=0) / tau)
            total = total - pos + torch.log(den)
        return total / len(z1)

    g = noise.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(loss(g), g)
    moved = noise + step * grad / grad.norm(dim=1, keepdim=True)
    return float(loss(moved))


@pytest.mark.parametrize("phi,step", [(0.9, 1e-3), (0.3, 0.5), (1.0, 0.0)])
def test_loss_matches_the_direct_computation(phi, step):
    torch.manual_seed(0)
    n, d = 5, 6
    z1, z2 = torch.randn(n, d, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64)
    teacher = torch.rand(n, n, dtype=torch.float64)
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, threshold=phi, step=step, noise_ratio=0.8),
                             d, 2, bank=FakeBank(teacher))
    obj = Objective({}, d, 2)
    obj.terms["debiased_negatives"] = term
    ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=3, total_steps=9, indices=torch.arange(n), all_indices=torch.arange(n))
    noise = term.noise(ctx).double()
    assert noise.shape == (4, d)
    loss, _ = obj(ctx)
    assert float(loss) == pytest.approx(naive(z1, z2, teacher, noise, 0.05, phi, step), rel=1e-6)


def test_the_positive_is_never_dropped():
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, threshold=-1.0), 4, 2, bank=FakeBank(torch.ones(3, 3)))
    ctx = StepContext(z1=torch.randn(3, 4), z2=torch.randn(3, 4), temperature=0.05, step=0, total_steps=1,
                      indices=torch.arange(3), all_indices=torch.arange(3))
    w = term.negative_weights(ctx)
    assert torch.equal(torch.isinf(w), ~torch.eye(3, dtype=torch.bool))


def test_noise_is_per_step_and_seeded():
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, seed=5), 4, 2, bank=FakeBank(torch.zeros(2, 2)))
    ctx = lambda step: StepContext(z1=torch.randn(2, 4), z2=torch.randn(2, 4), temperature=0.05, step=step, total_steps=3,
                                   indices=torch.arange(2), all_indices=torch.arange(2))
    assert torch.equal(term.noise(ctx(1)), term.noise(ctx(1))) and not torch.equal(term.noise(ctx(1)), term.noise(ctx(2)))


@pytest.mark.parametrize("bad", [{"threshold": 2}, {"noise_std": 0}, {}, {"teachers": {"run": "simcse"}, "step": -1}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"debiased_negatives": bad}, "methods.dclr")
    assert "\n" not in str(e.value)


def test_tiny_model_trains_with_a_complementary_model(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"debiased_negatives": {"teachers": {"run": "simcse", "seeds": [2]}}}, steps=2, teacher=True)
    assert summary["steps"] == 2 and math.isfinite(tr.train_rows[-1][1])

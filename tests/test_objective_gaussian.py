"""GS-InfoNCE (gaussian_negatives): Eq. 2 against a loop implementation, per-step generator, config."""

import math

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.gaussian import GaussianNegatives, GaussianSettings
from runhelpers import random_step_context as make_ctx




def cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def naive_gs_infonce(ctx, gauss, weight):
    """Eq. 2, one anchor at a time, in float64."""
    z1, z2, tau = ctx.z1.detach().double(), ctx.z2.detach().double(), ctx.temperature
    gauss = gauss.double()
    total = 0.0
    for i in range(z1.shape[0]):
        pos = ctx.positive_offset + i
        num = math.exp(cos(z1[i], z2[pos]) / tau)
        den = sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(z2.shape[0]))
        den += weight * sum(math.exp(cos(gauss[k], z1[i]) / tau) for k in range(gauss.shape[0]))
        total += -math.log(num / den)
    return total / z1.shape[0]


@pytest.mark.parametrize("settings,offset", [({}, 0), ({"weight": 0.5, "mean": 0.3, "std": 2.0, "ratio": 1.5}, 4),
                                             ({"num_negatives": 5, "weight": 3.0}, 0)])
def test_loss_matches_equation_2(settings, offset):
    ctx = make_ctx(b=4, n=8 if offset else 4, offset=offset, step=3)
    objective = Objective({"gaussian_negatives": settings}, hidden_size=8, num_layers=2)
    term = objective.terms["gaussian_negatives"]
    loss, logs = objective(ctx)
    m = term.num_vectors(ctx.z2.shape[0])
    gauss = term.draw(m, 8, ctx.step, torch.device("cpu"))
    expected = naive_gs_infonce(ctx, gauss, GaussianSettings(**settings).weight)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert logs["gaussian_negatives/num_gaussian"] == m
    loss.backward()
    assert ctx.z1.grad.abs().sum() > 0


def test_number_of_vectors():
    term = GaussianNegatives(GaussianSettings(), 8, 2)
    assert term.num_vectors(64) == 192  # paper default M = 3 x batch size
    assert GaussianNegatives(GaussianSettings(ratio=0.5), 8, 2).num_vectors(64) == 32
    assert GaussianNegatives(GaussianSettings(ratio=16, num_negatives=7), 8, 2).num_vectors(64) == 7
    ctx = make_ctx(b=6)
    assert term.extra_negatives(ctx).shape == (6, 18)
    assert GaussianNegatives(GaussianSettings(ratio=0), 8, 2).extra_negatives(ctx) is None  # M=0 is SimCSE


def test_zero_ratio_is_plain_simcse():
    ctx = make_ctx(b=5)
    plain, _ = Objective({}, 8, 2)(ctx)
    gs, _ = Objective({"gaussian_negatives": {"ratio": 0}}, 8, 2)(ctx)
    assert float(gs.detach()) == pytest.approx(float(plain.detach()))


def test_generator_is_per_step_and_leaves_global_rng_alone():
    term = GaussianNegatives(GaussianSettings(seed=11), 8, 2)
    before = torch.get_rng_state()
    a = term.draw(50, 8, step=4, device=torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(a, term.draw(50, 8, step=4, device=torch.device("cpu")))  # resume / other rank
    assert not torch.allclose(a, term.draw(50, 8, step=5, device=torch.device("cpu")))
    other = GaussianNegatives(GaussianSettings(seed=12), 8, 2)
    assert not torch.allclose(a, other.draw(50, 8, step=4, device=torch.device("cpu")))
    assert not a.requires_grad  # the vectors are constants


def test_run_seed_is_the_default_base_seed():
    class Run:
        seed = 11
    a = GaussianNegatives(GaussianSettings(), 8, 2, run_config=Run()).draw(4, 8, 0, torch.device("cpu"))
    b = GaussianNegatives(GaussianSettings(seed=11), 8, 2).draw(4, 8, 0, torch.device("cpu"))
    assert torch.equal(a, b)


def test_distribution_parameters():
    term = GaussianNegatives(GaussianSettings(mean=0.5, std=2.0), 64, 2)
    g = term.draw(4000, 64, step=0, device=torch.device("cpu"))
    assert float(g.mean()) == pytest.approx(0.5, abs=0.02)
    assert float(g.std()) == pytest.approx(2.0, rel=0.02)


def test_gradient_does_not_reach_gaussian_vectors():
    ctx = make_ctx(b=4)
    term = GaussianNegatives(GaussianSettings(), 8, 2)
    cols = term.extra_negatives(ctx)
    grads = torch.autograd.grad(cols.sum(), [ctx.z1, ctx.z2], allow_unused=True)
    assert grads[0].abs().sum() > 0
    assert grads[1] is None  # only the anchors take part in the Gaussian columns


@pytest.mark.parametrize("bad,key", [({"std": 0}, "std"), ({"weight": -1}, "weight"), ({"ratio": -2}, "ratio"),
                                     ({"num_negatives": -1}, "num_negatives"), ({"sigma": 1}, "sigma")])
def test_config_errors_name_the_key(bad, key):
    with pytest.raises(ConfigError, match=key):
        validate_objectives({"gaussian_negatives": bad}, "run x")


# ----------------------------------------------------------------------------- the released script's per-backbone sigma


def test_gaussian_sigma_changes_no_cosine():
    """The released script's per-backbone sigma (random_std) cannot matter: cos(h, g) of g ~ N(0, s^2 I)
    is cos(h, g/s); so our draws at any std give the same logits."""
    import torch

    from csebench.objectives.gaussian import GaussianNegatives, GaussianSettings

    a, b = GaussianNegatives(GaussianSettings(std=1.0), 8, 2), GaussianNegatives(GaussianSettings(std=0.1), 8, 2)
    h = torch.randn(4, 8)
    ga, gb = a.draw(6, 8, step=3, device=torch.device("cpu")), b.draw(6, 8, step=3, device=torch.device("cpu"))
    cos = lambda g: torch.nn.functional.normalize(h, dim=-1) @ torch.nn.functional.normalize(g, dim=-1).T  # noqa: E731
    torch.testing.assert_close(cos(ga), cos(gb))

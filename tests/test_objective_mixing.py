"""MixCSE (objectives/mixing.py): the loss against a direct, loop-by-loop construction of the released
code's logits (BDBC-KG-NLP/MixCSE_AAAI2022, mixcse/models_mix.py, re-implemented from reading it) and
against the single-mixed-negative reading; a tiny-model training run."""

from __future__ import annotations

import math

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext


def ctx_of(z1, z2, tau=0.05):
    n = z1.shape[0]
    return StepContext(z1=z1, z2=z2, temperature=tau, step=0, total_steps=10, indices=torch.arange(n), all_indices=torch.arange(n))


def cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def released_loss(z1, z2, lam, tau):
    """models_mix.py's cl_forward, entry by entry: N in-batch columns, N columns sim(z1_i, mix of z2_j and
    z2_{j+1}) with entry (i, i-1) multiplied by 0, N columns sim(mix of z1_i and z1_{i+1}, z2_j) with
    entry (i, i+1) multiplied by 0; hard_negative_weight 0; cross entropy with label i."""
    n = z1.shape[0]
    total = 0.0
    for i in range(n):
        row = [cos(z1[i], z2[j]) / tau for j in range(n)]
        for j in range(n):
            m = lam * z2[j] + (1 - lam) * z2[(j + 1) % n]
            row.append(0.0 if j == (i - 1) % n else cos(z1[i], m) / tau)
        a = lam * z1[i] + (1 - lam) * z1[(i + 1) % n]
        for j in range(n):
            row.append(0.0 if j == (i + 1) % n else cos(a, z2[j]) / tau)
        total += -row[i] + math.log(sum(math.exp(v) for v in row))
    return total / n


def own_loss(z1, z2, lam, tau):
    n = z1.shape[0]
    total = 0.0
    for i in range(n):
        row = [cos(z1[i], z2[j]) / tau for j in range(n)]
        row.append(cos(z1[i], lam * z2[i] + (1 - lam) * z2[(i + 1) % n]) / tau)
        total += -row[i] + math.log(sum(math.exp(v) for v in row))
    return total / n


@pytest.mark.parametrize("variant,naive", [("released", released_loss), ("own", own_loss)])
@pytest.mark.parametrize("lam", [0.6, 0.2])
def test_loss_matches_the_direct_computation(variant, naive, lam):
    torch.manual_seed(0)
    z1, z2 = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    obj = Objective(validate_objectives({"mixed_negatives": {"mix": lam, "variant": variant}}, "m"), 8, 2)
    loss, _ = obj(ctx_of(z1, z2))
    assert float(loss) == pytest.approx(naive(z1, z2, lam, 0.05), rel=1e-6)


def test_mixed_features_are_constants():
    """The released code detaches the mixtures: the mixed-positive block sends no gradient to the positives
    (only to the anchors), the mixed-anchor block none to the anchors (only to the positives)."""
    from csebench.objectives.mixing import MixedNegatives, MixingSettings

    torch.manual_seed(1)
    z1 = torch.randn(4, 6, requires_grad=True)
    z2 = torch.randn(4, 6, requires_grad=True)
    cols = MixedNegatives(MixingSettings(), 6, 2).extra_negatives(ctx_of(z1, z2))
    g1a, g2a = torch.autograd.grad(cols[:, :4].sum(), [z1, z2], allow_unused=True, retain_graph=True)
    g1b, g2b = torch.autograd.grad(cols[:, 4:].sum(), [z1, z2], allow_unused=True)
    assert (g2a is None or not g2a.any()) and g1a.abs().sum() > 0
    assert (g1b is None or not g1b.any()) and g2b.abs().sum() > 0


@pytest.mark.parametrize("bad", [{"mix": 1.5}, {"variant": "paper"}, {"lambda": 0.2}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"mixed_negatives": bad}, "methods.mixcse")
    assert "\n" not in str(e.value)


def test_tiny_model_trains(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"mixed_negatives": {}}, steps=2)
    assert summary["steps"] == 2 and (tmp_path / "out" / "model").is_dir()


@pytest.mark.parametrize("mix", [0, 1])
def test_a_mix_at_either_end_is_refused(mix):
    """mix 0 mixes no positive in (each mixed negative is an in-batch negative again), mix 1 makes it the anchor's own
    positive: both were accepted."""
    with pytest.raises(ConfigError) as e:
        validate_objectives({"mixed_negatives": {"mix": mix}}, "run ci/simcse")
    assert str(e.value) == (f"run ci/simcse: objectives.mixed_negatives.mix must be between 0 and 1 (exclusive), got {float(mix)}: "
                            "at 0 each mixed negative is another sentence's positive, an in-batch negative again; at 1 it "
                            "is the anchor's own positive, which the loss would push away")

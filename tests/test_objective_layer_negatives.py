"""SSCL (layer_negatives): the three readings of Eq. 4 (literal, in-batch, released code) against loops, layer choice, a tiny
encoder end to end, and all three terms (IS-CSE + GS-InfoNCE + SSCL) composed in one Objective."""

import math

import pytest
import torch

from csebench.study.params import BackboneConfig
from csebench.core.errors import ConfigError
from csebench.model.encoder import build_encoder, pool
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.layer_negatives import LayerNegatives, LayerNegativesSettings

D = 8


def make_ctx(b=4, n=None, layers=(2,), num_layers=3, offset=0, tau=0.05, seed=0, step=0, total=10):
    g = torch.Generator().manual_seed(seed)
    n = n or b
    z1 = torch.randn(b, D, generator=g, requires_grad=True)
    z2 = torch.randn(n, D, generator=g, requires_grad=True)
    lz1 = {m: torch.randn(b, D, generator=g, requires_grad=True) for m in layers}
    lz2 = {m: torch.randn(n, D, generator=g, requires_grad=True) for m in layers}
    return StepContext(z1=z1, z2=z2, temperature=tau, step=step, total_steps=total, indices=torch.arange(b),
                       all_indices=torch.arange(n), positive_offset=offset, layer_z1=lz1, layer_z2=lz2,
                       num_layers=num_layers)


def cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def d(t):
    return t.detach().double()


def naive_sscl_paper(ctx, layers, repeat=True):
    """Eq. 4 literally: sum over j of (in-batch term + own intermediate term), per anchor."""
    z1, z2, tau = d(ctx.z1), d(ctx.z2), ctx.temperature
    out = 0.0
    for i in range(z1.shape[0]):
        num = math.exp(cos(z1[i], z2[ctx.positive_offset + i]) / tau)
        own = sum(math.exp(cos(z1[i], d(ctx.layer_z1[m])[i]) / tau) for m in layers)
        if repeat:
            den = sum(math.exp(cos(z1[i], z2[j]) / tau) + own for j in range(z2.shape[0]))
        else:
            den = sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(z2.shape[0])) + own
        out += -math.log(num / den)
    return out / z1.shape[0]


def naive_simcse(ctx):
    z1, z2, tau = d(ctx.z1), d(ctx.z2), ctx.temperature
    out = 0.0
    for i in range(z1.shape[0]):
        num = math.exp(cos(z1[i], z2[ctx.positive_offset + i]) / tau)
        out += -math.log(num / sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(z2.shape[0])))
    return out / z1.shape[0]


def naive_sscl_rows(ctx, layers, views):
    """Intermediate rows of all in-batch sentences from ``views`` (layer_z1 and/or layer_z2) as negatives."""
    z1, z2, tau = d(ctx.z1), d(ctx.z2), ctx.temperature
    out = 0.0
    for i in range(z1.shape[0]):
        num = math.exp(cos(z1[i], z2[ctx.positive_offset + i]) / tau)
        den = sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(z2.shape[0]))
        for m in layers:
            for view in views:
                den += sum(math.exp(cos(z1[i], row) / tau) for row in d(getattr(ctx, view)[m]))
        out += -math.log(num / den)
    return out / z1.shape[0]


def naive_sscl_released(ctx, layers):
    """Released code: both views' intermediate rows of all sentences as negatives, averaged with SimCSE."""
    return (naive_sscl_rows(ctx, layers, ("layer_z1", "layer_z2")) + naive_simcse(ctx)) / 2


def naive_sscl_in_batch(ctx, layers):
    """Third reading: the anchor view's intermediate rows of all N in-batch sentences as negatives."""
    return naive_sscl_rows(ctx, layers, ("layer_z1",))


def test_the_three_readings_give_clearly_different_losses():
    """On one batch whose intermediate rows resemble the anchors (as adjacent layers do), each reading
    matches its own direct implementation and differs from the other two by far more than rounding."""
    g = torch.Generator().manual_seed(11)
    ctx = make_ctx(b=8, layers=(2,), seed=3)
    ctx.z2 = ctx.z1.detach() + 0.5 * torch.randn(8, D, generator=g)  # dropout-like positives
    ctx.layer_z1 = {2: ctx.z1.detach() + 0.5 * torch.randn(8, D, generator=g)}
    ctx.layer_z2 = {2: ctx.z2 + 0.5 * torch.randn(8, D, generator=g)}
    naive = {"paper": naive_sscl_paper(ctx, [2]), "in_batch": naive_sscl_in_batch(ctx, [2]),
             "released": naive_sscl_released(ctx, [2])}
    got = {}
    for variant, expected in naive.items():
        got[variant] = float(Objective({"layer_negatives": {"variant": variant}}, D, 3)(ctx)[0].detach())
        assert got[variant] == pytest.approx(expected, rel=1e-5)
    assert got["paper"] > got["in_batch"] > got["released"], got  # about 2.52, 1.29, 0.93 here
    assert min(got["paper"] - got["in_batch"], got["in_batch"] - got["released"]) > 0.3, got


@pytest.mark.parametrize("settings,layers,b,n,offset", [
    ({}, [2], 4, 4, 0),
    ({"stacked": 2}, [2, 1], 4, 4, 0),
    ({"layer": 1}, [1], 3, 6, 3),
    ({"repeat_in_sum": False}, [2], 4, 4, 0),
])
def test_paper_loss_matches_equation_4(settings, layers, b, n, offset):
    ctx = make_ctx(b=b, n=n, layers=(1, 2), offset=offset)
    objective = Objective({"layer_negatives": settings}, D, 3)
    assert objective.intermediate_layers() == sorted(layers)
    loss, _ = objective(ctx)
    expected = naive_sscl_paper(ctx, layers, repeat=settings.get("repeat_in_sum", True))
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("variant,naive", [("in_batch", naive_sscl_in_batch), ("released", naive_sscl_released)])
@pytest.mark.parametrize("stacked,layers", [(1, [2]), (2, [2, 1])])
def test_in_batch_and_released_variants_match_their_direct_implementations(variant, naive, stacked, layers):
    ctx = make_ctx(b=4, layers=(1, 2))
    loss, _ = Objective({"layer_negatives": {"variant": variant, "stacked": stacked}}, D, 3)(ctx)
    assert float(loss.detach()) == pytest.approx(naive(ctx, layers), rel=1e-5)


def test_released_sscl_bert_compares_the_anchors_with_themselves():
    """positives: self (nuochenpku/SSCL 8c97d82, SSCL-BERT's code by the authors' reply in
    https://github.com/nuochenpku/SSCL/issues/1):
    the InfoNCE candidates are the anchors, the positive the anchor itself (cosine 1), in both halves of the
    released loss; the layer columns are unchanged. Not the same loss as dropout positives."""
    ctx = make_ctx(b=5, layers=(1, 2), tau=0.5)  # at 0.05 the self positive (cosine 1) leaves a loss near 0
    anchors = StepContext(z1=ctx.z1, z2=ctx.z1, temperature=ctx.temperature, step=0, total_steps=10,
                          indices=ctx.indices, all_indices=ctx.indices, layer_z1=ctx.layer_z1, layer_z2=ctx.layer_z2)
    for settings, naive in [({"variant": "released", "stacked": 2}, lambda c: naive_sscl_released(c, [2, 1])),
                            ({}, lambda c: naive_sscl_paper(c, [2]))]:
        loss, _ = Objective({"layer_negatives": {**settings, "positives": "self"}}, D, 3)(ctx)
        assert float(loss.detach()) == pytest.approx(naive(anchors), rel=1e-5)
        dropout, _ = Objective({"layer_negatives": settings}, D, 3)(ctx)
        assert float(dropout.detach()) == pytest.approx(naive(ctx), rel=1e-5)
        assert abs(float(loss.detach()) - float(dropout.detach())) > 0.1
    ctx.world_size = 2
    with pytest.raises(RuntimeError, match="one process only"):
        Objective({"layer_negatives": {"positives": "self"}}, D, 3)(ctx)


def test_layer_choice():
    assert LayerNegatives(LayerNegativesSettings(), D, 12).intermediate_layers() == [11]  # penultimate
    assert LayerNegatives(LayerNegativesSettings(stacked=2), D, 12).intermediate_layers() == [11, 10]
    assert LayerNegatives(LayerNegativesSettings(stacked=11), D, 12).intermediate_layers() == list(range(11, 0, -1))
    assert LayerNegatives(LayerNegativesSettings(layer=5, stacked=3), D, 12).intermediate_layers() == [5, 4, 3]
    with pytest.raises(ConfigError, match="layer"):
        LayerNegatives(LayerNegativesSettings(layer=12), D, 12)  # the last layer is the representation
    with pytest.raises(ConfigError, match="stacked"):
        LayerNegatives(LayerNegativesSettings(stacked=6), D, 6)


@pytest.mark.parametrize("bad,key", [({"layer": 0}, "layer"), ({"stacked": 0}, "stacked"),
                                     ({"variant": "code"}, "variant"), ({"layer": 2, "stacked": 3}, "stacked"),
                                     ({"layers": 2}, "layers"), ({"positives": "view2"}, "positives")])
def test_config_errors_name_the_key(bad, key):
    with pytest.raises(ConfigError, match=key):
        validate_objectives({"layer_negatives": bad}, "run x")


def test_tiny_encoder_end_to_end():
    """Intermediate layers pooled like the last one and through the same head; gradients reach them."""
    torch.manual_seed(0)
    enc = build_encoder(BackboneConfig(model="random", pooler="cls", random_config={"num_hidden_layers": 3}), seed=0)
    objective = Objective({"layer_negatives": {"stacked": 2}}, enc.hidden_size, enc.num_layers)
    batch = enc.tokenizer(["a cat sat", "dogs bark loudly", "rain again today", "one two"], padding=True,
                          return_tensors="pt")
    ids, mask = torch.cat([batch["input_ids"]] * 2), torch.cat([batch["attention_mask"]] * 2)
    enc.train()
    hs = enc(ids, mask, hidden_only=True, all_layers=True)
    z = enc.project(pool(enc.pooler, hs, mask), train_head=True)
    reps = {m: enc.project(pool(enc.pooler, hs, mask, layer=m), train_head=True) for m in objective.intermediate_layers()}
    assert objective.intermediate_layers() == [1, 2]
    ctx = StepContext(z1=z[:4], z2=z[4:], temperature=0.05, step=0, total_steps=1, indices=torch.arange(4),
                      all_indices=torch.arange(4), layer_z1={m: r[:4] for m, r in reps.items()},
                      layer_z2={m: r[4:] for m, r in reps.items()}, num_layers=enc.num_layers)
    loss, _ = objective(ctx)
    assert float(loss.detach()) == pytest.approx(naive_sscl_paper(ctx, [2, 1]), rel=1e-5)
    loss.backward()
    first_layer = enc.backbone.encoder.layer[0].attention.self.query.weight
    assert first_layer.grad is not None and first_layer.grad.abs().sum() > 0


def test_all_three_terms_compose_to_the_sum_of_their_equations():
    """IS-CSE + GS-InfoNCE + SSCL: InfoNCE whose denominator holds the in-batch, Gaussian and
    layer negatives, plus alpha times the smoothing loss."""
    from test_objective_smoothing import naive_knn_smoothed, naive_smoothing_loss

    settings = {"gaussian_negatives": {"num_negatives": 5, "weight": 0.7},
                "instance_smoothing": {"buffer_size": 10, "neighbors": 3, "alpha": 0.2},
                "layer_negatives": {}}
    objective = Objective(settings, D, 3)
    smoothing = objective.terms["instance_smoothing"]
    smoothing.push(torch.randn(10, D))
    bank = smoothing.entries().clone()
    ctx = make_ctx(b=4, layers=(2,), step=2)
    loss, logs = objective(ctx)

    gauss = d(objective.terms["gaussian_negatives"].draw(5, D, ctx.step, torch.device("cpu")))
    z1, z2, tau = d(ctx.z1), d(ctx.z2), ctx.temperature
    contrastive = 0.0
    for i in range(4):
        num = math.exp(cos(z1[i], z2[i]) / tau)
        own = math.exp(cos(z1[i], d(ctx.layer_z1[2])[i]) / tau)
        den = sum(math.exp(cos(z1[i], z2[j]) / tau) + own for j in range(4))  # Eq. 4 (SSCL)
        den += 0.7 * sum(math.exp(cos(g, z1[i]) / tau) for g in gauss)  # Eq. 2 (GS-InfoNCE)
        contrastive += -math.log(num / den)
    contrastive /= 4
    smoothed = [naive_knn_smoothed(z2[r], d(bank), 3, 2.0) for r in range(4)]
    expected = contrastive + 0.2 * naive_smoothing_loss(ctx, smoothed)  # Eq. 7 (IS-CSE)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert logs["loss_contrastive"] == pytest.approx(contrastive, rel=1e-5)
    loss.backward()
    assert ctx.z1.grad.abs().sum() > 0 and ctx.z2.grad.abs().sum() > 0 and ctx.layer_z1[2].grad.abs().sum() > 0

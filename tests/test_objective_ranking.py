"""RankCSE (objectives/ranking.py): ListNet, ListMLE and the consistency term against direct loops and
against the computations of the code read (perceptiveshawty/RankCSE rankcse/models.py, a community
implementation; re-implemented from reading it: its head, 17c5226, and for ListMLE's older reduction its
revision 338e00d), and tiny-model training runs with a SimCSE teacher."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.ranking import (RankingDistillation, RankingSettings, js_consistency, listmle, listnet,
                                         released_consistency)
from runhelpers import FakeBank


def naive_listnet(s, t, tau_s, tau_t):
    s, t = s.tolist(), t.tolist()
    n = len(s)
    total = 0.0
    for i in range(n):
        others = [j for j in range(n) if j != i]
        zs = sum(math.exp(s[i][j] / tau_s) for j in others)
        zt = sum(math.exp(t[i][j] / tau_t) for j in others)
        total += -sum(math.exp(t[i][j] / tau_t) / zt * math.log(math.exp(s[i][j] / tau_s) / zs) for j in others)
    return total / n


def naive_listmle(s, t, tau, positions="sum", eps=0.0):
    """Per row, the teacher's order pi and, summed over its positions k, log sum_{m >= k} e^{s_pi(m)/tau} -
    s_pi(k)/tau (``positions="mean"``: divided by the number of positions); the rows averaged. ``eps``: inside the
    log after the row's largest logit c is taken out, log(sum_{m >= k} e^{s_pi(m)/tau - c} + eps) - (s_pi(k)/tau - c)."""
    s, t = s.tolist(), t.tolist()
    total = 0.0
    for i in range(len(s)):
        order = sorted(range(len(s[i])), key=lambda j: -t[i][j])
        c = max(s[i]) / tau
        terms = [math.log(sum(math.exp(s[i][order[m]] / tau - c) for m in range(k, len(order))) + eps)
                 - (s[i][order[k]] / tau - c) for k in range(len(order))]
        total += sum(terms) / (len(terms) if positions == "mean" else 1)
    return total / len(s)


def released_listnet(teacher_logits, z1, z2, tau):
    """ListNet.forward: student cos/tau and the teacher's cos/tau2 with the diagonals at -inf;
    -(q * log p).nansum() / q.nansum()."""
    student = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / tau
    p = F.log_softmax(student.fill_diagonal_(float("-inf")), dim=-1)
    q = F.softmax(teacher_logits.clone().fill_diagonal_(float("-inf")), dim=-1)
    return -(q * p).nansum() / q.nansum()


def released_listmle(teacher_logits, z1, z2, tau, eps=1e-7, revision="17c5226"):
    """ListMLE.forward: the student's logits gathered in the teacher's order, less the row's maximum; per position
    log(reverse cumulative sum of exp + eps) - logit. The head (17c5226, since 3f04480 "Fix ListMLE loss
    reduction") sums the positions and averages the rows; revision 338e00d averaged both. (Its shuffle before the
    sort only breaks ties, which these continuous logits do not have.)"""
    student = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / tau
    y_true_sorted, indices = teacher_logits.sort(descending=True, dim=-1)
    preds = torch.gather(student, dim=1, index=indices)
    preds = preds - preds.max(dim=1, keepdim=True).values
    cumsums = torch.cumsum(preds.exp().flip(dims=[1]), dim=1).flip(dims=[1])
    observation = torch.log(cumsums + eps) - preds
    if revision == "338e00d":
        return torch.mean(torch.mean(observation, dim=1))
    return torch.mean(torch.sum(observation, dim=1))


def released_divergence(p, q, eps=1e-7):
    kl = torch.nn.KLDivLoss(reduction="batchmean", log_target=True)
    m = (0.5 * (p + q)).log().clamp(min=eps)
    return 0.5 * (kl(m, p.log()) + kl(m, q.log()))


@pytest.fixture()
def batch():
    torch.manual_seed(0)
    z1, z2, t = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    t = F.normalize(t, dim=1)
    return z1, z2, t @ t.T  # a teacher's cosines (its diagonal is 1: each sentence ranks itself first)


def cosm(a, b):
    return F.normalize(a, dim=1) @ F.normalize(b, dim=1).T


def test_listnet_matches_the_direct_and_released_computations(batch):
    z1, z2, t = batch
    s = cosm(z1, z2)
    got = listnet(s, t, 0.05, 0.025)
    assert float(got) == pytest.approx(naive_listnet(s, t, 0.05, 0.025), rel=1e-6)
    # the code read: the teacher logits come in already divided by tau2 (trainers.py), the student's by --temp
    # (models.py's cls.sim); run_rankcse.sh sets both to 0.05
    assert float(listnet(s, t, 0.05, 0.05)) == pytest.approx(float(released_listnet(t / 0.05, z1, z2, 0.05)), rel=1e-6)


@pytest.mark.parametrize("positions", ["mean", "sum"])
@pytest.mark.parametrize("eps", [0.0, 1e-7, 1e-2])
def test_listmle_matches_the_direct_computation(batch, positions, eps):
    z1, z2, t = batch
    s = cosm(z1, z2)
    assert float(listmle(s, t, 0.05, positions, eps)) == pytest.approx(naive_listmle(s, t, 0.05, positions, eps), rel=1e-6)


def test_listmle_eps_defaults_to_the_community_codes_value(batch):
    """1e-7 inside ListMLE's log (rankcse/models.py ListMLE.eps): the default; 0 (the plain log) stays selectable."""
    z1, z2, t = batch
    s = cosm(z1, z2)
    assert RankingSettings(teachers={"run": "simcse"}).listmle_eps == 1e-7
    term = RankingDistillation(RankingSettings(teachers={"run": "simcse"}, consistency="none"), 8, 2, bank=FakeBank(t))
    ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=0, total_steps=1, indices=torch.arange(6), all_indices=torch.arange(6))
    assert float(term.extra_loss(ctx)) == pytest.approx(naive_listmle(s, t, 0.05, eps=1e-7), rel=1e-6)
    plain = RankingDistillation(RankingSettings(teachers={"run": "simcse"}, consistency="none", listmle_eps=0.0), 8, 2,
                                bank=FakeBank(t))
    assert float(plain.extra_loss(ctx)) == pytest.approx(naive_listmle(s, t, 0.05, eps=0.0), rel=1e-6)
    assert float(plain.extra_loss(ctx)) != pytest.approx(float(term.extra_loss(ctx)), rel=1e-3)


def test_listmle_sums_over_positions_by_default(batch):
    """The default is the community code's head: each row's positions summed, B times the older mean at batch B."""
    z1, z2, t = batch
    s = cosm(z1, z2)
    assert RankingSettings(teachers={"run": "simcse"}).positions == "sum"
    got = float(listmle(s, t, 0.05))
    assert got == pytest.approx(naive_listmle(s, t, 0.05, eps=1e-7), rel=1e-6)
    assert got == pytest.approx(len(s) * float(listmle(s, t, 0.05, "mean")), rel=1e-6)
    assert float(listmle(s, t, 0.05, eps=0.0)) == pytest.approx(len(s) * float(listmle(s, t, 0.05, "mean", 0.0)), rel=1e-6)


@pytest.mark.parametrize(("positions", "revision"), [("sum", "17c5226"), ("mean", "338e00d")])
def test_listmle_matches_the_released_computation(batch, positions, revision):
    z1, z2, t = batch
    got = listmle(cosm(z1, z2), t, 0.05, positions, eps=1e-7)
    assert float(got) == pytest.approx(float(released_listmle(t / 0.05, z1, z2, 0.05, revision=revision)), rel=1e-6)
    assert float(listmle(cosm(z1, z2), t, 0.05, positions, eps=0.0)) != pytest.approx(float(got), rel=1e-3)  # the eps matters here


def test_js_consistency_matches_the_definition(batch):
    z1, z2, _ = batch
    a, b = cosm(z1, z2) / 0.05, cosm(z2, z1) / 0.05
    p, q = F.softmax(a, 1), F.softmax(b, 1)
    m = (p + q) / 2
    want = (0.5 * ((p * (p / m).log()).sum(1) + (q * (q / m).log()).sum(1))).mean()
    assert float(js_consistency(a, b)) == pytest.approx(float(want), rel=1e-6)


def test_released_consistency_is_what_the_code_computes_a_negative_entropy(batch):
    z1, z2, _ = batch
    a, b = cosm(z1, z2) / 0.05, cosm(z2, z1) / 0.05
    p, q = F.softmax(a, 1).clamp(min=1e-7), F.softmax(b, 1).clamp(min=1e-7)
    got = released_consistency(a, b)
    assert float(got) == pytest.approx(float(released_divergence(p, q)), rel=1e-6)
    entropy = lambda x: -(x * x.log()).sum(1).mean()
    assert float(got) == pytest.approx(float(-(entropy(p) + entropy(q)) / 2 - 1e-7), rel=1e-6)


@pytest.mark.parametrize("loss", ["listnet", "listmle"])
def test_objective_is_infonce_plus_beta_consistency_plus_gamma_rank(batch, loss):
    from csebench.objectives.contrastive import info_nce

    z1, z2, t = batch
    term = RankingDistillation(RankingSettings(teachers={"run": "simcse"}, loss=loss, weight=0.7, consistency_weight=0.3),
                               8, 2, bank=FakeBank(t))
    obj = Objective({}, 8, 2)
    obj.terms["ranking_distillation"] = term
    ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=0, total_steps=1, indices=torch.arange(6), all_indices=torch.arange(6))
    got, _ = obj(ctx)
    s = cosm(z1, z2)
    rank = naive_listnet(s, t, 0.05, 0.05) if loss == "listnet" else naive_listmle(s, t, 0.05, eps=1e-7)  # positions summed
    want = float(info_nce(ctx)) + 0.3 * float(js_consistency(s / 0.05, s.T / 0.05)) + 0.7 * rank
    assert float(got) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("bad", [{"teachers": {"run": "simcse"}, "loss": "lambdarank"}, {"loss": "listnet"},
                                 {"teachers": {"run": "simcse"}, "student_temperature": 0},
                                 {"teachers": {"run": "simcse"}, "positions": "max"}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"ranking_distillation": bad}, "methods.rankcse")
    assert "\n" not in str(e.value)


def test_a_run_holds_one_teacher_term():
    from csebench.study.teacherspec import teacher_term

    with pytest.raises(ConfigError, match="a run may hold one of them"):
        teacher_term({"distillation": {"teachers": "simcse"}, "ranking_distillation": {"teachers": "simcse"}})


@pytest.mark.parametrize("positions", ["sum", "mean"])
def test_tiny_model_trains_with_a_simcse_teacher(tmp_path, shared_dir, positions):
    from runhelpers import train_tiny

    term = {"teachers": {"run": "simcse", "seeds": [2]}, "positions": positions}
    summary, tr = train_tiny(tmp_path, {"ranking_distillation": term}, steps=2, teacher=True)
    assert summary["steps"] == 2 and "loss_ranking_distillation" in tr.log_keys
    assert tr.objective.terms["ranking_distillation"].settings.positions == positions
    assert math.isfinite(tr.train_rows[-1][tr.log_keys.index("loss_ranking_distillation") + 1])

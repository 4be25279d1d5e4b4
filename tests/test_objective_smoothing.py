"""IS-CSE (instance_smoothing): Eq. 3-8 against loop implementations, FIFO buffer, stop-gradients, config."""

import math

import pytest
import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.smoothing import (InstanceSmoothing, SmoothingSettings, cosine_alpha, pddp_groups,
                                          spherical_kmeans)
from runhelpers import assert_train_fails, has_term, random_step_context as make_ctx

D = 8




def unit(v):
    return v / v.norm()


def cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def naive_knn_smoothed(h, bank, k, beta, skip=0):
    """Eq. 4 for one positive h: neighbours by a full sort, K = [h; neighbours], softmax attention."""
    q = unit(h)
    ranked = sorted(range(bank.shape[0]), key=lambda r: -float(torch.dot(q, bank[r])))
    group = [q] + [bank[r] for r in ranked[skip:skip + k]]
    scores = [float(torch.dot(q, row)) / beta for row in group]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    return sum(w / total * row for w, row in zip(weights, group))


def naive_smoothing_loss(ctx, smoothed):
    """Eq. 6: InfoNCE of anchors against the smoothed positives of the whole batch."""
    z1, tau = ctx.z1.detach().double(), ctx.temperature
    out = 0.0
    for i in range(z1.shape[0]):
        pos = ctx.positive_offset + i
        num = math.exp(cos(z1[i], smoothed[pos]) / tau)
        den = sum(math.exp(cos(z1[i], smoothed[j]) / tau) for j in range(len(smoothed)))
        out += -math.log(num / den)
    return out / z1.shape[0]


def naive_instance_loss(ctx):
    z1, z2, tau = ctx.z1.detach().double(), ctx.z2.detach().double(), ctx.temperature
    out = 0.0
    for i in range(z1.shape[0]):
        num = math.exp(cos(z1[i], z2[ctx.positive_offset + i]) / tau)
        out += -math.log(num / sum(math.exp(cos(z1[i], z2[j]) / tau) for j in range(z2.shape[0])))
    return out / z1.shape[0]


def filled_term(settings, rows=None, seed=1):
    term = InstanceSmoothing(SmoothingSettings(**settings), D, 2)
    g = torch.Generator().manual_seed(seed)
    term.push(rows if rows is not None else torch.randn(term.settings.buffer_size, D, generator=g))
    return term


# ------------------------------------------------------------------ buffer


def test_buffer_is_fifo_of_normalized_rows():
    term = InstanceSmoothing(SmoothingSettings(buffer_size=5, neighbors=2), D, 2)
    rows = torch.randn(9, D) * 3
    assert term.entries().shape == (0, D)
    term.push(rows[:3])
    assert torch.allclose(term.entries(), F.normalize(rows[:3], dim=1))
    term.push(rows[3:7])  # wraps: oldest two rows fall out
    assert torch.allclose(term.entries(), F.normalize(rows[2:7], dim=1))
    term.push(rows[7:9])
    assert torch.allclose(term.entries(), F.normalize(rows[4:9], dim=1))
    term.push(torch.randn(12, D))  # more rows than the buffer: only the newest L survive
    assert int(term.filled) == 5


def test_buffer_survives_state_dict_round_trip():
    a = InstanceSmoothing(SmoothingSettings(buffer_size=6, neighbors=2), D, 2)
    a.push(torch.randn(4, D))
    a.push(torch.randn(4, D))
    state = a.state_dict()
    assert set(state) >= {"memory", "pointer", "filled"}
    b = InstanceSmoothing(SmoothingSettings(buffer_size=6, neighbors=2), D, 2)
    b.load_state_dict(state)
    assert torch.equal(a.entries(), b.entries())
    more = torch.randn(3, D)
    a.push(more)
    b.push(more)
    assert torch.equal(a.memory, b.memory) and int(a.pointer) == int(b.pointer)
    # through the composed Objective, as the trainer checkpoints it
    o1 = Objective({"instance_smoothing": {"buffer_size": 6, "neighbors": 2}}, D, 2)
    o1.terms["instance_smoothing"].push(torch.randn(5, D))
    o2 = Objective({"instance_smoothing": {"buffer_size": 6, "neighbors": 2}}, D, 2)
    o2.load_state_dict(o1.state_dict())
    assert torch.equal(o1.terms["instance_smoothing"].entries(), o2.terms["instance_smoothing"].entries())


# ------------------------------------------------------------------ loss = equations


@pytest.mark.parametrize("b,n,offset", [(4, 4, 0), (3, 6, 3)])  # second: a DDP rank's view
def test_knn_loss_matches_equations_4_6_7(b, n, offset):
    settings = {"buffer_size": 12, "neighbors": 3, "beta": 2.0, "alpha": 0.1}
    term = filled_term(settings)
    bank = term.entries().clone()
    ctx = make_ctx(b=b, n=n, offset=offset)
    objective = Objective({"instance_smoothing": settings}, D, 2)
    objective.load_state_dict({"terms.instance_smoothing." + k: v for k, v in term.state_dict().items()})
    loss, logs = objective(ctx)
    smoothed = [naive_knn_smoothed(ctx.z2[r].detach().double(), bank.double(), 3, 2.0) for r in range(n)]
    expected = naive_instance_loss(ctx) + 0.1 * naive_smoothing_loss(ctx, smoothed)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert logs["instance_smoothing/active"] == 1.0
    # the batch was pushed after retrieval (paper order)
    assert torch.allclose(objective.terms["instance_smoothing"].entries()[-n:], F.normalize(ctx.z2.detach(), dim=1))


def test_push_before_retrieval_skips_the_top_hit():
    settings = {"buffer_size": 10, "neighbors": 3, "push_before_retrieval": True}
    term = filled_term(settings)
    ctx = make_ctx(b=4)
    bank_after_push = torch.cat([term.entries()[4:], F.normalize(ctx.z2.detach(), dim=1)])
    loss = term.extra_loss(ctx)
    smoothed = [naive_knn_smoothed(ctx.z2[r].detach().double(), bank_after_push.double(), 3, 2.0, skip=1)
                for r in range(4)]
    assert float(loss.detach()) == pytest.approx(0.1 * naive_smoothing_loss(ctx, smoothed), rel=1e-5)


def naive_kmeans(x, k, iterations):
    """Lloyd's algorithm on the unit sphere, one point at a time."""
    n = x.shape[0]
    centres = [x[round(i * (n - 1) / (k - 1)) if k > 1 else 0].clone() for i in range(k)]
    for _ in range(iterations):
        members = [[] for _ in range(k)]
        for r in range(n):
            best = max(range(k), key=lambda c: float(torch.dot(x[r], centres[c])))
            members[best].append(x[r])
        centres = [unit(sum(m)) if m else centres[c] for c, m in enumerate(members)]
    return torch.stack(centres)


def test_spherical_kmeans_matches_loop_lloyd():
    x = F.normalize(torch.randn(40, D, dtype=torch.float64), dim=1)
    assert torch.allclose(spherical_kmeans(x, 5, 6), naive_kmeans(x, 5, 6))


def test_kmeans_loss_matches_equation_5():
    settings = {"buffer_size": 24, "retrieval": "kmeans", "clusters": 4, "gamma": 0.3, "kmeans_iterations": 5}
    term = filled_term(settings)
    bank = term.entries().clone().double()
    centres = naive_kmeans(bank, 4, 5)
    ctx = make_ctx(b=5)
    loss = term.extra_loss(ctx)
    smoothed = []
    for r in range(5):
        q = unit(ctx.z2[r].detach().double())
        c = centres[max(range(4), key=lambda j: float(torch.dot(q, centres[j])))]
        smoothed.append(0.3 * q + 0.7 * c)
    assert float(loss.detach()) == pytest.approx(0.1 * naive_smoothing_loss(ctx, smoothed), rel=1e-5)


def naive_pddp_partition(members, groups):
    """The released code's PDDP tree (dll-wu/IS-CSE simcse/models.py, find_neighbors_and_aggregation, mode 'pddp'),
    step by step: X = set^T centred over the rows; groups - 1 times the first (largest) group's full SVD, its first
    right singular vector split <= 0 | > 0, [L, R, rest] sorted by size; a split with an empty side puts the node
    back (and the next pass repeats it). The vector's sign: ours (largest entry positive)."""
    x = members.double().T
    x = x - x.mean(-1, keepdim=True)
    nodes, parts = [x], [list(range(members.shape[0]))]
    for _ in range(1, groups):
        node, idx = nodes[0], parts[0]
        v = torch.linalg.svd(node)[2][0]
        v = v * torch.sign(v[v.abs().argmax()])
        left = [j for j, val in zip(idx, v.tolist()) if val <= 0]
        right = [j for j, val in zip(idx, v.tolist()) if val > 0]
        new_nodes, new_parts = nodes[1:], parts[1:]
        if right:
            new_nodes, new_parts = [node[:, v > 0]] + new_nodes, [right] + new_parts
        if left:
            new_nodes, new_parts = [node[:, v <= 0]] + new_nodes, [left] + new_parts
        ordered = sorted(zip(new_nodes, new_parts), key=lambda t: len(t[1]), reverse=True)
        nodes, parts = [t[0] for t in ordered], [t[1] for t in ordered]
    return parts


def naive_pddp_smoothed(query, others, groups, beta):
    """Each h+ (row i of the set) attends to the rows of its own group: softmax_j(h+ . b_j / beta), sum w_j b_j."""
    members = torch.cat([query, others]).double()
    group_of = {j: g for g, part in enumerate(naive_pddp_partition(members, groups)) for j in part}
    out = []
    for i in range(query.shape[0]):
        mates = [j for j in range(members.shape[0]) if group_of[j] == group_of[i]]
        scores = [float(torch.dot(members[i], members[j])) / beta for j in mates]
        top = max(scores)
        weights = [math.exp(v - top) for v in scores]
        out.append(sum(w / sum(weights) * members[j] for w, j in zip(weights, mates)))
    return out


def test_pddp_groups_match_the_released_tree_step_by_step():
    g = torch.Generator().manual_seed(4)
    for rows, groups in ((40, 8), (64, 64), (7, 3)):
        x = F.normalize(torch.randn(rows, D, generator=g, dtype=torch.float64), dim=1)
        gid = pddp_groups(x, groups)
        got = sorted(sorted(torch.nonzero(gid == k).flatten().tolist()) for k in gid.unique().tolist())
        assert got == sorted(sorted(p) for p in naive_pddp_partition(x, groups))
    # rows are centred once, not per group: the tree stops well short of 64 groups, as the released loop does
    assert 1 < len(naive_pddp_partition(x, 64)) and len(torch.unique(pddp_groups(F.normalize(torch.randn(64, D, generator=g), dim=1), 64))) < 64


@pytest.mark.parametrize("push_first", [False, True])
def test_pddp_loss_matches_the_released_group_attention(push_first):
    settings = {"buffer_size": 24, "retrieval": "pddp", "clusters": 6, "beta": 2.0, "push_before_retrieval": push_first}
    term = filled_term(settings)
    previous = term.entries().clone()
    ctx = make_ctx(b=5)
    loss = term.extra_loss(ctx)
    # the set: the 5 positives (differentiable), then the newest 24 - 5 rows of previous steps (push-first: the
    # rows before the batch's own copies; the same rows)
    query = F.normalize(ctx.z2.detach().double(), dim=1)
    smoothed = naive_pddp_smoothed(query, previous[5:].double(), 6, 2.0)
    assert len({tuple(sorted(p)) for p in naive_pddp_partition(torch.cat([query, previous[5:].double()]), 6)}) > 1
    assert float(loss.detach()) == pytest.approx(0.1 * naive_smoothing_loss(ctx, smoothed), rel=1e-5)


def test_pddp_gradient_reaches_the_in_batch_members_of_a_group():
    """Released: the group's in-batch rows keep their gradient (``undetached_buf``); buffer rows are constants."""
    term = InstanceSmoothing(SmoothingSettings(buffer_size=16, retrieval="pddp", clusters=4), D, 2)
    g = torch.Generator().manual_seed(2)
    z2 = torch.randn(6, D, generator=g, requires_grad=True)
    bank = F.normalize(torch.randn(16, D, generator=g), dim=1).requires_grad_(True)
    smoothed = term.smooth(z2, bank)
    smoothed[0].sum().backward()
    gid = pddp_groups(torch.cat([F.normalize(z2.detach(), dim=1), bank.detach()[6:]]), 4)
    mates = (gid[:6] == gid[0]).tolist()
    assert bank.grad is None
    assert all((z2.grad[r].abs().sum() > 0) == mate for r, mate in enumerate(mates))


# ------------------------------------------------------------------ stop-gradients, warm-up


@pytest.mark.parametrize("retrieval", ["knn", "kmeans"])
def test_gradient_reaches_h_plus_but_not_buffer_or_neighbours(retrieval):
    term = InstanceSmoothing(SmoothingSettings(buffer_size=12, neighbors=3, clusters=3, retrieval=retrieval), D, 2)
    z2 = torch.randn(4, D, requires_grad=True)
    bank = F.normalize(torch.cat([torch.randn(8, D), z2.detach()]), dim=1).requires_grad_(True)
    smoothed = term.smooth(z2, bank)
    smoothed[0].sum().backward()
    assert bank.grad is None
    assert z2.grad[0].abs().sum() > 0  # h+ itself is not stopped (paper, after Eq. 5)
    assert torch.all(z2.grad[1:] == 0)  # other rows enter only as retrieved (stopped) copies
    assert not term.memory.requires_grad


def test_waits_for_full_buffer_then_pushes_only_in_training():
    term = InstanceSmoothing(SmoothingSettings(buffer_size=8, neighbors=2), D, 2)
    for step in range(2):  # 2 x 4 rows fill the buffer; retrieval happens before each push
        loss = term.extra_loss(make_ctx(b=4, step=step, seed=step))
        assert float(loss) == 0.0 and term.logs()["active"] == 0.0
    loss = term.extra_loss(make_ctx(b=4, step=2, seed=2))
    assert float(loss.detach()) > 0 and term.logs()["active"] == 1.0
    term.eval()
    before = term.memory.clone()
    term.extra_loss(make_ctx(b=4, step=3, seed=3))
    assert torch.equal(before, term.memory)


def test_partial_buffer_when_not_waiting():
    term = InstanceSmoothing(SmoothingSettings(buffer_size=8, neighbors=3, wait_for_full_buffer=False), D, 2)
    term.push(torch.randn(3, D))
    bank = term.entries().clone()
    ctx = make_ctx(b=4)
    loss = term.extra_loss(ctx)
    smoothed = [naive_knn_smoothed(ctx.z2[r].detach().double(), bank.double(), 3, 2.0) for r in range(4)]
    assert float(loss.detach()) == pytest.approx(0.1 * naive_smoothing_loss(ctx, smoothed), rel=1e-5)


# ------------------------------------------------------------------ alpha


def test_cosine_alpha_schedule_eq8():
    assert cosine_alpha(0.0, 0.005, 0.05) == pytest.approx(0.005)  # start
    assert cosine_alpha(0.25, 0.005, 0.05) == pytest.approx(0.05 - 0.045 * math.cos(math.pi / 4))
    assert cosine_alpha(0.5, 0.005, 0.05) == pytest.approx(0.05)  # reaches alpha_end at mid-training
    assert cosine_alpha(0.75, 0.005, 0.05) == pytest.approx(0.05)  # min{., 0} keeps it there
    assert cosine_alpha(1.0, 0.005, 0.05) == pytest.approx(0.05)  # end
    term = InstanceSmoothing(SmoothingSettings(alpha_schedule="cosine"), D, 2)
    assert [term.alpha(p) for p in (0.0, 0.5, 1.0)] == pytest.approx([0.005, 0.05, 0.05])
    assert InstanceSmoothing(SmoothingSettings(alpha=0.1), D, 2).alpha(0.7) == 0.1


def test_alpha_follows_training_progress():
    term = filled_term({"buffer_size": 12, "neighbors": 3, "alpha_schedule": "cosine"})
    term.extra_loss(make_ctx(step=0, total=100))
    assert term.logs()["alpha"] == pytest.approx(0.005)
    term.extra_loss(make_ctx(step=25, total=100))
    assert term.logs()["alpha"] == pytest.approx(0.05 - 0.045 * math.cos(math.pi / 4))
    term.extra_loss(make_ctx(step=99, total=100))
    assert term.logs()["alpha"] == pytest.approx(0.05)


# ------------------------------------------------------------------ config


@pytest.mark.parametrize("bad,key", [
    ({"neighbors": 16, "buffer_size": 16}, "neighbors"), ({"beta": 0}, "beta"), ({"alpha": -0.1}, "alpha"),
    ({"alpha_schedule": "linear"}, "alpha_schedule"), ({"retrieval": "pdp"}, "retrieval"),
    ({"retrieval": "pddp", "clusters": 0}, "clusters"),
    ({"retrieval": "kmeans", "clusters": 2048}, "clusters"), ({"retrieval": "kmeans", "gamma": 1.5}, "gamma"),
    ({"buffer": 5}, "buffer"),
])
def test_config_errors_name_the_key(bad, key):
    with pytest.raises(ConfigError, match=key):
        validate_objectives({"instance_smoothing": bad}, "run x")


def test_push_first_needs_a_buffer_of_at_least_one_batch():
    from csebench.study.params import TrainingConfig

    with pytest.raises(ConfigError, match="buffer_size"):
        validate_objectives({"instance_smoothing": {"buffer_size": 32, "neighbors": 4, "push_before_retrieval": True}},
                            "run x", TrainingConfig(batch_size=64))
    validate_objectives({"instance_smoothing": {"buffer_size": 32, "neighbors": 4}}, "run x", TrainingConfig(batch_size=64))


# ----------------------------------------------------------------------------- the settings, through `csebench train`


@pytest.mark.skipif(not has_term("smoothing", "InstanceSmoothing"), reason="IS-CSE term (objectives/smoothing.py) not present")
def test_iscse_k_not_below_buffer_size(inputs, capsys):
    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"instance_smoothing": {"buffer_size": 8, "neighbors": 8}}}}},
                "objectives.instance_smoothing", "neighbors (8) must be < buffer_size (8)")

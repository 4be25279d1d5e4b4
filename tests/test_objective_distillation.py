"""DistillCSE (distillation): Eq. 2/3 against a loop implementation, stop-gradient to teachers,
Group-P (Eq. 5, 6) and rank-range shuffling, teacher components (Eq. 7), settings."""

import math

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.study.params import TrainingConfig
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.distillation import (Distillation, DistillationSettings, group_p_groups, group_p_shuffle,
                                              rank_range_shuffle, shuffle_within_groups, teacher_runs)
from csebench.training.teachers import save_teacher_cache
from runhelpers import assert_train_fails, has_term

CORPUS = 40


def write_caches(tmp_path, teachers):
    """Save (CORPUS, D) teacher embeddings (normalized here) as caches; return their paths."""
    paths = []
    for m, emb in enumerate(teachers):
        emb = torch.nn.functional.normalize(emb, dim=-1).numpy()
        path = tmp_path / f"t{m}" / "embeddings.npy"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_teacher_cache(path, emb, {"format": 1, "model": f"t{m}", "teacher_run": None, "pooler": "cls_before_pooler",
                                       "rows": emb.shape[0], "dim": emb.shape[1], "dtype": "float32",
                                       "normalized": True, "max_seq_length": 32, "tokenizer": "x",
                                       "corpus": "c", "corpus_sha256": "0"})
        paths.append(str(path))
    return paths


def make_ctx(b=6, n=None, d=8, offset=0, step=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = n or b
    z1 = torch.randn(b, d, generator=g, requires_grad=True)
    z2 = torch.randn(n, d, generator=g, requires_grad=True)
    all_idx = torch.randperm(CORPUS, generator=g)[:n]
    idx = all_idx[offset : offset + b]
    return StepContext(z1=z1, z2=z2, temperature=0.05, step=step, total_steps=10, indices=idx,
                       all_indices=all_idx, positive_offset=offset)


def cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def naive_teacher(teachers, i, j):
    """Eq. 7: the mean over teachers of the cosine of corpus rows i and j."""
    return sum(cos(e[i].double(), e[j].double()) for e in teachers) / len(teachers)


def naive_distill(ctx, teachers, tau_s, tau_t, similarity="anchors", reduction="mean", teacher_override=None):
    """Eq. 2 one anchor at a time: - sum_{j != i} q(t_ij) log p(s_ij)."""
    z1 = ctx.z1.detach().double()
    other = z1 if similarity == "anchors" else ctx.z2.detach().double()
    cols = ctx.indices if similarity == "anchors" else ctx.all_indices
    total = 0.0
    for i in range(z1.shape[0]):
        self_col = i if similarity == "anchors" else ctx.positive_offset + i
        js = [j for j in range(other.shape[0]) if j != self_col]
        s = {j: cos(z1[i], other[j]) for j in js}
        if teacher_override is not None:
            t = {j: float(teacher_override[i][k]) for k, j in enumerate(js)}
        else:
            t = {j: naive_teacher(teachers, int(ctx.indices[i]), int(cols[j])) for j in js}
        zs = sum(math.exp(s[k] / tau_s) for k in js)
        zt = sum(math.exp(t[k] / tau_t) for k in js)
        total += -sum(math.exp(t[j] / tau_t) / zt * math.log(math.exp(s[j] / tau_s) / zs) for j in js)
    return total / z1.shape[0] if reduction == "mean" else total


def term_for(tmp_path, teachers, **settings):
    settings.setdefault("teachers", {"run": "simcse", "seeds": list(range(len(teachers)))})
    s = DistillationSettings(**settings)
    s.validate("test")
    return Distillation(s, 8, 2, teacher_cache=write_caches(tmp_path, teachers), corpus_size=CORPUS)


def teacher_embs(m, d=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(CORPUS, d + k, generator=g) for k in range(m)]  # components may differ in width


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("similarity,offset,n,reduction", [("anchors", 0, None, "mean"), ("cross_view", 0, None, "mean"),
                                                          ("cross_view", 6, 18, "mean"), ("anchors", 6, 18, "sum")])
def test_loss_matches_equation_2(tmp_path, m, similarity, offset, n, reduction):
    teachers = teacher_embs(m)
    term = term_for(tmp_path, teachers, shuffle="none", similarity=similarity, reduction=reduction, weight=0.7)
    ctx = make_ctx(b=6, n=n, offset=offset)
    loss = term.extra_loss(ctx)
    expected = 0.7 * naive_distill(ctx, teachers, 0.02, 0.01, similarity, reduction)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-4)


def test_released_code_temperatures(tmp_path):
    teachers = teacher_embs(1)
    term = term_for(tmp_path, teachers, shuffle="none", student_temperature=0.025, teacher_temperature=0.0125)
    ctx = make_ctx()
    assert float(term.extra_loss(ctx).detach()) == pytest.approx(naive_distill(ctx, teachers, 0.025, 0.0125), rel=1e-4)


def test_objective_adds_lambda_times_distill_to_infonce(tmp_path):
    teachers = teacher_embs(2)
    paths = write_caches(tmp_path, teachers)
    settings = {"teachers": {"run": "simcse", "seeds": [1, 2]}, "shuffle": "none", "weight": 2.0}
    obj = Objective(validate_objectives({"distillation": settings}, "t"), 8, 2, teacher_cache=paths, corpus_size=CORPUS)
    plain = Objective({}, 8, 2)
    ctx = make_ctx()
    loss, logs = obj(ctx)
    base, _ = plain(ctx)
    assert float(loss.detach()) == pytest.approx(float(base.detach()) + 2.0 * naive_distill(ctx, teachers, 0.02, 0.01), rel=1e-4)
    assert logs["distillation/teachers"] == 2


def test_group_p_loss_equals_equation_2_on_the_shuffled_teacher(tmp_path):
    teachers = teacher_embs(2)
    term = term_for(tmp_path, teachers)  # paper default: Group-P p = 0.1
    ctx = make_ctx(b=32, step=3)
    loss = term.extra_loss(ctx)
    b = 32
    t = term.bank.logits(ctx.indices, ctx.indices)
    keep = ~torch.eye(b, dtype=torch.bool)
    t = t[keep].view(b, b - 1)
    shuffled = group_p_shuffle(t, 0.1, term.generator(ctx, torch.device("cpu")))
    assert float(loss.detach()) == pytest.approx(naive_distill(ctx, teachers, 0.02, 0.01, teacher_override=shuffled), rel=1e-4)
    # the same step gives the same shuffle (resumable); another step a different one
    assert float(term.extra_loss(ctx).detach()) == float(loss.detach())
    ctx.step = 4
    assert float(term.extra_loss(ctx).detach()) != float(loss.detach())


def test_gradients_reach_the_student_not_the_teachers(tmp_path):
    teachers = teacher_embs(2)
    term = term_for(tmp_path, teachers)
    ctx = make_ctx()
    term.extra_loss(ctx).backward()
    assert ctx.z1.grad.abs().sum() > 0
    assert term.bank.matrix.grad is None and not term.bank.matrix.requires_grad
    assert list(term.parameters()) == []  # nothing of the teachers is trained

    class GradBank:  # teacher embeddings that *could* take a gradient
        num_teachers = 1

        def __init__(self):
            self.emb = torch.randn(CORPUS, 8, requires_grad=True)

        def logits(self, rows, cols, device=None):
            e = torch.nn.functional.normalize(self.emb, dim=-1)
            return (e[rows] @ e[cols].T).to(device)

    bank = GradBank()
    s = DistillationSettings(teachers={"run": "simcse"}, shuffle="none")
    term = Distillation(s, 8, 2, bank=bank)
    ctx = make_ctx()
    term.extra_loss(ctx).backward()
    assert bank.emb.grad is None
    assert ctx.z1.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- Group-P


def naive_groups(row, p, temperature=1.0):
    """Eq. 5 for one row: G(t_j) = sum_{t_k >= t_j} softmax(t)_k; group g for G in (g p, (g+1) p]."""
    vals = [float(v) for v in row]
    z = sum(math.exp(v / temperature) for v in vals)
    n_groups = math.ceil(1 / p - 1e-9)
    out = []
    for v in vals:
        g_cum = sum(math.exp(u / temperature) / z for u in vals if u >= v)
        out.append(min(max(math.ceil(g_cum / p) - 1, 0), n_groups - 1))
    return out


def test_group_ids_match_equation_5():
    g = torch.Generator().manual_seed(0)
    logits = torch.rand(8, 63, generator=g) * 2 - 1
    logits[0, 5] = logits[0, 9]  # a tie shares its group
    for temperature in (1.0, 0.05):
        order, groups = group_p_groups(logits, 0.1, temperature)
        for r in range(logits.shape[0]):
            expected = naive_groups(logits[r], 0.1, temperature)
            got = [0] * 63
            for k in range(63):
                got[int(order[r, k])] = int(groups[r, k])
            assert got == expected
    assert int(groups.max()) <= 9  # intervals p, 2p, ..., 1


@pytest.mark.parametrize("b", [64, 9])
@pytest.mark.parametrize("p", [0.05, 0.1, 0.12, 0.5])
def test_group_p_only_permutes_within_groups(b, p):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(b, b - 1, generator=g) * 0.3
    temperature = 0.05  # sharper probabilities: several non-trivial groups per row
    out = group_p_shuffle(logits, p, torch.Generator().manual_seed(2), temperature)
    assert torch.equal(out.sort(dim=1).values, logits.sort(dim=1).values)  # each row keeps its multiset
    moved = 0
    for r in range(b):
        groups = naive_groups(logits[r], p, temperature)
        group_of_value = {float(v): gid for v, gid in zip(logits[r], groups)}
        for j in range(b - 1):
            assert group_of_value[float(out[r, j])] == groups[j]  # value came from the same group
        moved += int((out[r] != logits[r]).sum())
    assert moved > 0


def test_group_p_random_across_calls_deterministic_given_generator():
    logits = torch.randn(16, 63, generator=torch.Generator().manual_seed(3)) * 0.1
    a = group_p_shuffle(logits, 0.1, torch.Generator().manual_seed(7))
    b = group_p_shuffle(logits, 0.1, torch.Generator().manual_seed(7))
    c = group_p_shuffle(logits, 0.1, torch.Generator().manual_seed(8))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_within_group_shuffle_draws_every_permutation_of_the_groups():
    # sorted positions 0-1 form one group, 2-3 another: exactly the 2 x 2 within-group permutations appear
    logits = torch.tensor([[3.0, 2.5, -3.0, -3.5]])
    order, groups = torch.arange(4).unsqueeze(0), torch.tensor([[0, 0, 1, 1]])
    seen = {}
    gen = torch.Generator().manual_seed(0)
    for _ in range(400):
        key = tuple(shuffle_within_groups(logits, order, groups, gen)[0].tolist())
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) == {(3.0, 2.5, -3.0, -3.5), (2.5, 3.0, -3.0, -3.5), (3.0, 2.5, -3.5, -3.0), (2.5, 3.0, -3.5, -3.0)}
    assert min(seen.values()) > 60  # roughly uniform (expected 100 each)


def test_group_p_with_p_one_is_a_full_row_shuffle_and_small_p_can_be_identity():
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(0))
    out = group_p_shuffle(logits, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(out.sort(1).values, logits.sort(1).values) and not torch.equal(out, logits)
    sharp = torch.tensor([[10.0, 0.0, -10.0]])  # probabilities ~ (1, 0, 0): every G is above 0.9
    order, groups = group_p_groups(sharp, 0.1)
    assert groups.tolist() == [[9, 9, 9]]  # every G rounds into the last interval (.9, 1]


def loop_group_ids(row, p, temperature=1.0):
    """Per-row reference of Eq. 5 as the vectorized code computes it (float32 softmax / cumsum of the
    sorted row, interval ceil(G / p) - 1), with a Python loop giving a run of tied logits the G of
    its last member; returns the interval of every column."""
    vals, order = torch.sort(row.float(), descending=True)
    interval = (torch.ceil(torch.softmax(vals / temperature, dim=0).cumsum(dim=0) / p) - 1).tolist()
    vals, order = vals.tolist(), order.tolist()
    n_groups = max(1, math.ceil(1.0 / p - 1e-9))
    out = [0] * len(vals)
    start = 0
    while start < len(vals):
        end = start
        while end + 1 < len(vals) and vals[end + 1] == vals[start]:
            end += 1
        for k in range(start, end + 1):
            out[order[k]] = min(max(int(interval[end]), 0), n_groups - 1)
        start = end + 1
    return out


def random_teacher_logits(b, seed, ties=False):
    g = torch.Generator().manual_seed(seed)
    logits = (0.35 + 0.15 * torch.randn(b, b - 1, generator=g)).clamp(-1, 1)  # teacher cosines (as benchmarked)
    if ties:
        logits = (logits * 16).round() / 16  # many tied logits, some across interval boundaries
    return logits


@pytest.mark.parametrize("b,ties,p,temperature", [(512, False, 0.1, 1.0), (512, True, 0.1, 1.0), (64, True, 0.05, 0.05),
                                                  (64, False, 0.12, 0.05), (33, True, 0.5, 0.02), (2, False, 0.1, 1.0)])
def test_group_p_shuffle_matches_a_per_row_loop(b, ties, p, temperature):
    """The vectorized shuffle against per-row loops: every row keeps its multiset and every interval of
    Eq. 5 keeps its values (values only move within their interval), for several random draws."""
    logits = random_teacher_logits(b, seed=b + int(ties), ties=ties)
    expected = [loop_group_ids(logits[r], p, temperature) for r in range(b)]
    order, groups = group_p_groups(logits, p, temperature)
    got = torch.empty_like(groups).scatter_(1, order, groups)
    assert got.tolist() == expected  # the interval of every column
    moved = 0
    for seed in range(3):
        out = group_p_shuffle(logits, p, torch.Generator().manual_seed(seed), temperature)
        assert torch.equal(out.sort(dim=1).values, logits.sort(dim=1).values)
        ids = torch.tensor(expected)
        for gid in ids.unique().tolist():
            inside = ids == gid
            a = torch.where(inside, logits, torch.full_like(logits, math.inf)).sort(dim=1).values
            bb = torch.where(inside, out, torch.full_like(out, math.inf)).sort(dim=1).values
            assert torch.equal(a, bb), gid  # per row, the interval holds the same values after the shuffle
        moved += int((out != logits).sum())
    assert moved > 0 or b == 2


@pytest.mark.parametrize("b,ties", [(512, False), (512, True), (64, True), (9, False)])
def test_group_p_cpu_path_is_exactly_the_generic_one(b, ties, monkeypatch):
    """group_p_shuffle's CPU path (value sort + interval boundaries + one argsort) gives bit for bit the
    generic path's result (group_p_groups + shuffle_within_groups, torch sorts as on a GPU), given the
    same keys: the result depends on the values and the keys only, not on how ties sort."""
    import csebench.objectives.distillation as distillation

    logits = random_teacher_logits(b, seed=3 * b + int(ties), ties=ties)
    for p, temperature in ((0.1, 1.0), (0.05, 0.05), (0.5, 1.0), (1.0, 1.0)):
        keys = torch.rand(logits.shape, generator=torch.Generator().manual_seed(b), dtype=torch.float64)
        fast = group_p_shuffle(logits, p, temperature=temperature, keys=keys)
        assert torch.equal(fast, shuffle_within_groups(logits, *group_p_groups(logits, p, temperature), keys=keys))
        with monkeypatch.context() as m:
            m.setattr(distillation, "_numpy_sortable", lambda t: False)
            assert torch.equal(fast, group_p_shuffle(logits, p, temperature=temperature, keys=keys))
        assert torch.equal(group_p_shuffle(logits.double(), p, temperature=temperature, keys=keys), fast.double())
        # rows are independent: a DDP rank's rows with its slice of the global keys shuffle as in one process
        assert torch.equal(group_p_shuffle(logits[b // 3 :], p, temperature=temperature, keys=keys[b // 3 :]), fast[b // 3 :])


def test_group_p_shuffle_draws_every_within_interval_permutation():
    # probabilities ~0.2 each: G ~ .2, .4 | .6, .8, 1.0 -> intervals {0, 1} and {2, 3, 4} at p = 0.5
    logits = torch.tensor([[0.02, -0.01, 0.0, 0.01, -0.02]])
    order, groups = group_p_groups(logits, 0.5)
    assert groups.tolist() == [[0, 0, 1, 1, 1]]
    seen = {}
    gen = torch.Generator().manual_seed(0)
    for _ in range(1200):
        key = tuple(group_p_shuffle(logits, 0.5, gen)[0].tolist())
        seen[key] = seen.get(key, 0) + 1
    row = logits[0].tolist()
    top, rest = {row[0], row[3]}, {row[1], row[2], row[4]}  # columns 0, 3 hold interval 0's values
    assert len(seen) == 2 * 6  # 2! x 3! within-interval permutations, all of them
    for key in seen:
        assert {key[0], key[3]} == top and {key[1], key[2], key[4]} == rest
    assert min(seen.values()) > 60  # roughly uniform (expected 100 each)


def test_rank_range_shuffles_only_that_range():
    b = 64
    logits = torch.randn(b, b - 1, generator=torch.Generator().manual_seed(4))
    out = rank_range_shuffle(logits, 13, 24, torch.Generator().manual_seed(5))
    ranks = logits.argsort(dim=1, descending=True).argsort(dim=1) + 1  # 1-based rank of each column
    inside = (ranks >= 13) & (ranks <= 24)
    assert torch.equal(out[~inside], logits[~inside])  # other ranks stay in place
    for r in range(b):
        assert sorted(out[r][inside[r]].tolist()) == sorted(logits[r][inside[r]].tolist())
    assert not torch.equal(out, logits)
    # Table 3's last range 49-63 clips to the row length
    out = rank_range_shuffle(logits, 49, 70, torch.Generator().manual_seed(5))
    tail = ranks >= 49
    assert torch.equal(out[~tail], logits[~tail]) and not torch.equal(out, logits)


# ----------------------------------------------------------------------------- settings


def test_teacher_runs():
    assert teacher_runs({"teachers": {"run": "simcse", "seeds": [1, 2]}}, 42) == [("simcse", 1), ("simcse", 2)]
    assert teacher_runs({"teachers": {"run": "simcse"}}, 42) == [("simcse", 42)]  # default: the student's seed
    assert teacher_runs({"teachers": [{"run": "a", "seeds": [1]}, {"run": "b", "seeds": [1, 2]}, "a"]}, 1) == \
        [("a", 1), ("b", 1), ("b", 2)]


@pytest.mark.parametrize("settings,match", [
    ({}, "teachers is required"),
    ({"teachers": {"run": "simcse", "seed": [1]}}, "did you mean 'seeds'"),
    ({"teachers": {"run": "simcse", "seeds": []}}, "non-empty list"),
    ({"teachers": {"run": "simcse", "seeds": [1, 1]}}, "listed twice"),
    ({"teachers": {"run": "simcse"}, "shuffle": "groupp"}, "did you mean 'group_p'"),
    ({"teachers": {"run": "simcse"}, "p": 0}, "p must be in"),
    ({"teachers": {"run": "simcse"}, "student_temperature": 0}, "student_temperature must be > 0"),
    ({"teachers": {"run": "simcse"}, "shuffle": "rank_range"}, "rank_range: expected"),
    ({"teachers": {"run": "simcse"}, "shuffle": "rank_range", "rank_range": [12, 1]}, "rank_range: expected"),
    ({"teachers": {"run": "simcse"}, "rank_range": [1, 12]}, "only used with shuffle: rank_range"),
    ({"teachers": {"run": "simcse"}, "tau": 0.1}, "unknown key 'tau'"),
])
def test_settings_errors(settings, match):
    with pytest.raises(ConfigError, match=match):
        validate_objectives({"distillation": settings}, "run demo/x")


def test_rank_range_must_fit_the_batch():
    with pytest.raises(ConfigError, match="only 15 other sentences"):
        validate_objectives({"distillation": {"teachers": {"run": "s"}, "shuffle": "rank_range", "rank_range": [16, 20]}},
                            "run demo/x", TrainingConfig(batch_size=16))


def test_defaults_are_the_papers():
    s = validate_objectives({"distillation": {"teachers": {"run": "simcse"}}}, "x")["distillation"]
    assert (s["weight"], s["student_temperature"], s["teacher_temperature"], s["shuffle"], s["p"]) == (1.0, 0.02, 0.01, "group_p", 0.1)


def test_missing_teacher_cache_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"teacher\(s\) simcse/seed0.*--teacher-cache"):
        Objective({"distillation": {"teachers": {"run": "simcse"}}}, 8, 2)


def test_shuffle_keys_of_a_rank_are_its_rows_of_the_global_batch(tmp_path):
    term = term_for(tmp_path, teacher_embs(1))
    b, k = 4, 7
    one = make_ctx(b=2 * b, step=5)
    full = term.shuffle_keys(one, 2 * b, k, torch.device("cpu"))
    for rank in (0, 1):  # a 2-process step: rank r holds rows r*b .. r*b+b-1 of the same global batch
        ctx = make_ctx(b=b, n=2 * b, offset=rank * b, step=5)
        ctx.world_size, ctx.rank = 2, rank
        assert torch.equal(term.shuffle_keys(ctx, b, k, torch.device("cpu")), full[rank * b : (rank + 1) * b])


# ----------------------------------------------------------------------------- the settings, through `csebench train`


@pytest.mark.skipif(not has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
@pytest.mark.parametrize("p", [0, 1.5, -0.1])
def test_group_p_outside_unit_interval(inputs, capsys, p):
    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"distillation": {
        "teachers": {"run": "simcse", "seeds": [2]}, "shuffle": "group_p", "p": p}}}}},
        "objectives.distillation.p must be in (0, 1]", f"got {float(p)}")

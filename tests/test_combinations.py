"""The terms combined (docs/methods.md, "Combining terms"): every interacting pair and all four on a
batch against a direct per-anchor implementation of the combined loss (value and gradients);
methods composed from config (`compose:`), the `combinations` suites, the plan, the grid's numbers."""

import itertools

import numpy as np
import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.study.params import load_params
from csebench.study.resolve import method_label, method_settings, resolve_run
from csebench.study.typed import Params
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from runhelpers import PARAMS, assert_fails, write_config
from test_objective_distillation import CORPUS, teacher_embs, write_caches

D, LAYER, NUM_LAYERS = 8, 2, 3
SETTINGS = {"gaussian_negatives": {"num_negatives": 5, "weight": 0.7},
            "instance_smoothing": {"buffer_size": 10, "neighbors": 3, "alpha": 0.2},
            "layer_negatives": {},
            "distillation": {"teachers": {"run": "simcse", "seeds": [1, 2]}, "shuffle": "none", "weight": 0.5}}
TERMS = list(SETTINGS)


def batch(b=6, seed=0):
    """Anchors, positives and the SSCL layer's rows, all tracking gradients; corpus rows 0..b-1."""
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(b, D, generator=g)
    # positives and layer rows about as close to the anchors as other sentences: every part of the loss is O(1)
    z2 = (z1 + 1.5 * torch.randn(b, D, generator=g)).requires_grad_()
    layer = (z1 + 1.5 * torch.randn(b, D, generator=g)).requires_grad_()
    z1.requires_grad_()
    return StepContext(z1=z1, z2=z2, temperature=0.05, step=3, total_steps=10, indices=torch.arange(b),
                       all_indices=torch.arange(b), layer_z1={LAYER: layer}, layer_z2={LAYER: layer},
                       num_layers=NUM_LAYERS)


def cos(a, b):
    return torch.dot(a, b) / (a.norm() * b.norm())


def smoothed_positive(h, bank, k, beta):
    """IS-CSE Eq. 4 for one positive: its k nearest buffer rows by a full sort, softmax attention."""
    q = h / h.norm()
    ranked = sorted(range(bank.shape[0]), key=lambda r: -float(torch.dot(q.detach(), bank[r])))
    group = [q] + [bank[r] for r in ranked[:k]]
    w = torch.softmax(torch.stack([torch.dot(q, row) / beta for row in group]), dim=0)
    return sum(w[m] * row for m, row in enumerate(group))


def naive_combined(ctx, terms, gauss=None, bank=None, teachers=None):
    """docs/methods.md "Combining terms", one anchor (and one candidate) at a time in float64:
    L = mean_i [ l_i + alpha l^s_i + lambda_d l^d_i ], the extra negatives in l_i's denominator only."""
    z1, z2, tau = ctx.z1.double(), ctx.z2.double(), ctx.temperature
    layer = ctx.layer_z1[LAYER].double()
    n = z2.shape[0]
    gs, iscse, sscl, distill = (SETTINGS[t] if t in terms else None for t in TERMS)  # {} = on, defaults
    if iscse is not None:
        hs = [smoothed_positive(z2[j], bank, iscse["neighbors"], 2.0) for j in range(n)]
    total = 0.0
    for i in range(z1.shape[0]):
        den = sum(torch.exp(cos(z1[i], z2[j]) / tau) for j in range(n))
        if gs is not None:  # lambda_g sum_k e^{s(h_i, g_k)}
            den = den + gs["weight"] * sum(torch.exp(cos(z1[i], g) / tau) for g in gauss)
        if sscl is not None:  # Eq. 4 as printed: the own intermediate row inside the sum over j, N times
            den = den + n * torch.exp(cos(z1[i], layer[i]) / tau)
        total = total + torch.log(den) - cos(z1[i], z2[i]) / tau
        if iscse is not None:  # Eq. 6 unchanged: the smoothed positives of the batch are the only candidates
            den_s = sum(torch.exp(cos(z1[i], hs[j]) / tau) for j in range(n))
            total = total + iscse["alpha"] * (torch.log(den_s) - cos(z1[i], hs[i]) / tau)
        if distill is not None:  # Eq. 2 unchanged: the other in-batch sentences only, raw anchors, unsmoothed teachers
            others = [j for j in range(z1.shape[0]) if j != i]
            s = torch.stack([cos(z1[i], z1[j]) / 0.02 for j in others])
            t = torch.tensor([np.mean([float(cos(e[i].double(), e[j].double())) for e in teachers]) / 0.01
                              for j in others], dtype=torch.float64)
            total = total - distill["weight"] * (torch.softmax(t, 0) * torch.log_softmax(s, 0)).sum()
    return total / z1.shape[0]


def composed(tmp_path, terms, ctx):
    """The composed Objective's loss on ``ctx`` and what the direct implementation needs to match it."""
    settings = validate_objectives({t: SETTINGS[t] for t in terms}, "test")
    teachers = teacher_embs(2) if "distillation" in terms else None
    paths = write_caches(tmp_path, teachers) if teachers else []
    objective = Objective(settings, D, NUM_LAYERS, teacher_cache=paths, corpus_size=CORPUS)
    extra = {"teachers": teachers}
    if "instance_smoothing" in terms:
        smoothing = objective.terms["instance_smoothing"]
        smoothing.push(torch.randn(10, D, generator=torch.Generator().manual_seed(5)))
        extra["bank"] = smoothing.entries().clone().double()  # before the step pushes this batch
    if "gaussian_negatives" in terms:
        extra["gauss"] = objective.terms["gaussian_negatives"].draw(5, D, ctx.step, torch.device("cpu")).double()
    loss, _ = objective(ctx)
    return loss, extra


def grads(ctx, loss):
    tensors = [ctx.z1, ctx.z2, ctx.layer_z1[LAYER]]
    return [g if g is not None else torch.zeros_like(t) for g, t in zip(torch.autograd.grad(loss, tensors, allow_unused=True), tensors)]


COMBINATIONS = [list(p) for p in itertools.combinations(TERMS, 2)] + [TERMS]


@pytest.mark.parametrize("terms", COMBINATIONS, ids=["+".join(t) for t in COMBINATIONS])
def test_combined_loss_and_gradients_match_the_direct_implementation(tmp_path, terms):
    ctx = batch()
    loss, extra = composed(tmp_path, terms, ctx)
    expected = naive_combined(ctx, terms, **extra)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    for got, want in zip(grads(ctx, loss), grads(ctx, expected)):
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dropped", TERMS)
def test_every_term_counts_in_the_combination(tmp_path, dropped):
    """The direct loss of all four differs clearly from the loss without any one term, so the
    comparison above would see a term the composition dropped or counted twice."""
    ctx = batch()
    _, extra = composed(tmp_path, TERMS, ctx)
    full = float(naive_combined(ctx, TERMS, **extra).detach())
    assert abs(full - float(naive_combined(ctx, [t for t in TERMS if t != dropped], **extra).detach())) > 1e-2


def test_sscl_released_halves_carry_the_gaussian_negatives_in_one_half_only():
    """SSCL's released variant averages with plain SimCSE; the Gaussian columns join the first half."""
    ctx = batch()
    objective = Objective(validate_objectives({"gaussian_negatives": SETTINGS["gaussian_negatives"],
                                               "layer_negatives": {"variant": "released"}}, "t"), D, NUM_LAYERS)
    gauss = objective.terms["gaussian_negatives"].draw(5, D, ctx.step, torch.device("cpu")).double()
    loss, _ = objective(ctx)
    z1, z2, layer, tau = ctx.z1.double(), ctx.z2.double(), ctx.layer_z1[LAYER].double(), ctx.temperature
    with_negatives = plain = 0.0
    for i in range(6):
        den = sum(torch.exp(cos(z1[i], z2[j]) / tau) for j in range(6))
        plain += float((torch.log(den) - cos(z1[i], z2[i]) / tau).detach())
        den = den + 0.7 * sum(torch.exp(cos(z1[i], g) / tau) for g in gauss)
        den = den + 2 * sum(torch.exp(cos(z1[i], layer[j]) / tau) for j in range(6))  # both views (the same rows here)
        with_negatives += float((torch.log(den) - cos(z1[i], z2[i]) / tau).detach())
    assert float(loss.detach()) == pytest.approx((with_negatives + plain) / 2 / 6, rel=1e-5)


# ----------------------------------------------------------------------------- composed methods


def test_combined_methods_are_the_union_of_the_single_term_runs():
    """Each run of the combinations suite has exactly the terms and training settings of its single-term
    runs (defined by composition, nothing copied), and all four papers' BERT-base settings agree."""
    params = load_params(PARAMS)
    singles = {"gaussian_negatives": "gs-infonce", "instance_smoothing": "iscse", "layer_negatives": "sscl",
               "distillation": "distillcse"}
    cfg = {name: resolve_run(params, "combinations", name, 42) for name in ["simcse", *singles.values()]}
    pairs = {"gs-infonce+iscse", "gs-infonce+sscl", "gs-infonce+distillcse", "iscse+sscl", "iscse+distillcse",
             "sscl+distillcse"}
    for name in pairs | {"all-four"}:
        run = resolve_run(params, "combinations", name, 42)
        terms = set(run.objectives)
        assert len(terms) == (4 if name == "all-four" else 2)
        assert run.objectives == {t: cfg[singles[t]].objectives[t] for t in terms}
        assert run.training == cfg["simcse"].training  # batch 64, lr 3e-5, length 32, tau 0.05, 1 epoch
        assert run.backbone_name == "bert-base" and run.train
    assert resolve_run(params, "combinations", "all-four", 43).method_label == "GS-InfoNCE + IS-CSE + SSCL-SimCSE + DistillCSE"
    assert method_label(params, "iscse+sscl") == "IS-CSE + SSCL-SimCSE"
    teachers = resolve_run(params, "combinations", "iscse+distillcse", 44).objectives["distillation"]["teachers"]
    assert teachers == {"run": "teachers", "seeds": list(range(1, 17))}  # the paper's 16 SimCSE components


def test_demo_combinations_reuse_the_demo_settings():
    params = load_params(PARAMS)
    demo = resolve_run(params, "demo", "sscl", 42).training
    combo = resolve_run(params, "demo-combinations", "gs-infonce+sscl", 42)
    assert set(combo.objectives) == {"gaussian_negatives", "layer_negatives"}
    assert combo.backbone_name == "minilm" and vars(combo.training) == vars(demo)
    # so the study's SimCSE and single-term runs are the demo's own, trained once
    for run in ("simcse", "gs-infonce", "iscse", "sscl"):
        assert resolve_run(params, "demo-combinations", run, 42).key() == resolve_run(params, "demo", run, 42).key()
    buffer = resolve_run(params, "demo", "iscse", 42).objectives["instance_smoothing"]["buffer_size"]
    assert resolve_run(params, "demo-combinations", "iscse+sscl", 42).objectives["instance_smoothing"]["buffer_size"] == buffer
    # a demo run fills the buffer before its last third: the smoothing term acts (the released code waits for a full one)
    assert buffer / demo.batch_size <= demo.max_steps * 2 / 3


def _override(tmp_path, methods, runs):
    return write_config(tmp_path / "over.yaml", {"methods": methods, "suites": {"ci": {"runs": runs}}})


def test_a_composed_method_resolves_a_training_clash_by_setting_the_key(tmp_path):
    methods = {"a": {"objectives": {"gaussian_negatives": {}}, "training": {"weight_decay": 0.1}},
               "b": {"objectives": {"layer_negatives": {}}, "training": {"weight_decay": 0.2}},
               "ab": {"compose": ["a", "b"], "training": {"weight_decay": 0.3}}, "a_b": {"compose": ["a", "b"]}}
    params = load_params(PARAMS, [_override(tmp_path, methods, [{"name": "x", "backbone": "tiny", "method": "ab"},
                                                                {"name": "y", "backbone": "tiny", "method": "a_b"},
                                                                {"name": "z", "backbone": "tiny", "method": "a_b",
                                                                 "training": {"weight_decay": 0.4}}])])
    assert resolve_run(params, "ci", "x", 1).training.weight_decay == 0.3
    assert resolve_run(params, "ci", "z", 1).training.weight_decay == 0.4  # the run says which applies
    with pytest.raises(ConfigError, match=r"^methods\.a_b\.compose: the composed methods set training\.weight_decay "
                                          r"differently \(a: 0\.1, b: 0\.2\) on backbone tiny; set it in methods\.a_b\.training"):
        resolve_run(params, "ci", "y", 1)


@pytest.mark.parametrize("compose,key,values", [
    # SSCL-BERT's dropout 0 would take GS-InfoNCE's dropout positives away
    (["sscl_bert", "gs_infonce"], "dropout", r"sscl_bert: 0\.0, gs_infonce: not set, so None"),
    # the released GS-InfoNCE script's dropout 0.2 and fp16 would train IS-CSE too
    (["gs_infonce_released", "iscse"], "dropout", r"gs_infonce_released: 0\.2, iscse: not set, so None"),
    (["gs_infonce_released", "iscse"], "precision", r"gs_infonce_released: 'fp16', iscse: not set, so 'auto'"),
])
def test_a_training_key_only_some_composed_methods_set_is_refused(tmp_path, compose, key, values):
    """A training key that one composed part sets and another leaves unset is not applied to every term
    without a word: it is refused unless the composed method, the suite or the run says which value applies."""
    explicit = {"dropout": 0.1, "precision": "auto"}
    others = {k: v for k, v in explicit.items() if k != key}  # the run settles the other key: this one is left
    runs = [{"name": "x", "backbone": "bert-base", "method": "m", "training": others},
            {"name": "y", "backbone": "bert-base", "method": "m", "training": explicit}]
    params = load_params(PARAMS, [_override(tmp_path, {"m": {"compose": compose}}, runs)])
    with pytest.raises(ConfigError, match=rf"^methods\.m\.compose: the composed methods set training\.{key} differently "
                                          rf"\({values}\) on backbone bert-base; set it in methods\.m\.training .*the run's"):
        resolve_run(params, "ci", "x", 1)
    assert getattr(resolve_run(params, "ci", "y", 1).training, key) == explicit[key]
    # a key the other parts leave at the very value set is no clash: the combinations suite's methods agree
    for name in ["gs_infonce+sscl", "iscse+sscl", "all_four"]:
        assert method_settings(params, name, "bert-base")[2] == {}


@pytest.mark.parametrize("methods,message", [
    ({"a": {"objectives": {"layer_negatives": {}}}, "b": {"objectives": {"layer_negatives": {"stacked": 2}}},
      "m": {"compose": ["a", "b"]}},
     r"methods\.m\.compose: a and b both set the objective layer_negatives, differently"),
    ({"m": {"compose": ["simcse", "gs_infonse"]}},
     r"methods\.m\.compose: unknown method 'gs_infonse' \(did you mean 'gs_infonce'\?\)"),
    ({"m": {"compose": ["n"]}, "n": {"compose": ["m"]}},
     r"methods\.m\.compose: the method composes itself \(m -> n -> m\)"),
    ({"m": {"compose": "gs_infonce"}}, r"methods\.m\.compose: expected a list"),
])
def test_bad_compositions_are_one_clear_line(tmp_path, methods, message):
    from csebench.cli import main

    config = _override(tmp_path, methods, [{"name": "x", "backbone": "tiny", "method": "m"}])
    with pytest.raises(ConfigError, match=message):
        resolve_run(load_params(PARAMS, [config]), "ci", "x", 1)
    assert main(["show-config", "--config", str(config), "--suite", "ci", "--run", "x", "--seed", "1"]) == 2


def test_plan_counts_the_combinations_suite(tmp_path):
    from csebench.results.plan import plan, render_plan

    (p,) = plan(load_params(PARAMS), ["combinations"])
    assert p.training_runs == 12 * 3 + 16 and p.teacher_caches == 16
    hours = p.gpu_hours(989e12)
    assert 5 < hours < 100  # 52 BERT-base epochs of wiki1m at the assumed MFU
    line = next(line for line in render_plan([p], tmp_path).splitlines() if line.startswith("combinations "))
    assert line.split()[-1] == f"{hours:.1f}"


# ----------------------------------------------------------------------------- the grid's numbers


def write_sts(results, suite, run, seed, scores):
    """An sts.json of the 7 tasks (eval-sts's keys) under results/SUITE/runs/RUN/seedN."""
    from csebench.evaluation.sts import TEST_TASKS
    from csebench.core.io import write_json

    path = results / suite / "runs" / run / f"seed{seed}" / "sts.json"
    write_json(path, {"tasks": dict(zip(TEST_TASKS, scores)), "avg": float(np.mean(scores))})
    return path


def test_grid_gains_tests_and_the_better_single_term(tmp_path):
    from scipy import stats

    from csebench.results.combinations import COLUMNS, combination_grid, pairwise_gains

    params = load_params(PARAMS)
    rng = np.random.default_rng(0)
    base = {"simcse": 76.0, "gs-infonce": 76.5, "iscse": 76.8, "sscl": 77.0, "distillcse": 77.5, "gs-infonce+iscse": 77.0,
            "gs-infonce+sscl": 77.4, "gs-infonce+distillcse": 77.2, "iscse+sscl": 76.9, "iscse+distillcse": 78.0,
            "sscl+distillcse": 77.9, "all-four": 78.3}
    avg = {}
    for run, level in base.items():
        for seed in (42, 43, 44):
            scores = level + rng.normal(0, 0.5, 7)
            write_sts(tmp_path, "combinations", run, seed, scores)
            avg[run, seed] = float(np.mean(scores))
    rows = combination_grid(Params.of(params).suite("combinations"), tmp_path)
    by_run = {r.run: r for r in rows}
    assert [r.run for r in rows][:5] == ["simcse", "gs-infonce", "iscse", "sscl", "distillcse"] and rows[-1].run == "all-four"
    assert "teachers" not in by_run and len(rows) == 12  # the teachers are trained only
    assert by_run["iscse+sscl"].terms == ("instance_smoothing", "layer_negatives")
    row = by_run["iscse+sscl"]
    mine = [avg["iscse+sscl", s] for s in (42, 43, 44)]
    assert row.mean[-1] == pytest.approx(np.mean(mine)) and row.std[-1] == pytest.approx(np.std(mine, ddof=1))
    simcse = [avg["simcse", s] for s in (42, 43, 44)]
    assert row.vs_simcse.diff == pytest.approx(np.mean(mine) - np.mean(simcse))
    assert row.vs_simcse.p_value == pytest.approx(stats.ttest_rel(mine, simcse).pvalue)
    # the better single term by mean Avg.: SSCL (77.0) over IS-CSE (76.8), up to the noise
    singles = {r: np.mean([avg[r, s] for s in (42, 43, 44)]) for r in ("iscse", "sscl")}
    best = max(singles, key=singles.get)
    assert row.best_single == best
    assert row.vs_best_single.diff == pytest.approx(np.mean(mine) - singles[best])
    assert by_run["all-four"].best_single == max(("gs-infonce", "iscse", "sscl", "distillcse"),
                                                 key=lambda r: by_run[r].mean[-1])
    assert by_run["simcse"].vs_simcse is None and by_run["sscl"].best_single is None
    d = row.to_dict()
    assert list(d["mean"]) == COLUMNS and d["vs_best_single"]["test"] == "paired t-test (3 seeds)"

    terms, m = pairwise_gains(rows)
    assert terms == TERMS and np.allclose(m, m.T)
    i, j = terms.index("instance_smoothing"), terms.index("layer_negatives")
    assert m[i, j] == pytest.approx(row.vs_simcse.diff)
    assert m[j, j] == pytest.approx(by_run["sscl"].mean[-1] - by_run["simcse"].mean[-1])


def test_grid_of_one_seed_uses_the_bootstrap_where_pairs_exist(tmp_path):
    from csebench.results.combinations import combination_grid, pairwise_gains
    from csebench.evaluation.sts import TEST_TASKS, save_pairs

    params = load_params(PARAMS)
    rng = np.random.default_rng(1)
    gold = {t: rng.uniform(0, 5, 40) for t in TEST_TASKS}
    for k, run in enumerate(["simcse", "gs-infonce", "iscse", "sscl", "gs-infonce+sscl", "iscse+sscl"]):
        path = write_sts(tmp_path, "demo-combinations", run, 42, [70.0 + k] * 7)
        if run != "iscse+sscl":
            save_pairs(path.with_name("sts_pairs.npz"), {t: (g + rng.normal(0, 1 + k / 5, 40), g) for t, g in gold.items()})
    rows = {r.run: r for r in combination_grid(Params.of(params).suite("demo-combinations"), tmp_path, n_boot=200)}
    assert rows["gs-infonce+sscl"].vs_simcse.test.startswith("paired bootstrap (200 resamples")
    assert rows["gs-infonce+sscl"].best_single == "sscl" and rows["gs-infonce+sscl"].vs_best_single.p_value is not None
    assert rows["iscse+sscl"].vs_simcse.test == "none" and rows["iscse+sscl"].std is None
    terms, m = pairwise_gains(list(rows.values()))
    assert terms == ["gaussian_negatives", "instance_smoothing", "layer_negatives"]
    assert np.isnan(m[0, 1]) and m[0, 2] == pytest.approx(4.0)  # no GS-InfoNCE + IS-CSE run at demo scale


def test_grid_names_a_missing_result_and_a_missing_baseline(tmp_path):
    from csebench.results.combinations import combination_grid
    from csebench.core.errors import DataError

    params = load_params(PARAMS)
    with pytest.raises(DataError, match=r"STS result not found: .*/demo-combinations/runs/simcse/seed42/sts\.json"):
        combination_grid(Params.of(params).suite("demo-combinations"), tmp_path)
    config = _override(tmp_path, {}, [{"name": "gs", "backbone": "tiny", "method": "gs_infonce"}])
    write_sts(tmp_path, "ci", "gs", 1, [70.0] * 7)
    with pytest.raises(DataError, match=r"suite ci: the combination grid needs exactly one trained run without "
                                         r"objective terms \(SimCSE\) to compare with, found none"):
        combination_grid(Params.load(PARAMS, [config]).suite("ci"), tmp_path)


# ------------------------------------------------------------- the registry item: table and figure

def _write_grid(results, seeds=(42, 43, 44)):
    rng = np.random.default_rng(2)
    level = {"simcse": 76.0, "gs-infonce": 76.5, "iscse": 76.8, "sscl": 77.0, "distillcse": 77.5, "gs-infonce+iscse": 77.0,
             "gs-infonce+sscl": 77.4, "gs-infonce+distillcse": 77.2, "iscse+sscl": 76.9, "iscse+distillcse": 78.0,
             "sscl+distillcse": 77.9, "all-four": 78.3}
    for run, base in level.items():
        for seed in seeds:
            write_sts(results, "combinations", run, seed, base + rng.normal(0, 0.5, 7))


def test_the_combinations_item_renders_the_grid_as_a_table_and_a_matrix(tmp_path):
    """The combinations study: a registry item of its own (not a paper's), drawn from csebench.results.combinations'
    numbers: one row per combination with the gains and their tests, and the pairwise-gain matrix."""
    import csv

    from csebench.results.combinations import combination_grid, pairwise_gains
    from csebench.results.registry import load_registry
    from csebench.results.render import render_item

    reg = load_registry()
    assert reg.is_study("combinations") and not reg.is_study("is-cse")
    assert all(it.paper != "combinations" for it in reg.paper_items)  # not in the papers' coverage
    table, figure = reg.item("combinations/table-1"), reg.item("combinations/figure-1")
    assert table.suites == figure.suites == ["combinations"] and table.in_make_demo and table.demo
    params, results = load_params(PARAMS), tmp_path / "results"
    _write_grid(results)
    rows = {r.run: r for r in combination_grid(Params.of(params).suite("combinations"), results)}
    render_item("combinations/table-1", params, str(results), "paper", tmp_path / "out")
    md = (tmp_path / "out" / "table-1.md").read_text()
    assert "not a paper" in md.lower() or "beyond the papers" in md
    row = rows["iscse+sscl"]
    line = next(ln for ln in md.splitlines() if ln.startswith(f"| **{row.label}** |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "3" and cells[9] == f"{row.mean[-1]:.2f} ± {row.std[-1]:.2f}"
    assert cells[10] == f"{row.mean[-1] - rows['simcse'].mean[-1]:+.2f}" and cells[11].endswith("(t)")
    assert cells[12] == f"{row.mean[-1] - rows[row.best_single].mean[-1]:+.2f} (vs {row.best_single})"
    assert next(ln for ln in md.splitlines() if ln.startswith("| **SimCSE** |")).endswith("| – | – | – | – |")
    got = {r["run"]: r for r in csv.DictReader(open(tmp_path / "out" / "table-1.csv"))}
    assert len(got) == 12 and float(got["iscse+sscl"]["p_vs_simcse"]) == pytest.approx(row.vs_simcse.p_value, rel=1e-4)
    assert got["iscse+sscl"]["test_vs_better_single"] == "paired t-test (3 seeds)" and got["iscse+sscl"]["terms"] == "instance_smoothing layer_negatives"
    assert "\\toprule" in (tmp_path / "out" / "table-1.tex").read_text()

    render_item("combinations/figure-1", params, str(results), "paper", tmp_path / "out")
    assert (tmp_path / "out" / "figure-1.png").stat().st_size > 5000
    terms, gains = pairwise_gains(list(rows.values()))
    cells = {(r["term_a"], r["term_b"]): r for r in csv.DictReader(open(tmp_path / "out" / "figure-1.csv"))}
    assert len(cells) == 10  # 4 terms alone and 6 pairs
    i, j = terms.index("instance_smoothing"), terms.index("layer_negatives")
    assert cells["IS-CSE", "SSCL-SimCSE"]["run"] == "iscse+sscl"
    assert float(cells["IS-CSE", "SSCL-SimCSE"]["gain_vs_simcse"]) == pytest.approx(gains[i, j], abs=1e-4)


def test_the_combinations_item_before_its_runs(tmp_path):
    """Not yet run (or SimCSE not yet evaluated): the item still writes its files and says so; runs
    evaluated so far are shown, the others named."""
    from csebench.results.render import render_item

    params = load_params(PARAMS)
    render_item("combinations/figure-1", params, str(tmp_path / "empty"), "paper", tmp_path / "out")
    assert "Not yet run: nothing to compare" in (tmp_path / "out" / "figure-1.md").read_text()
    write_sts(tmp_path / "r", "combinations", "simcse", 42, [70.0] * 7)
    write_sts(tmp_path / "r", "combinations", "sscl", 42, [71.0] * 7)
    render_item("combinations/table-1", params, str(tmp_path / "r"), "paper", tmp_path / "out")
    md = (tmp_path / "out" / "table-1.md").read_text()
    assert "| **SSCL-SimCSE** | 1 | 71.00 |" in md and "`combinations/iscse`" in md and "`combinations/sscl`" not in md


@pytest.mark.slow(seconds=4)
def test_the_combinations_items_from_tiny_model_runs(tmp_path, shared_dir):
    """The demo-scale table and figure from tiny random-BERT runs of demo-combinations (4 steps each, STS
    capped at 200 pairs a task): four of its six runs trained and evaluated, drawn, the other two named."""
    from csebench import cli
    from csebench.results.combinations import combination_grid
    from csebench.results.render import render_item
    from runhelpers import write_corpus, write_mini_senteval

    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    training = {"max_steps": 4, "eval_steps": 4, "batch_size": 8, "learning_rate": 1.0e-4, "log_steps": 2}
    runs = load_params(PARAMS)["suites"]["demo-combinations"]["runs"]
    # 3 layers: SSCL's default stacks the two layers below the last (a 2-layer model has one)
    over = write_config(tmp_path / "over.yaml", {"backbones": {"tiny": {"random_config": {"num_hidden_layers": 3}}},
                                                 "suites": {"demo-combinations": {
        "training": training, "runs": [{**r, "backbone": "tiny"} for r in runs]}}})
    params, results = load_params(PARAMS, [over]), tmp_path / "results"
    for run in ("simcse", "gs-infonce", "sscl", "gs-infonce+sscl"):
        model, out = tmp_path / "runs" / run, results / "demo-combinations" / "runs" / run / "seed42"
        common = ["--config", str(over), "--suite", "demo-combinations", "--run", run, "--seed", "42", "--no-progress"]
        assert cli.main(["train", *common, "--corpus", str(tmp_path / "corpus.txt"), "--senteval", str(tmp_path / "se"),
                         "--out", str(model), "--cache-dir", str(tmp_path / "cache")]) == 0
        assert cli.main(["eval-sts", *common, "--model", str(model / "model"), "--senteval", str(shared_dir / "senteval"),
                         "--max-sts-pairs", "200", "--out", str(out / "sts.json"), "--pairs-out", str(out / "sts_pairs.npz")]) == 0
    rows = combination_grid(Params.of(params).suite("demo-combinations"), results, missing_ok=True)
    assert [r.run for r in rows] == ["simcse", "gs-infonce", "sscl", "gs-infonce+sscl"]
    assert rows[-1].vs_simcse.test.startswith("paired bootstrap") and rows[-1].best_single in ("gs-infonce", "sscl")
    for item in ("combinations/table-1", "combinations/figure-1"):
        render_item(item, params, str(results), "demo", tmp_path / "out", n_boot=200)
    md = (tmp_path / "out" / "table-1.md").read_text()
    for r in rows:
        assert f"| **{r.label}** | 1 | " in md and f" {r.mean[-1]:.2f} |" in md
    assert "Demo scale" in md and "Not yet run: `demo-combinations/iscse`, `demo-combinations/iscse+sscl`." in md
    assert (tmp_path / "out" / "figure-1.png").stat().st_size > 5000
    assert "| **GS-InfoNCE** | " in (tmp_path / "out" / "figure-1.md").read_text()


@pytest.mark.slow(seconds=1)
def test_a_composed_method_trains_with_every_term_on(tmp_path):
    """The trainer runs a composed method as any other: each term's loss part and logs in the curve,
    IS-CSE's loss switched on once its buffer filled, SSCL's layer fed."""
    from csebench import cli
    from runhelpers import ci_training, train_argv, write_corpus, write_mini_senteval

    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    over = ci_training(max_steps=4, eval_steps=4, batch_size=8, log_steps=1, eval_batch_size=64)
    over["methods"] = {"three": {"compose": ["gs_infonce", "iscse", "sscl"]}}
    over["backbones"] = {"tiny": {"random_config": {"num_hidden_layers": 3}}}  # SSCL's two stacked layers below the last
    over["suites"]["ci"]["runs"] = [{"name": "simcse", "backbone": "tiny", "method": "three",
                                     "objectives": {"instance_smoothing": {"buffer_size": 16, "neighbors": 4}}}]
    out = tmp_path / "run"
    assert cli.main(train_argv(tmp_path, out, write_config(tmp_path / "over.yaml", over))) == 0
    header, *rows = [line.split(",") for line in (out / "train_curve.csv").read_text().splitlines()]
    last = dict(zip(header, rows[-1]))
    assert float(last["loss_instance_smoothing"]) > 0 and last["instance_smoothing/active"] == "1.0"
    assert last["gaussian_negatives/num_gaussian"] == "24.0"  # 3 x batch 8
    assert float(last["loss"]) > float(last["loss_contrastive"])


def test_an_empty_compose_is_refused(tmp_path, capsys):
    """`compose: []` trained plain SimCSE under the composed method's name."""
    from runhelpers import PARAMS, write_config

    cfg = write_config(tmp_path / "over.yaml", {"methods": {"m": {"compose": []}},
                                                "suites": {"ci": {"runs": [{"name": "x", "backbone": "tiny", "method": "m"}]}}})
    assert_fails(capsys, ["show-config", "--params", str(PARAMS), "--config", str(cfg), "--suite", "ci", "--run", "x",
                          "--seed", "1"],
                 "methods.m.compose: the list is empty; name the methods it combines, or drop compose: and give the "
                 "method its own objectives")

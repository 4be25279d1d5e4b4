"""DCLR (objectives/debiased.py): the released loss (RUCAIBox/DCLR @e2c3430, simcse/models.py 676-710)
against a direct loop over the rows and entries, its false negatives (zeroed: e^0 stays in the sum),
its noise steps (train.py --pgd, without instance weights); the InfoNCE reading kept selectable against
its own direct computation; the encoder without an attention mask (attention: unmasked, models.py 561-567
and 758-764) against the released forward; and tiny-model training runs with a frozen complementary model."""

from __future__ import annotations

import math

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.compose import Objective
from csebench.objectives.base import StepContext
from csebench.objectives.debiased import DebiasedNegatives, DebiasedSettings
from runhelpers import FakeBank

INFONCE = {"loss": "infonce", "false_negatives": "dropped", "noise_steps": 1, "noise_weighted": True}


def cos(a, b):
    return torch.nn.functional.cosine_similarity(a, b, dim=0)


def move_noise(z1, z2, teacher_cos, noise, tau, phi, step, steps, weighted, zeroed):
    """``steps`` times g <- g + step grad/||grad||, grad of the mean over rows of -log softmax(row)[i] with the
    row [s_i1 .. s_iB, sim(h_i, g_1)/tau ..] (the weights a_ij applied only when ``weighted``), all but g constant."""
    g = noise.clone()
    for _ in range(steps if len(g) else 0):
        g = g.detach().requires_grad_(True)
        total = 0.0
        for i in range(len(z1)):
            row = []
            for j in range(len(z2)):
                s = cos(z1[i], z2[j]) / tau
                if weighted and j != i and teacher_cos[i, j] > phi:
                    if not zeroed:
                        continue
                    s = s * 0
                row.append(s)
            row += [cos(z1[i], g[k]) / tau for k in range(len(g))]
            den = sum(torch.exp(s) for s in row)
            total = total - torch.log(torch.exp(cos(z1[i], z2[i]) / tau) / den)
        (grad,) = torch.autograd.grad(total / len(z1), g)
        moved = g.detach().clone()
        for k in range(len(g)):
            moved[k] = g[k].detach() + step * grad[k] / math.sqrt(float((grad[k] ** 2).sum()))
        g = moved
    return g.detach()


def naive_released(z1, z2, teacher_cos, noise, tau, phi, step, steps, zeroed=True, weighted=False):
    """models.py 704-710 as a loop: row i's logits [a_ij s_ij for j in batch] ++ [sim(h_i, n_k)/tau], a_ij = 0 when
    j != i and cos_C(i, j) > phi (zeroed: logit 0; dropped: out of the row); p = softmax of the row; each of the
    B x (B + k) entries adds -(y log p + (1 - y) log(1 - p)), y = 1 at j = i only; their mean."""
    n = move_noise(z1, z2, teacher_cos, noise, tau, phi, step, steps, weighted, zeroed)
    total, entries = 0.0, 0
    for i in range(len(z1)):
        logits, labels = [], []
        for j in range(len(z2)):
            s = float(cos(z1[i], z2[j])) / tau
            if j != i and teacher_cos[i, j] > phi:
                s = 0.0 if zeroed else None
            logits.append(s)
            labels.append(1.0 if j == i else 0.0)
        for k in range(len(n)):
            logits.append(float(cos(z1[i], n[k])) / tau)
            labels.append(0.0)
        den = sum(math.exp(s) for s in logits if s is not None)
        for s, y in zip(logits, labels):
            p = 0.0 if s is None else math.exp(s) / den
            total += -(y * math.log(p) if y else math.log(1 - p))
            entries += 1
    return total / entries


def term_and_context(n, d, settings, teacher, step=3):
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, **settings), d, 2, bank=FakeBank(teacher))
    obj = Objective({}, d, 2)
    obj.terms["debiased_negatives"] = term
    torch.manual_seed(1)
    z1, z2 = torch.randn(n, d, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64)
    ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=step, total_steps=9, indices=torch.arange(n),
                      all_indices=torch.arange(n))
    return term, obj, ctx


@pytest.mark.parametrize("phi,ratio,steps,fn", [(0.9, 1.0, 4, "zeroed"), (0.3, 2.5, 4, "zeroed"), (0.3, 0.8, 1, "dropped"),
                                               (1.0, 1.0, 0, "zeroed"), (0.5, 0.0, 4, "zeroed")])
def test_released_loss_matches_a_direct_loop(phi, ratio, steps, fn):
    n, d = 4, 6
    torch.manual_seed(0)
    teacher = torch.rand(n, n, dtype=torch.float64)
    term, obj, ctx = term_and_context(n, d, {"threshold": phi, "noise_ratio": ratio, "noise_steps": steps,
                                             "false_negatives": fn, "step": 0.3}, teacher)
    assert term.settings.loss == "released"
    noise = term.noise(ctx).double()
    assert noise.shape == (int(ratio * n), d)
    loss, _ = obj(ctx)
    want = naive_released(ctx.z1, ctx.z2, teacher, noise, 0.05, phi, 0.3, steps, zeroed=fn == "zeroed")
    assert float(loss) == pytest.approx(want, rel=1e-5)  # the term's cosines are float32


def test_a_zeroed_false_negative_keeps_e0_in_the_sum():
    """Two sentences, each the other's false negative: zeroed, row i is softmax([s_ii, 0]) (e^0 = 1 beside the
    positive) whatever s_ij is; dropped, the row is [s_ii] alone (p = 1: loss 0); no false negative, [s_ii, s_ij]."""
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    z2 = torch.tensor([[0.8, 0.6], [0.6, 0.8]], dtype=torch.float64)
    ctx = StepContext(z1=z1, z2=z2, temperature=1.0, step=0, total_steps=1, indices=torch.arange(2),
                      all_indices=torch.arange(2))

    def loss(**settings):
        term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, noise_ratio=0, **settings), 2, 2,
                                 bank=FakeBank(torch.ones(2, 2, dtype=torch.float64)))
        return float(term.replaces_contrastive(torch.tensor(0.0), ctx))

    p = math.exp(0.8) / (math.exp(0.8) + math.exp(0))  # the zeroed column: logit 0
    assert loss() == pytest.approx((-math.log(p) - math.log(1 - (1 - p))) / 2, rel=1e-6)
    assert loss(false_negatives="dropped") == pytest.approx(0.0, abs=1e-7)
    q = math.exp(0.8) / (math.exp(0.8) + math.exp(0.6))  # phi = 1: nothing is a false negative
    assert loss(threshold=1.0) == pytest.approx(-math.log(q), rel=1e-6)


def test_noise_takes_its_steps_without_the_instance_weights():
    """The released noise: noise_steps moves (4 differ from 1), the cross-entropy of each step without a_ij
    (the teacher's cosines change no noise vector), with them under noise_weighted."""
    n, d = 4, 5
    torch.manual_seed(2)
    low, high = torch.zeros(n, n, dtype=torch.float64), torch.ones(n, n, dtype=torch.float64)
    moved = {}
    for steps in (1, 4):
        for name, teacher in (("low", low), ("high", high)):
            for weighted in (False, True):
                term, _, ctx = term_and_context(n, d, {"noise_steps": steps, "step": 0.5, "noise_weighted": weighted},
                                                teacher)
                inbatch = torch.nn.functional.normalize(ctx.z1, dim=-1) @ torch.nn.functional.normalize(ctx.z2, dim=-1).T / 0.05
                mask = term.false_negatives(ctx)
                g = term.noise(ctx)
                out = term.noise_logits(ctx, inbatch, mask)
                moved[steps, name, weighted] = out
                want = move_noise(ctx.z1, ctx.z2, teacher, g.double(), 0.05, 0.9, 0.5, steps, weighted, True)
                ref = torch.stack([torch.stack([cos(ctx.z1[i], want[k]) / 0.05 for k in range(len(want))])
                                   for i in range(n)])
                assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(moved[1, "low", False], moved[4, "low", False])
    assert torch.equal(moved[4, "low", False], moved[4, "high", False])
    assert not torch.allclose(moved[4, "low", True], moved[4, "high", True])


def naive(z1, z2, teacher_cos, noise, tau, phi, step):
    """The InfoNCE reading: l_i = -log e^{s_ii/tau} / (e^{s_ii/tau} + sum_{j != i, cosC_ij <= phi} e^{s_ij/tau}
    + sum_k e^{sim(h_i, n_k)/tau}), n_k = g_k + step grad_k/||grad_k||, grad of this loss (at g) with respect to g_k."""
    def loss(noise_vecs):
        total = 0.0
        for i in range(len(z1)):
            pos = torch.nn.functional.cosine_similarity(z1[i], z2[i], dim=0) / tau
            den = torch.exp(pos)
            for j in range(len(z2)):
                if j != i and teacher_cos[i, j] <= phi:
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
def test_infonce_reading_matches_the_direct_computation(phi, step):
    torch.manual_seed(0)
    n, d = 5, 6
    z1, z2 = torch.randn(n, d, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64)
    teacher = torch.rand(n, n, dtype=torch.float64)
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, threshold=phi, step=step, noise_ratio=0.8, **INFONCE),
                             d, 2, bank=FakeBank(teacher))
    obj = Objective({}, d, 2)
    obj.terms["debiased_negatives"] = term
    ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=3, total_steps=9, indices=torch.arange(n), all_indices=torch.arange(n))
    noise = term.noise(ctx).double()
    assert noise.shape == (4, d)
    loss, _ = obj(ctx)
    assert float(loss) == pytest.approx(naive(z1, z2, teacher, noise, 0.05, phi, step), rel=1e-6)


def test_the_positive_is_never_dropped():
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, threshold=-1.0, **INFONCE), 4, 2, bank=FakeBank(torch.ones(3, 3)))
    ctx = StepContext(z1=torch.randn(3, 4), z2=torch.randn(3, 4), temperature=0.05, step=0, total_steps=1,
                      indices=torch.arange(3), all_indices=torch.arange(3))
    w = term.negative_weights(ctx)
    assert torch.equal(torch.isinf(w), ~torch.eye(3, dtype=torch.bool))


def test_a_row_whose_negatives_are_all_masked_trains_as_the_released_code_computes_it():
    """A degenerate complementary model (every cosine above phi: every in-batch negative a false negative): the
    released code computes such a row as any other (models.py 705-710: the zeroed logits' e^0 stay in the softmax
    beside the positive and the noise). With the two views of a sentence close (cos ~0.99, s_ii ~20) the positive
    takes the softmax: p rounds to 1 in float32. The loss and its gradient stay finite (log(1 - p) was taken at the
    positive too, where the where's 0 x inf made the gradient NaN) and equal the float64 gradient of the direct
    formula; the loss is about 0 (the row has nothing left to push away)."""
    from csebench.objectives.debiased import released_loss

    n, d = 8, 32
    torch.manual_seed(0)
    base = torch.randn(n, d)
    for settings in ({}, {"noise_ratio": 0.0}, {"false_negatives": "dropped", "noise_ratio": 0.0}):
        z1 = (base + 0.01 * torch.randn(n, d)).requires_grad_(True)
        z2 = (base + 0.01 * torch.randn(n, d)).requires_grad_(True)
        ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=0, total_steps=9, indices=torch.arange(n),
                          all_indices=torch.arange(n))
        term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, **settings), d, 2,
                                 bank=FakeBank(torch.ones(n, n)))
        assert int(term.false_negatives(ctx).sum()) == n * (n - 1)  # every negative masked
        obj = Objective({}, d, 2)
        obj.terms["debiased_negatives"] = term
        loss, _ = obj(ctx)
        loss.backward()
        assert 0 <= float(loss.detach()) < 1e-5 and torch.isfinite(z1.grad).all() and torch.isfinite(z2.grad).all(), settings
    # d loss / d logits against the direct formula in float64, where p does not round to 1
    logits = torch.zeros(n, 2 * n)
    logits[torch.arange(n), torch.arange(n)] = 19.8
    logits[:, n:] = torch.randn(n, n) * 0.5  # noise logits near 0
    x32 = logits.clone().requires_grad_(True)
    released_loss(x32, torch.arange(n)).backward()
    x64 = logits.double().requires_grad_(True)
    p = torch.softmax(x64, -1)
    y = torch.zeros_like(p)
    y[torch.arange(n), torch.arange(n)] = 1
    (-(y * torch.log(p) + (1 - y) * torch.log(1 - p))).mean().backward()
    assert torch.isfinite(x32.grad).all() and torch.allclose(x32.grad.double(), x64.grad, atol=1e-9)


def test_a_degenerate_complementary_model_trains_to_finite_weights(tmp_path, shared_dir):
    """End to end: a complementary model whose cached embeddings are one vector (every cosine 1 > phi), no dropout
    (the two views equal: s_ii = 1/tau), three steps of the tiny BERT: the weights stay finite (before, the
    positive's log(1 - p) turned them NaN at the first step)."""
    import numpy as np

    from csebench.study.params import BackboneConfig, load_params
    from csebench.study.resolve import resolve_run
    from csebench.model.encoder import build_encoder
    from csebench.training.teachers import build_teacher_cache, save_teacher_cache
    from csebench.training.trainer import Trainer
    from runhelpers import PARAMS, write_corpus, write_mini_senteval

    write_corpus(tmp_path / "corpus.txt", 48)
    write_mini_senteval(tmp_path / "se", 12)
    build_encoder(BackboneConfig(model="random", pooler="cls"), seed=7).save(tmp_path / "teacher")
    meta = build_teacher_cache(tmp_path / "teacher", tmp_path / "corpus.txt", tmp_path / "t.npy", max_seq_length=32)
    one = np.zeros((meta["rows"], meta["dim"]), np.float32)
    one[:, 0] = 1
    save_teacher_cache(tmp_path / "t.npy", one, meta)
    params = load_params(PARAMS)
    params["suites"]["ci"]["training"] = {"batch_size": 8, "max_steps": 3, "eval_steps": 3, "dropout": 0.0}
    params["methods"]["simcse"]["objectives"] = {"debiased_negatives": {"teachers": {"run": "simcse", "seeds": [2]}}}
    tr = Trainer(resolve_run(params, "ci", "simcse", 1), tmp_path / "corpus.txt", tmp_path / "se", tmp_path / "out",
                 show_progress=False, teacher_cache=[str(tmp_path / "t.npy")])
    assert tr.run()["steps"] == 3
    assert all(bool(p.isfinite().all()) for p in tr.encoder.parameters())


def test_noise_is_per_step_and_seeded():
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, seed=5), 4, 2, bank=FakeBank(torch.zeros(2, 2)))
    ctx = lambda step: StepContext(z1=torch.randn(2, 4), z2=torch.randn(2, 4), temperature=0.05, step=step, total_steps=3,
                                   indices=torch.arange(2), all_indices=torch.arange(2))
    assert torch.equal(term.noise(ctx(1)), term.noise(ctx(1))) and not torch.equal(term.noise(ctx(1)), term.noise(ctx(2)))


@pytest.mark.parametrize("bad", [{"threshold": 2}, {"noise_std": 0}, {}, {"teachers": {"run": "simcse"}, "step": -1},
                                 {"teachers": {"run": "simcse"}, "loss": "bce"},
                                 {"teachers": {"run": "simcse"}, "false_negatives": "kept"},
                                 {"teachers": {"run": "simcse"}, "noise_steps": -1},
                                 {"teachers": {"run": "simcse"}, "attention": "none"},
                                 {"teachers": {"run": "simcse"}, "teacher_representation": "head"}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"debiased_negatives": bad}, "methods.dclr")
    assert "\n" not in str(e.value)


def test_tiny_model_trains_with_a_complementary_model(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"debiased_negatives": {"teachers": {"run": "simcse", "seeds": [2]}}}, steps=2, teacher=True)
    assert summary["steps"] == 2 and math.isfinite(tr.train_rows[-1][1])


def test_infonce_with_zeroed_false_negatives_keeps_e0_and_passes_no_gradient_through_them():
    """loss: infonce, false_negatives: zeroed (no noise): l_i = -s_ii + log(e^{s_ii} + sum_{j kept} e^{s_ij} + the
    number of zeroed j), and a column zeroed in every row passes no gradient to its sentence's view-2 vector."""
    n, d = 4, 5
    torch.manual_seed(3)
    z1 = torch.randn(n, d, dtype=torch.float64)
    z2 = torch.randn(n, d, dtype=torch.float64, requires_grad=True)
    teacher = torch.zeros(n, n, dtype=torch.float64)
    teacher[:, 3] = 1.0  # sentence 3 is every other anchor's false negative
    term = DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, loss="infonce", false_negatives="zeroed",
                                              noise_ratio=0), d, 2, bank=FakeBank(teacher))
    obj = Objective({}, d, 2)
    obj.terms["debiased_negatives"] = term
    ctx = StepContext(z1=z1, z2=z2, temperature=0.5, step=0, total_steps=1, indices=torch.arange(n), all_indices=torch.arange(n))
    loss, _ = obj(ctx)
    want = 0.0
    for i in range(n):
        s = [float(cos(z1[i], z2[j].detach())) / 0.5 for j in range(n)]
        den = sum(math.exp(0.0 if (j == 3 and i != 3) else s[j]) for j in range(n))
        want += -s[i] + math.log(den)
    assert float(loss.detach()) == pytest.approx(want / n, rel=1e-5)
    (grad,) = torch.autograd.grad(loss, z2)
    only_positive = -(torch.nn.functional.normalize(z1[3], dim=0) @ torch.autograd.functional.jacobian(
        lambda v: torch.nn.functional.normalize(v, dim=0), z2[3].detach())) / 0.5
    p33 = math.exp(float(cos(z1[3], z2[3].detach())) / 0.5) / sum(math.exp(float(cos(z1[3], z2[j].detach())) / 0.5)
                                                                   for j in range(n))
    assert torch.allclose(grad[3], only_positive * (1 - p33) / n, atol=1e-5)  # row 3's positive alone


SENTENCES = ["a man is playing a guitar on the street tonight .", "a dog runs .", "two women are talking", "hi"]


def _tiny_encoder():
    from csebench.model.encoder import build_encoder
    from csebench.study.params import BackboneConfig

    return build_encoder(BackboneConfig(model="random", pooler="cls"), seed=7, dropout=0.0)  # no dropout: deterministic


def _released_last_hidden(backbone, ids):
    """The released forward (models.py 554-567): the embeddings, then the encoder's layers with nothing in the
    attention mask's place, so every position attends to every other, padding included."""
    return backbone.encoder(backbone.embeddings(input_ids=ids), None)[0]


def _masked_cls(backbone, tokenizer, sentence):
    """[CLS] of one sentence alone, unpadded: what a masked forward gives every row of a padded batch."""
    ids = tokenizer([sentence], return_tensors="pt")["input_ids"]
    return backbone(input_ids=ids).last_hidden_state[0, 0]


def test_unmasked_attention_is_the_released_forward_in_training_and_dev_selection():
    """attention: unmasked makes the encoder attend to the padding in training and in the dev scores that select
    the checkpoint, as the released forward does; masked (the default), and every other encoding, attend to the
    real tokens only; a row without padding is the same either way."""
    enc = _tiny_encoder()
    tok, bb = enc.tokenizer, enc.backbone
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert int(mask.sum(1).min()) < ids.shape[1]  # padding in the batch
    longest = int(mask.sum(1).argmax())
    with torch.no_grad():
        DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}, attention="unmasked"), 32, 2,
                          bank=FakeBank(torch.zeros(4, 4)), encoder=enc)
        assert enc.unmasked_attention
        enc.train()
        unmasked = enc(ids, mask, hidden_only=True)[-1]
        released = _released_last_hidden(bb, ids)
        assert torch.allclose(unmasked, released, atol=1e-5)
        masked_alone = torch.stack([_masked_cls(bb, tok, x) for x in SENTENCES])
        assert not torch.allclose(unmasked[:, 0], masked_alone, atol=1e-3)
        assert torch.allclose(unmasked[longest, 0], masked_alone[longest], atol=1e-5)  # no padding, no difference
        # the dev selection: one padded batch of the dev sentences, attended as in training
        enc.eval()
        order = sorted(range(len(SENTENCES)), key=lambda i: len(tok(SENTENCES[i])["input_ids"]))
        dev = tok([SENTENCES[i] for i in order], padding=True, return_tensors="pt")["input_ids"]
        want = torch.empty(len(SENTENCES), unmasked.shape[-1])
        want[torch.tensor(order)] = _released_last_hidden(bb, dev)[:, 0]
        selected = enc.encode(SENTENCES, batch_size=len(SENTENCES), precision="fp32", selection=True)
        assert torch.allclose(selected, want, atol=1e-5)
        # any other encoding (the test evaluation, the saved model's) attends to the real tokens only
        assert torch.allclose(enc.encode(SENTENCES, batch_size=len(SENTENCES), precision="fp32"), masked_alone, atol=1e-5)
        # the default: masked in training too
        DebiasedNegatives(DebiasedSettings(teachers={"run": "simcse"}), 32, 2, bank=FakeBank(torch.zeros(4, 4)), encoder=enc)
        assert not enc.unmasked_attention
        enc.train()
        assert torch.allclose(enc(ids, mask, hidden_only=True)[-1][:, 0], masked_alone, atol=1e-5)


def test_unmasked_attention_is_refused_with_compile():
    from csebench.study.params import TrainingConfig

    with pytest.raises(ConfigError, match="not with training.compile") as e:
        validate_objectives({"debiased_negatives": {"teachers": {"run": "simcse"}, "attention": "unmasked"}},
                            "methods.dclr", TrainingConfig(compile=True))
    assert "\n" not in str(e.value)
    validate_objectives({"debiased_negatives": {"teachers": {"run": "simcse"}}}, "methods.dclr", TrainingConfig(compile=True))


def test_unmasked_attention_trains_and_changes_the_loss_on_a_padded_batch(tmp_path, shared_dir, monkeypatch):
    """The trainer's loss on its first batch, which has padding, without dropout (so the trainer's packed masked
    forward and the library's padded one compute the same, the floor of what float rounding alone changes): the
    unmasked run's differs from the masked one's well above that floor; the unmasked run trains to the end."""
    from runhelpers import tiny_trainer
    from csebench.training.trainer import data_order

    term = {"teachers": {"run": "simcse", "seeds": [2]}}
    losses = {}
    for name, attention, packed in (("masked", "masked", "1"), ("masked-padded", "masked", "0"),
                                    ("unmasked", "unmasked", "1")):
        monkeypatch.setenv("CSEBENCH_PACKED", packed)
        tr = tiny_trainer(tmp_path / name, {"debiased_negatives": {**term, "attention": attention}},
                          steps=2, teacher=True, dropout=0.0)
        assert tr.encoder.unmasked_attention == (attention == "unmasked")
        batch = data_order(len(tr.tokens), tr.t.batch_size, tr.cfg.seed, 0)[0]
        lengths = tr.tokens.lengths()[batch]
        assert lengths.min() < lengths.max()  # the first batch is padded
        tr.encoder.train()
        with torch.no_grad():
            loss, _ = tr.objective(tr.encode_views(batch))
        losses[name] = float(loss)
    summary = tr.run()  # the unmasked run
    assert summary["steps"] == 2 and all(math.isfinite(r[1]) for r in tr.train_rows)
    assert math.isfinite(losses["masked"]) and losses["masked"] > 0
    floor = abs(losses["masked-padded"] - losses["masked"])
    assert floor <= 1e-6 * losses["masked"], losses
    assert abs(losses["unmasked"] - losses["masked"]) > max(100 * floor, 1e-5 * losses["masked"]), losses


def test_the_complementary_models_representation_picks_its_cache():
    """teacher_representation: training (the released code's pooler_output: a SimCSE run's MLP head) reads
    teacher/training.npy, which rule teacher_cache_training builds; eval, the default, teacher/embeddings.npy and
    leaves run keys as they were; the plan counts the cache it adds."""
    from csebench.results.plan import suite_plan
    from csebench.study.jobs import teacher_cache, teacher_jobs, teacher_representation
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.study.typed import Params
    from runhelpers import PARAMS

    params = load_params(PARAMS)
    before = resolve_run(params, "paper-dclr", "bert-base-dclr", 42).key()
    assert teacher_representation(params, "paper-dclr", "bert-base-dclr", 42) in ("eval", "training")
    for rep in ("eval", "training"):
        params["methods"]["dclr"]["objectives"]["debiased_negatives"]["teacher_representation"] = rep
        assert teacher_representation(params, "paper-dclr", "bert-base-dclr", 42) == rep
        (teacher, seed), = teacher_jobs(params, "paper-dclr", "bert-base-dclr", 42)
        assert teacher_cache(params, "paper-dclr", teacher, seed, rep).endswith(
            "/teacher/embeddings.npy" if rep == "eval" else "/teacher/training.npy")
        key = resolve_run(params, "paper-dclr", "bert-base-dclr", 42).key()
        assert (key == before) == (rep == resolve_run(load_params(PARAMS), "paper-dclr", "bert-base-dclr", 42)
                                   .objectives["debiased_negatives"].get("teacher_representation", "eval"))
        plan = suite_plan(Params.of(params).suite("paper-dclr"))
        assert sum(k[0] == "teacher" and k[-1] == "training" for k in plan.units) == (2 if rep == "training" else 0)

"""ESimCSE (objectives/momentum.py): word repetition against a direct loop and the two dup_len bounds
(the paper's and the released code's, caskcsg/sentemb ESimCSE/train.py, re-implemented from reading it),
the momentum update and the queue against direct computations, the loss against InfoNCE with the queue
as explicit extra columns, and a tiny-model training run."""

from __future__ import annotations

import math
import random

import pytest
import torch

from csebench.core.errors import ConfigError
from csebench.objectives import validate_objectives
from csebench.objectives.base import StepContext
from csebench.objectives.momentum import MomentumNegatives, MomentumSettings, draw_dup_len, repeat_tokens


def test_repetition_matches_a_direct_loop():
    torch.manual_seed(0)
    ids = torch.tensor([[101, 5, 6, 7, 8, 102, 0], [101, 9, 10, 102, 0, 0, 0], [101, 11, 12, 13, 14, 15, 102]])
    mask = (ids != 0).long()
    keys = torch.rand(ids.shape)
    dup_len = torch.tensor([2, 1, 3])
    out, out_mask = repeat_tokens(ids, mask, dup_len, keys, 0)
    for r in range(3):
        n = int(mask[r].sum())
        inner = sorted(range(1, n - 1), key=lambda c: float(keys[r, c]))[: int(dup_len[r])]
        want = []
        for c in range(n):
            want += [int(ids[r, c])] * (2 if c in inner else 1)
        m = int(out_mask[r].sum())
        assert out[r, :m].tolist() == want and set(out[r, m:].tolist()) <= {0}


def test_paper_bound_draws_every_length_in_its_range():
    n = torch.full((4000,), 20)
    d = draw_dup_len(n, torch.rand(4000, dtype=torch.float64), 0.32, "paper")
    assert set(d.tolist()) == set(range(0, int(0.32 * 20) + 1))  # [0, max(2, int(0.32 N))]
    short = draw_dup_len(torch.full((2000,), 1), torch.rand(2000, dtype=torch.float64), 0.32, "paper")
    assert set(short.tolist()) == {0, 1}  # max(2, .) = 2, capped at the sentence's one token


def test_released_bound_is_the_released_randrange():
    """train.py (dup_type bpe): add_len = random.randrange(min(10, int(dup_rate * input_len))) with input_len
    counting [CLS] and [SEP]; nothing repeated when int(dup_rate * input_len) is 0."""
    for n_tokens in (1, 3, 8, 20, 60):
        length = n_tokens + 2
        top = int(0.32 * length)
        want = set(range(min(10, top))) if top > 0 else {0}
        got = set(draw_dup_len(torch.full((3000,), n_tokens), torch.rand(3000, dtype=torch.float64), 0.32, "released").tolist())
        assert got == want, n_tokens
        if top > 0:
            random.seed(0)
            assert {random.randrange(min(10, top)) for _ in range(3000)} == want


def _term(tiny_encoder, **settings):
    enc = tiny_encoder()
    return MomentumNegatives(MomentumSettings(**settings), enc.hidden_size, enc.num_layers, encoder=enc), enc


def test_momentum_update_is_the_moving_average(tiny_encoder):
    term, enc = _term(tiny_encoder, momentum=0.9)
    before = [p.detach().clone() for p in term.momentum_parameters()]
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(1.0)
    term.momentum_update()
    for old, new, online in zip(before, term.momentum_parameters(), term.online_parameters()):
        assert torch.allclose(new, 0.9 * old + 0.1 * online)
    assert not any(p.requires_grad for p in term.momentum_parameters())


def test_queue_is_fifo_and_the_loss_has_its_rows_as_negatives(tiny_encoder, tokenizer):
    from csebench.objectives.compose import Objective

    term, enc = _term(tiny_encoder, queue_size=5)
    term.train()
    b = tokenizer(["a cat .", "two dogs run .", "hello"], padding=True, return_tensors="pt")
    ids, mask = b["input_ids"], b["attention_mask"]
    torch.manual_seed(0)
    tau = 0.05
    z1, z2 = torch.randn(3, 32), torch.randn(3, 32)
    ctx = StepContext(z1=z1, z2=z2, temperature=tau, step=0, total_steps=5, indices=torch.arange(3),
                      all_indices=torch.arange(3), inputs={"view1": (ids, mask)})
    assert term.extra_negatives(ctx) is None  # empty queue: plain InfoNCE; then the batch joins the queue
    first = term.entries().clone()
    assert first.shape == (3, 32)
    cols = term.extra_negatives(ctx)
    queue = term.entries()
    assert queue.shape == (5, 32) and torch.equal(queue[:2], first[1:])  # oldest dropped first
    # the columns of the second step are the 3 rows queued by the first
    for i in range(3):
        for q in range(3):
            want = float(torch.dot(z1[i], first[q]) / (z1[i].norm() * first[q].norm())) / tau
            assert float(cols[i, q]) == pytest.approx(want, rel=1e-5)
    # the whole loss: InfoNCE with the queue as explicit extra columns
    obj = Objective({}, 32, 2)
    obj.terms["momentum_negatives"] = term
    loss, _ = obj(ctx)
    total = 0.0
    for i in range(3):
        row = [float(torch.nn.functional.cosine_similarity(z1[i], z2[j], dim=0)) / tau for j in range(3)]
        row += [float(torch.nn.functional.cosine_similarity(z1[i], queue[q], dim=0)) / tau for q in range(5)]
        total += -row[i] + math.log(sum(math.exp(v) for v in row))
    assert float(loss) == pytest.approx(total / 3, rel=1e-5)


def test_momentum_rows_are_the_momentum_encoders_dropout_free_embeddings(tiny_encoder, tokenizer):
    term, enc = _term(tiny_encoder, momentum_head="ema")
    b = tokenizer(["a cat .", "two dogs run ."], padding=True, return_tensors="pt")
    enc.eval()
    want = enc(b["input_ids"], b["attention_mask"], train_head=True)  # a fresh copy equals the encoder
    assert torch.allclose(term.momentum_encode(b["input_ids"], b["attention_mask"]), want, atol=1e-6)


def test_released_init_starts_from_other_weights(tiny_encoder):
    term, enc = _term(tiny_encoder, momentum_init="random")
    assert not all(torch.equal(a, b) for a, b in zip(term.momentum_backbone.parameters(), enc.backbone.parameters()))


@pytest.mark.parametrize("bad", [{"dup_rate": 2}, {"momentum": 1.5}, {"dup_bound": "x"}, {"queue_size": -1}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"momentum_negatives": bad}, "methods.esimcse")
    assert "\n" not in str(e.value)


def test_tiny_model_trains_and_resumes_its_queue(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"momentum_negatives": {"queue_size": 12}}, steps=3)
    term = tr.objective.terms["momentum_negatives"]
    assert summary["steps"] == 3 and term._filled == 12
    state = tr.objective.state_dict()
    assert "terms.momentum_negatives.queue" in state and int(state["terms.momentum_negatives.filled"]) == 12


def test_repetition_counts_against_the_position_table(inputs, capsys):
    """Repetition lengthens view 2 by up to max(2, int(0.32 N)) tokens: at max_seq_length 128 on the tiny BERT's 128
    positions a long row stopped training with a tensor size error. Refused before tokenizing, with the longest length
    that fits, which trains on rows that fill it."""
    from runhelpers import assert_train_fails, run_cli, train_argv, write_config

    with open(inputs / "corpus.txt", "a", encoding="utf-8") as fh:
        fh.write(" ".join(["word"] * 300) + "\n")
    esimcse = {"methods": {"simcse": {"objectives": {"momentum_negatives": {"queue_size": 8}}}}}
    assert_train_fails(inputs, capsys, {**esimcse, "suites": {"ci": {"training": {"max_seq_length": 128}}}},
                       "csebench train: error: training.max_seq_length (suite ci, run simcse) is 128, and "
                       "objectives.momentum_negatives adds up to 40 tokens (word repetition): 168 positions, more than the "
                       "backbone takes (128, its max_position_embeddings); set it to at most 98")
    cfg = write_config(inputs / "fits.yaml", {**esimcse, "suites": {"ci": {"training": {
        "max_seq_length": 98, "max_steps": 2, "eval_steps": 2, "batch_size": 8}}}})
    rc, err = run_cli(capsys, train_argv(inputs, inputs / "fits", cfg))
    assert rc == 0, err


def test_an_empty_queue_is_refused():
    """queue_size 0 was accepted: no momentum negative, and the momentum encoder encoded every batch for nothing."""
    with pytest.raises(ConfigError) as e:
        validate_objectives({"momentum_negatives": {"queue_size": 0}}, "run ci/simcse")
    assert str(e.value) == ("run ci/simcse: objectives.momentum_negatives.queue_size must be at least 1, got 0: an empty "
                            "queue adds no momentum negative, while the momentum encoder still encodes every batch")

"""csebench.model.packed: a BERT-family forward on real tokens only equals the library's at every real position,
with the same gradients, for every model type csebench.model.model_types packs; the encoder uses it in training
only, and not for architectures it does not know."""

import pytest
import torch
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

from csebench.model import packed
from csebench.model.model_types import MODEL_TYPES
from runhelpers import TINY_ARCHITECTURES, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64, vocab_size=100,
             max_position_embeddings=40)
PACKED = [mt for mt, entry in MODEL_TYPES.items() if entry.packed is not None]
NOT_PACKED = [mt for mt in TINY_ARCHITECTURES if mt not in PACKED]


def _batch(pad_id: int, seed: int = 0):
    """Five sentences of 3 to 17 tokens, padded to the longest (one is full length)."""
    g = torch.Generator().manual_seed(seed)
    lengths = [17, 3, 9, 12, 5]
    ids = torch.full((len(lengths), max(lengths)), pad_id)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(5, 100, (n,), generator=g)
        mask[i, :n] = 1
    return ids, mask


def _models(dropout: float = 0.1):
    torch.manual_seed(0)
    drop = dict(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return [(BertModel(BertConfig(**SMALL, **drop)), 0),
            (RobertaModel(RobertaConfig(**SMALL, **drop, pad_token_id=1)), 1)]


@pytest.mark.parametrize("index", [0, 1], ids=["bert", "roberta"])
def test_hidden_states_equal_the_librarys_at_real_positions(index):
    model, pad = _models()[index]
    model.eval()
    ids, mask = _batch(pad)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        got = packed.forward_hidden(model, ids, mask, all_layers=True)
        last = packed.forward_hidden(model, ids, mask, all_layers=False)
    real = mask.bool()
    assert len(got) == len(ref) == SMALL["num_hidden_layers"] + 1 and len(last) == 1
    for r, g in zip(ref, got):
        assert g.shape == r.shape
        torch.testing.assert_close(g[real], r[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(last[0], got[-1])
    assert not got[-1][~real].any()  # padded positions carry nothing a pooler could read by mistake
    assert (ref[-1][~real] != 0).any()  # (the library computes them)


def _gradients_both_ways(build, ids, mask) -> tuple[dict, dict]:
    """The gradients of one loss through the library's padded forward and through the packed one, each on a fresh
    model from ``build()`` in training mode (its dropout off): a mean pooling and an inner layer's first token."""
    grads = []
    for use_packed in (False, True):
        model = build()
        model.train()
        if use_packed:
            hs = packed.forward_hidden(model, ids, mask, all_layers=True)
        else:
            hs = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        m = mask.unsqueeze(-1).float()
        ((hs[-1] * m).sum(1) / m.sum(1)).pow(2).sum().add(hs[2][:, 0].sum()).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    return grads[0], grads[1]


@pytest.mark.parametrize("index", [0, 1], ids=["bert", "roberta"])
def test_gradients_equal_the_librarys(index):
    """Without dropout the two forwards are the same function of the weights: same loss, same gradients."""
    ids, mask = _batch(_models(0.0)[index][1], seed=1)
    padded, ours = _gradients_both_ways(lambda: _models(0.0)[index][0], ids, mask)
    assert set(ours) <= set(padded) and len(ours) > 30
    for name in ours:
        torch.testing.assert_close(ours[name], padded[name], atol=1e-5, rtol=1e-4, msg=name)


def test_every_packed_model_type_has_a_tiny_model_to_prove_it():
    assert set(PACKED) <= set(TINY_ARCHITECTURES), "add a tiny config of it to runhelpers.TINY_ARCHITECTURES"
    assert {"bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert"} <= set(PACKED)


@pytest.mark.parametrize("model_type", PACKED)
def test_every_packed_model_type_equals_the_librarys_forward(model_type):
    """In eval mode and in training mode with dropout off, every hidden state (embeddings included: ELECTRA's after
    its projection of factorised embeddings) at every real position, in fp32."""
    model = tiny_model(model_type)
    pad = model.config.pad_token_id
    ids, mask = _batch(pad)
    real = mask.bool()
    assert packed.why_not(model) is None
    for mode in ("eval", "train"):
        model.train(mode == "train")
        if mode == "train":
            for m in model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0
        with torch.no_grad():
            ref = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            got = packed.forward_hidden(model, ids, mask, all_layers=True)
        assert len(got) == len(ref) == model.config.num_hidden_layers + 1
        for r, g in zip(ref, got):
            assert g.shape == r.shape
            torch.testing.assert_close(g[real], r[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model_type", PACKED)
def test_every_packed_model_type_has_the_librarys_gradients(model_type):
    ids, mask = _batch(tiny_model(model_type).config.pad_token_id, seed=1)
    padded, ours = _gradients_both_ways(
        lambda: tiny_model(model_type, **dict.fromkeys(MODEL_TYPES[model_type].dropout, 0.0)), ids, mask)
    assert set(ours) == set(padded) and len(ours) > 30
    for name in ours:
        torch.testing.assert_close(ours[name], padded[name], atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("model_type", NOT_PACKED)
def test_a_model_type_not_packed_says_why(model_type):
    why = packed.why_not(tiny_model(model_type))
    assert why and why.startswith(f"model_type {model_type}: ") and MODEL_TYPES[model_type].not_packed in why


def test_dropout_acts_in_training_and_not_in_eval():
    model, pad = _models(0.3)[0]
    ids, mask = _batch(pad)
    model.train()
    a, b = (packed.forward_hidden(model, ids, mask, all_layers=False)[0] for _ in range(2))
    assert not torch.equal(a, b)
    model.eval()
    a, b = (packed.forward_hidden(model, ids, mask, all_layers=False)[0] for _ in range(2))
    assert torch.equal(a, b)


def test_supports_only_the_architectures_it_knows():
    bert, roberta = (m for m, _ in _models())
    assert packed.supports(bert) and packed.supports(roberta)
    assert not packed.supports(BertModel(BertConfig(**SMALL, position_embedding_type="relative_key")))
    assert "decoder" in packed.why_not(BertModel(BertConfig(**SMALL, is_decoder=True)))
    assert "not in csebench.model.model_types" in packed.why_not(torch.nn.Linear(2, 2))


def test_the_encoder_packs_in_training_only_and_not_when_compiled_or_switched_off(tokenizer, monkeypatch):
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import SentenceEncoder, build_backbone

    enc = SentenceEncoder(build_backbone(BackboneConfig(model="random"), tokenizer, seed=0), tokenizer, "cls")
    calls = []
    real = packed.forward_hidden
    monkeypatch.setattr(packed, "forward_hidden", lambda *a, **k: calls.append(1) or real(*a, **k))
    ids, mask = _batch(tokenizer.pad_token_id)
    enc.train()
    enc.forward_hidden(ids, mask)
    assert calls == [1]
    enc.eval()
    enc.forward_hidden(ids, mask)  # evaluation: the library's forward, its numbers exactly
    enc.train()
    enc.compiled = True
    enc.forward_hidden(ids, mask)
    enc.compiled = False
    monkeypatch.setenv("CSEBENCH_PACKED", "0")
    enc.forward_hidden(ids, mask)
    assert calls == [1]


def test_bf16_autocast_runs_close_to_fp32():
    model, pad = _models()[0]
    model.eval()
    ids, mask = _batch(pad)
    with torch.no_grad():
        ref = packed.forward_hidden(model, ids, mask, all_layers=False)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = packed.forward_hidden(model, ids, mask, all_layers=False)[0]
    real = mask.bool()
    assert (low.float()[real] - ref[real]).abs().max() < 0.1

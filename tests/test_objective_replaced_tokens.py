"""DiffCSE (objectives/replaced_tokens.py): the conditional replaced-token-detection loss against a direct
loop over rows and positions on tiny random models, the collator's masking, the gradient paths, the settings'
errors, a tiny-model training run, and the method's place in params.yaml, the plan and the rehearsal."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.study.typed import Params
from csebench.objectives import generators, validate_objectives
from csebench.objectives.replaced_tokens import conditioned_logits, generate, mask_tokens, rtd_loss

pytestmark = pytest.mark.usefixtures("one_thread")
CLS, MASK, VOCAB = 101, 103, 200


def tiny_models(seed: int = 0):
    from transformers import BertConfig, BertForMaskedLM, BertModel

    torch.manual_seed(seed)
    kw = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
              max_position_embeddings=32)
    disc = BertModel(BertConfig(**kw), add_pooling_layer=False).eval()
    gen = BertForMaskedLM(BertConfig(**kw)).eval()
    head = torch.nn.Linear(16, 2)
    return disc, gen, head


def naive_row_sum(disc, gen, head, ids, masked, z, length):
    """Sum over the real tokens of one row of -log p(label): the generator and the discriminator run on the row
    alone (no padding), the condition written into the embedding output by hand, every position in a loop."""
    with torch.no_grad():
        pred = gen(input_ids=masked[None, :length]).logits[0].argmax(-1).tolist()
    pred[0] = CLS
    emb = disc.embeddings(input_ids=torch.tensor([pred])).clone()
    emb[0, 0] = z
    hidden = disc.encoder(emb).last_hidden_state[0]
    total = 0.0
    for t in range(length):
        label = int(pred[t] != int(ids[t]))
        total = total - F.log_softmax(head(hidden[t]), dim=-1)[label]
    return total


def test_loss_matches_a_direct_loop_without_padding():
    disc, gen, head = tiny_models()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(110, VOCAB, (3, 7), generator=g)
    ids[:, 0], ids[:, -1] = CLS, 102
    mask = torch.ones_like(ids)
    special = (ids == CLS) | (ids == 102)
    masked = mask_tokens(ids, special, 0.5, MASK, VOCAB, generator=g)
    z = torch.randn(3, 16, generator=g)
    inputs, labels = generate(gen, masked, mask, ids, CLS)
    got = rtd_loss(conditioned_logits(disc, head, inputs, mask, z), labels)
    want = sum(naive_row_sum(disc, gen, head, ids[i], masked[i], z[i], 7) for i in range(3)) / (3 * 7)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    assert labels[:, 0].eq(0).all() and 0 < int(labels.sum()) < labels.numel()  # some replaced, [CLS] never


def test_padding_counts_with_label_zero_in_the_mean():
    """models.py line 272 averages over every position of the padded batch: the padding's entries (label 0, the
    discriminator's prediction there) are in the mean, the real tokens' equal the unpadded loop."""
    disc, gen, head = tiny_models(2)
    g = torch.Generator().manual_seed(3)
    lengths = [7, 4, 5]
    ids = torch.zeros(3, 7, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(110, VOCAB, (n,), generator=g)
        ids[i, 0], ids[i, n - 1] = CLS, 102
        mask[i, :n] = 1
    special = (ids == CLS) | (ids == 102) | (mask == 0)
    masked = mask_tokens(ids, special, 0.4, MASK, VOCAB, generator=g)
    assert torch.equal(masked[mask == 0], ids[mask == 0])  # padding is never masked
    z = torch.randn(3, 16, generator=g)
    inputs, labels = generate(gen, masked, mask, ids, CLS)
    assert inputs[mask == 0].eq(0).all() and labels[mask == 0].eq(0).all()
    logits = conditioned_logits(disc, head, inputs, mask, z)
    got = rtd_loss(logits, labels)
    pad_part = sum(float(-F.log_softmax(logits[i, t].detach(), -1)[0]) for i in range(3) for t in range(7) if not mask[i, t])
    real = sum(float(naive_row_sum(disc, gen, head, ids[i], masked[i], z[i], n).detach()) for i, n in enumerate(lengths))
    assert float(got.detach()) * 21 == pytest.approx(real + pad_part, rel=1e-4)


def test_masking_follows_the_collator_recipe():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(110, VOCAB, (400, 50), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    out = mask_tokens(ids, special, 0.3, MASK, VOCAB, generator=g)
    assert torch.equal(out[special], ids[special])
    changed = out != ids
    to_mask = out == MASK
    # chosen ~30%: 80% of them [MASK], 10% a random id (a few land on the same id), 10% kept
    free = ~special
    assert to_mask[free].float().mean().item() == pytest.approx(0.3 * 0.8, abs=0.01)
    assert (changed & ~to_mask)[free].float().mean().item() == pytest.approx(0.3 * 0.1, abs=0.005)


def test_the_loss_trains_the_encoder_through_the_condition_and_not_the_generator():
    disc, gen, head = tiny_models(4)
    disc.train()
    ids = torch.randint(110, VOCAB, (2, 6))
    ids[:, 0] = CLS
    mask = torch.ones_like(ids)
    z = torch.randn(2, 16, requires_grad=True)
    inputs, labels = generate(gen, mask_tokens(ids, ids == CLS, 0.5, MASK, VOCAB), mask, ids, CLS)
    rtd_loss(conditioned_logits(disc, head, inputs, mask, z), labels).backward()
    assert z.grad is not None and z.grad.abs().sum() > 0
    assert head.weight.grad is not None and disc.embeddings.word_embeddings.weight.grad is not None
    assert all(p.grad is None for p in gen.parameters())
    # the hook is gone: a plain forward reads the token's own embedding at position 0 again
    assert not disc.embeddings._forward_hooks


@pytest.mark.parametrize("bad", [{"weight": -1}, {"mask_ratio": 0}, {"mask_ratio": 1.5}, {"generator": ""}, {"lambda": 1}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError) as e:
        validate_objectives({"replaced_token_detection": bad}, "methods.diffcse")
    assert "\n" not in str(e.value)


def test_released_defaults():
    got = validate_objectives({"replaced_token_detection": {}}, "m")["replaced_token_detection"]
    assert got == {"generator": "distilbert-base-uncased", "weight": 0.005, "mask_ratio": 0.3}


def test_a_generator_of_another_vocabulary_is_refused(tiny_encoder):
    from transformers import BertConfig, BertForMaskedLM

    from csebench.objectives.replaced_tokens import ReplacedTokenDetection, ReplacedTokenSettings

    enc = tiny_encoder()
    small = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                                       intermediate_size=8))
    with pytest.raises(ConfigError, match="share the backbone's vocabulary"):
        ReplacedTokenDetection(ReplacedTokenSettings(), enc.hidden_size, 2, encoder=enc, generator=small)


def test_tiny_model_trains_with_the_batchnorm_head(tmp_path, shared_dir):
    from runhelpers import train_tiny

    summary, tr = train_tiny(tmp_path, {"replaced_token_detection": {"generator": "random"}}, steps=2,
                             projection_head="batchnorm")
    assert summary["steps"] == 2
    assert "loss_replaced_token_detection" in tr.log_keys
    assert tr.encoder.head.__class__.__name__ == "BatchNormHead"
    term = tr.objective.terms["replaced_token_detection"]
    # the discriminator trained (a copy of the backbone, now apart from it); the generator is not in the state
    assert not torch.equal(term.discriminator.embeddings.word_embeddings.weight,
                           tr.encoder.backbone.embeddings.word_embeddings.weight)
    assert not any(k.startswith("terms.replaced_token_detection.generator") for k in tr.objective.state_dict())


def test_the_discriminator_is_clipped_with_the_encoder(tmp_path, shared_dir, monkeypatch):
    """The released HF Trainer clips the norm of the whole model's gradients (discriminator and head included)."""
    from runhelpers import train_tiny

    seen = []
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda params, *a, **k: seen.append(list(params)) or real(seen[-1], *a, **k))
    _, tr = train_tiny(tmp_path, {"replaced_token_detection": {"generator": "random"}}, steps=1)
    term = tr.objective.terms["replaced_token_detection"]
    ids = {id(p) for p in seen[0]}
    assert all(id(p) in ids for p in term.discriminator.parameters()) and id(term.head.weight) in ids
    assert all(id(p) in ids for p in tr.encoder.parameters())
    assert not any(id(p) in ids for p in term.generator.parameters())


def test_params_method_suites_and_plan(project_root):
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.results.plan import _nonemb, generator_forward_flops, suite_plan, term_training_flops

    params = load_params(project_root / "params.yaml")
    assert {"bert-base-diffcse", "roberta-base-diffcse"} <= {r["name"] for r in params["suites"]["zoo"]["runs"]}
    assert not any("diffcse" in str(v) for k, v in params["suites"].items() if k.startswith("demo"))
    bert = resolve_run(params, "paper-diffcse", "bert-base-diffcse", 42)
    roberta = resolve_run(params, "zoo", "roberta-base-diffcse", 42)
    assert generators(bert.objectives) == ["distilbert-base-uncased"]
    assert generators(roberta.objectives) == ["distilroberta-base"]
    t = bert.training
    assert (t.learning_rate, t.batch_size, t.epochs, t.projection_head, t.temperature) == (7e-6, 64, 2, "batchnorm", 0.05)
    assert bert.key() == resolve_run(params, "zoo", "bert-base-diffcse", 42).key()  # trained once
    # the plan: the generator's forward (its layers and MLM head) and the discriminator's training are counted
    n = _nonemb("bert-base-uncased")
    assert n == 85_645_056  # the non-embedding weights csebench.results.plan counts (the pooler included)
    gen = generator_forward_flops("distilbert-base-uncased")
    assert gen == 2 * (42_527_232 + 768 * 768 + 768 + 2 * 768 + 768 * 30522 + 30522)
    assert term_training_flops(bert.objectives, n) == 6 * n + gen
    plan = suite_plan(Params.of(params).suite("paper-diffcse"))
    assert not plan.unknown_models
    (key_flops,) = [v for k, v in plan.units.items() if k[0] == "train" and k[1] == bert.key()]
    simcse = suite_plan(Params.of(params).suite("paper"))  # SimCSE BERT-base: batch 64, 1 epoch
    sim_key = resolve_run(params, "paper", "bert-base-simcse", 42).key()
    (sim,) = [v for k, v in simcse.units.items() if k[0] == "train" and k[1] == sim_key]
    # twice the epochs, and per token 6n (encoder) + 6n (discriminator) + the generator's forward against 6n
    assert key_flops[1] == pytest.approx(sim[1] * 2 * (12 * n + gen) / (6 * n), rel=1e-6)


def test_fetch_notes_of_a_run_name_its_generator(project_root):
    from csebench.workflow.steps import hub_generators
    from csebench.study.params import load_params

    params = load_params(project_root / "params.yaml")
    assert hub_generators(Params.of(params).suite("zoo"), "roberta-base-diffcse", 42) == ["distilroberta-base"]
    assert hub_generators(Params.of(params).suite("zoo"), "roberta-base-sncse", 42) == []


def test_model_card_says_the_batchnorm_head_is_not_the_saved_pooler():
    from csebench.sharing.modelcard import _what

    def card(head):
        cfg = {"backbone": {"model": "bert-base-uncased", "pooler": "cls", "label": "BERT-base"}, "backbone_name": "bert-base",
               "method_label": "DiffCSE", "seed": 42, "suite": "zoo", "name": "bert-base-diffcse", "train": True,
               "training": {"batch_size": 64, "projection_head": head}, "objectives": {"replaced_token_detection": {}}}
        r = {"config": cfg, "train": {"steps": 2, "corpus_sentences": 10}, "meta": {"pooler": "cls"},
             "hf": {"hidden_size": 768, "num_hidden_layers": 12}}
        return "\n".join(_what(r))

    assert "DiffCSE's BatchNorm MLP" in card("batchnorm") and "is the MLP head (dense + tanh)" not in card("batchnorm")
    assert "**DiffCSE**: conditional replaced-token detection" in card("batchnorm")  # the card cites its paper
    assert "is the MLP head (dense + tanh)" in card("linear")


def factorised(model_type: str, embedding_size: int, vocab: int = VOCAB):
    """A tiny ALBERT or ELECTRA whose embeddings (``embedding_size``) are projected to the hidden size 16."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    cfg = AutoConfig.for_model(model_type, vocab_size=vocab, embedding_size=embedding_size, hidden_size=16,
                               num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                               max_position_embeddings=32)
    return AutoModel.from_config(cfg).eval()


@pytest.mark.parametrize("model_type,size", [("albert", 8), ("electra", 8), ("electra", 16), ("bert", 16)])
def test_the_condition_replaces_position_0_of_the_first_layers_input(model_type, size):
    """On factorised embeddings (ALBERT; ELECTRA-small: embedding_size < hidden_size) the embedding takes position
    0 of their projection to the hidden size, which the first layer reads, as the released code's cls_input takes
    position 0 of BERT's embedding output: the logits follow the condition, and position 0's own token (its
    embedding) reaches nothing; the other positions' tokens still do. (Before: a size error on the projection's
    input.)"""
    disc = factorised(model_type, size) if model_type != "bert" else tiny_models()[0]
    head = torch.nn.Linear(16, 2)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(110, VOCAB, (2, 6), generator=g)
    mask = torch.ones_like(ids)
    z = torch.randn(2, 16, generator=g, requires_grad=True)
    logits = conditioned_logits(disc, head, ids, mask, z)
    other_first = ids.clone()
    other_first[:, 0] = 105
    assert torch.allclose(conditioned_logits(disc, head, other_first, mask, z), logits, atol=1e-6)
    other_second = ids.clone()
    other_second[:, 1] = 105
    assert not torch.allclose(conditioned_logits(disc, head, other_second, mask, z), logits, atol=1e-4)
    assert not torch.allclose(conditioned_logits(disc, head, ids, mask, z + 1), logits, atol=1e-4)
    rtd_loss(logits, torch.zeros(2, 6, dtype=torch.long)).backward()
    assert z.grad is not None and z.grad.abs().sum() > 0


def test_a_backbone_without_embeddings_to_condition_is_refused_in_one_line(tiny_encoder):
    from csebench.objectives.replaced_tokens import ReplacedTokenDetection, ReplacedTokenSettings

    enc = tiny_encoder()
    enc.backbone.embeddings = None  # as a model whose first layer's input csebench does not know
    gen = tiny_models()[1]
    gen.config.vocab_size = len(enc.tokenizer)
    with pytest.raises(ConfigError, match="LAYER_INPUT_MODULE") as e:
        ReplacedTokenDetection(ReplacedTokenSettings(), enc.hidden_size, 2, encoder=enc, generator=gen)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("model_type", ["albert", "electra"])
def test_diffcse_trains_on_a_tiny_factorised_backbone_from_the_command_line(model_type, inputs, tokenizer, capsys):
    """`csebench train --backbone DIR --method diffcse` on a tiny ALBERT / ELECTRA-small folder (embedding_size 16,
    hidden 32, the MiniLM tokenizer): two steps train, the RTD loss among the logged terms."""
    import json

    from runhelpers import run_cli

    from transformers import AutoConfig, AutoModel

    folder = inputs / model_type
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    out = inputs / "run"
    rc, err = run_cli(capsys, ["train", "--backbone", str(folder), "--method", "diffcse", "--corpus",
                               str(inputs / "corpus.txt"), "--senteval", str(inputs / "se"), "--out", str(out),
                               "--cache-dir", str(inputs / "cache"), "--no-progress", "--no-sts",
                               "--set", "objectives.replaced_token_detection.generator=random",
                               "--set", "training.batch_size=8", "--set", "training.max_steps=2",
                               "--set", "training.eval_steps=2", "--set", "training.dev_max_pairs=8"])
    assert rc == 0, err
    summary = json.loads((out / "train.json").read_text())
    assert summary["steps"] == 2
    head, first = (line.split(",") for line in (out / "train_curve.csv").read_text().splitlines()[:2])
    assert 0 < float(first[head.index("loss_replaced_token_detection")]) < 1

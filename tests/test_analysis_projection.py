"""SSCL Table 5 option: training.projection_dim = a trained linear head kept at evaluation; the paper's
linear head by default, the released code's dense + tanh with training.projection_head: linear_tanh."""

import copy

import pytest
import torch


def test_projection_head_sets_output_dim_and_survives_save_load(tmp_path, tokenizer):
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_backbone, load_encoder, SentenceEncoder

    for pooler in ("cls", "avg"):
        torch.manual_seed(0)
        enc = SentenceEncoder(build_backbone(BackboneConfig(model="random", pooler=pooler), tokenizer), tokenizer, pooler,
                              projection_dim=8)
        assert enc.out_dim == 8 and enc.head.dense.weight.shape == (8, 32)
        sents = ["a man plays a guitar .", "the cat sleeps"]
        emb = enc.encode(sents)
        assert emb.shape == (2, 8)
        enc.save(tmp_path / pooler)
        back = load_encoder(tmp_path / pooler)
        assert back.out_dim == 8
        torch.testing.assert_close(back.encode(sents), emb, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,squash", [("linear", False), ("linear_tanh", True)])
def test_projection_head_is_linear_by_default_and_tanh_when_asked(tmp_path, tokenizer, kind, squash):
    """The head applied at evaluation is dense(pooled) (paper) or tanh(dense(pooled)) (released code),
    and a saved model reloads with the same head."""
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import SentenceEncoder, build_backbone, load_encoder, pool

    torch.manual_seed(0)
    kwargs = {} if kind == "linear" else {"projection_head": kind}
    enc = SentenceEncoder(build_backbone(BackboneConfig(model="random", pooler="avg"), tokenizer), tokenizer, "avg",
                          projection_dim=8, **kwargs)
    with torch.no_grad():
        enc.head.dense.weight.mul_(200.0)  # outputs well outside [-1, 1] unless squashed
    batch = tokenizer(["a man plays a guitar ."], return_tensors="pt")
    enc.eval()
    with torch.no_grad():
        raw = enc.head.dense(pool("avg", enc.forward_hidden(batch["input_ids"], batch["attention_mask"]),
                                  batch["attention_mask"]))
        got = enc(batch["input_ids"], batch["attention_mask"], train_head=True)
    torch.testing.assert_close(got, torch.tanh(raw) if squash else raw)
    assert (got.abs().max() <= 1.0) == squash
    enc.save(tmp_path / kind)
    back = load_encoder(tmp_path / kind)
    assert back.projection_head == kind and back.head.tanh == squash
    torch.testing.assert_close(back.encode(["a man plays a guitar ."]), enc.encode(["a man plays a guitar ."]),
                               rtol=1e-5, atol=1e-5)


def test_models_saved_before_the_head_choice_reload_with_tanh(tmp_path, tokenizer):
    import json

    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import ENCODER_META, SentenceEncoder, build_backbone, load_encoder

    enc = SentenceEncoder(build_backbone(BackboneConfig(model="random", pooler="avg"), tokenizer), tokenizer, "avg",
                          projection_dim=8, projection_head="linear_tanh")
    enc.save(tmp_path / "old")
    meta = json.loads((tmp_path / "old" / ENCODER_META).read_text())
    del meta["projection_head"]  # what the earlier code wrote (its head was dense + tanh)
    (tmp_path / "old" / ENCODER_META).write_text(json.dumps(meta))
    assert load_encoder(tmp_path / "old").head.tanh


def test_without_projection_nothing_changes(tokenizer):
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_backbone, SentenceEncoder

    enc = SentenceEncoder(build_backbone(BackboneConfig(model="random", pooler="avg"), tokenizer), tokenizer, "avg")
    assert enc.head is None and enc.out_dim == 32 and enc.encode(["hello there"]).shape == (1, 32)


def test_projection_dim_is_a_validated_training_option():
    from csebench.study.params import TrainingConfig
    from csebench.core.errors import ConfigError

    TrainingConfig(projection_dim=256).validate("training")
    assert TrainingConfig().projection_head == "linear"  # the paper's head is the default
    TrainingConfig(projection_dim=256, projection_head="linear_tanh").validate("training")
    with pytest.raises(ConfigError, match="projection_dim"):
        TrainingConfig(projection_dim=0).validate("training")
    with pytest.raises(ConfigError, match=r"training.projection_head: unknown 'tanh' \(valid: linear, linear_tanh, batchnorm\)"):
        TrainingConfig(projection_head="tanh").validate("training")


def test_projection_head_enters_the_fingerprint_only_with_a_projection():
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from runhelpers import PARAMS

    params = load_params(PARAMS)
    base = resolve_run(params, "ci", "simcse", 1).fingerprint()
    p = copy.deepcopy(params)
    p["suites"]["ci"]["training"]["projection_head"] = "linear_tanh"
    assert resolve_run(p, "ci", "simcse", 1).fingerprint() == base  # no projection: unchanged
    p["suites"]["ci"]["training"]["projection_dim"] = 8
    with_linear = copy.deepcopy(p)
    with_linear["suites"]["ci"]["training"]["projection_head"] = "linear"
    assert resolve_run(p, "ci", "simcse", 1).fingerprint() != resolve_run(with_linear, "ci", "simcse", 1).fingerprint()

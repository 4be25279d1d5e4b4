"""SSCL Table 5 option: training.projection_dim = a trained linear head (+tanh) kept at evaluation."""

import pytest
import torch


def test_projection_head_sets_output_dim_and_survives_save_load(tmp_path, tokenizer):
    from csebench.config import BackboneConfig
    from csebench.encoder import build_backbone, load_encoder, SentenceEncoder

    for pooler in ("cls", "avg"):
        torch.manual_seed(0)
        enc = SentenceEncoder(build_backbone(BackboneConfig(model="random", pooler=pooler), tokenizer), tokenizer, pooler,
                              projection_dim=8)
        assert enc.out_dim == 8 and enc.head.dense.weight.shape == (8, 32)
        sents = ["a man plays a guitar .", "the cat sleeps"]
        emb = enc.encode(sents)
        assert emb.shape == (2, 8)
        assert emb.abs().max() <= 1.0  # tanh output
        enc.save(tmp_path / pooler)
        back = load_encoder(tmp_path / pooler)
        assert back.out_dim == 8
        torch.testing.assert_close(back.encode(sents), emb, rtol=1e-5, atol=1e-6)


def test_without_projection_nothing_changes(tokenizer):
    from csebench.config import BackboneConfig
    from csebench.encoder import build_backbone, SentenceEncoder

    enc = SentenceEncoder(build_backbone(BackboneConfig(model="random", pooler="avg"), tokenizer), tokenizer, "avg")
    assert enc.head is None and enc.out_dim == 32 and enc.encode(["hello there"]).shape == (1, 32)


def test_projection_dim_is_a_validated_training_option():
    from csebench.config import TrainingConfig
    from csebench.errors import ConfigError

    TrainingConfig(projection_dim=256).validate("training")
    with pytest.raises(ConfigError, match="projection_dim"):
        TrainingConfig(projection_dim=0).validate("training")

"""training.num_layers (SSCL Table 1 "SimCSE (10)"): the backbone keeps its first N layers."""

from __future__ import annotations

import json

import pytest
import torch

from csebench.study.params import BackboneConfig, TrainingConfig, load_params
from csebench.core.schema import from_dict
from csebench.study.resolve import resolve_run
from csebench.model.encoder import build_encoder, load_encoder
from csebench.core.errors import ConfigError

from runhelpers import PARAMS, ci_training, train_argv, write_config, write_corpus, write_mini_senteval


def test_truncation_keeps_the_first_layers():
    full = build_encoder(BackboneConfig(model="random"), seed=3)
    cut = build_encoder(BackboneConfig(model="random"), seed=3, num_layers=1)
    assert full.num_layers == 2 and cut.num_layers == 1 and len(cut.backbone.encoder.layer) == 1
    a, b = full.backbone.encoder.layer[0].state_dict(), cut.backbone.encoder.layer[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert build_encoder(BackboneConfig(model="random"), num_layers=2).num_layers == 2  # all layers: unchanged


@pytest.mark.parametrize("n", [0, 3])
def test_out_of_range_is_a_clear_error(n):
    with pytest.raises(ConfigError, match=r"num_layers must be"):
        if n < 1:
            from_dict(TrainingConfig, {"num_layers": n}, "training")
        else:
            build_encoder(BackboneConfig(model="random"), num_layers=n)


def test_unset_option_leaves_the_fingerprint_alone():
    params = load_params(PARAMS)
    cfg = resolve_run(params, "ci", "simcse", 1)
    before = cfg.fingerprint()
    cfg.training.num_layers = 1
    assert cfg.fingerprint() != before
    cfg.training.num_layers = None
    assert cfg.fingerprint() == before


def test_training_saves_a_model_that_reloads_truncated(tmp_path, shared_dir):
    from csebench.cli import main

    write_corpus(tmp_path / "corpus.txt", n=32)
    write_mini_senteval(tmp_path / "se", pairs=16)
    cfg = write_config(tmp_path / "over.yaml", ci_training(num_layers=1, max_steps=2, eval_steps=2, batch_size=8,
                                                            checkpoint_steps=2, log_steps=1))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    assert json.loads((out / "model" / "config.json").read_text())["num_hidden_layers"] == 1
    enc = load_encoder(out / "model")
    assert enc.num_layers == 1 and len(enc.backbone.encoder.layer) == 1
    assert enc.encode(["a sentence", "another one"]).shape == (2, 32)


def test_dev_max_pairs_scores_a_seeded_subset_and_is_recorded(tmp_path):
    """training.dev_max_pairs (CPU demo only): STS-B dev during training on about N pairs."""
    from csebench.cli import main
    from csebench.training.trainer import DevEvaluator

    write_corpus(tmp_path / "corpus.txt", n=32)
    write_mini_senteval(tmp_path / "se", pairs=40)
    assert len(DevEvaluator(tmp_path / "se", 8, max_pairs=12).pairs.scores) <= 14 < len(DevEvaluator(tmp_path / "se", 8).pairs.scores)
    cfg = write_config(tmp_path / "over.yaml", ci_training(dev_max_pairs=12, max_steps=2, eval_steps=2, batch_size=8,
                                                            checkpoint_steps=2, log_steps=1))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    summary = json.loads((out / "train.json").read_text())
    assert summary["stsb_dev_protocol"] == "capped" and summary["stsb_dev_pairs"] <= 14
    with pytest.raises(ConfigError, match=r"dev_max_pairs must be"):
        from_dict(TrainingConfig, {"dev_max_pairs": 1}, "training")
    params = load_params(PARAMS)
    cfg = resolve_run(params, "ci", "simcse", 1)
    before = cfg.fingerprint()
    cfg.training.dev_max_pairs = None  # unset: the fingerprint of every existing run stays
    assert cfg.fingerprint() == before

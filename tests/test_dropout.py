"""The dropout a method gets on each architecture (csebench.model.model_types): training.dropout reaches every
dropout of the encoder under the model type's own config names, SimCSE's p = 0.1 when it is not set (ModernBERT,
nomic-bert and ALBERT turn dropout off in their configs), a model type csebench does not know is refused in one line
where the setting must reach it, a run whose positives come from dropout checks at its first step that its two views
differ, and train.json records the dropout in effect."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from csebench.model.model_types import DEFAULT_DROPOUT, MODEL_TYPES, DropoutSetting, ModelType, dropout_config
from runhelpers import (PARAMS, TINY_ARCHITECTURES, assert_fails, run_cli, tiny_model, tiny_tokenizers,
                        write_tiny_model)

pytestmark = pytest.mark.usefixtures("one_thread")


def _dropouts(model) -> list[float]:
    """Every dropout probability of the model: its nn.Dropout modules' p and the floats its attention modules hand to
    the attention function (ModernBERT's, nomic-bert's ``attention_dropout``)."""
    out = []
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            out.append(module.p)
        out += [v for k, v in vars(module).items() if "dropout" in k and isinstance(v, float)]
    return out


def test_every_known_model_type_has_a_tiny_model():
    assert set(MODEL_TYPES) <= set(TINY_ARCHITECTURES), "add a tiny config of it to runhelpers.TINY_ARCHITECTURES"


@pytest.mark.parametrize("model_type", list(MODEL_TYPES))
def test_the_names_reach_every_dropout_of_the_encoder(model_type):
    for p in (0.37, 0.0):
        model = tiny_model(model_type, **dropout_config(model_type, p))
        found = _dropouts(model)
        assert found and set(found) == {p}, (model_type, p, found)
    assert any(p == 0.37 for p in _dropouts(tiny_model(model_type, **dropout_config(model_type, 0.37)))
               if p)  # not only floats: modules too


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny model folders (their configs as transformers' defaults leave dropout: ModernBERT's 0, DistilBERT's 0.1),
    a folder of a model type csebench does not know (ERNIE), and a corpus and mini SentEval to train on."""
    from runhelpers import write_corpus, write_mini_senteval

    tmp = tmp_path_factory.mktemp("dropout")
    write_corpus(tmp / "corpus.txt", 32)
    write_mini_senteval(tmp / "se", pairs=8)
    tokenizers = tiny_tokenizers(tmp / "corpus.txt")
    out = {mt: write_tiny_model(tmp / mt, mt, tokenizers) for mt in ("modernbert", "distilbert")}
    from transformers import AutoConfig, AutoModel

    out["ernie"] = tmp / "ernie"
    AutoModel.from_config(AutoConfig.for_model(
        "ernie", vocab_size=len(tokenizers["wordpiece"]), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)).save_pretrained(out["ernie"])
    tokenizers["wordpiece"].save_pretrained(out["ernie"])
    return tmp, out


def _backbone(folder, dropout):
    from csebench.model.encoder import build_backbone, load_tokenizer
    from csebench.study.params import BackboneConfig

    cfg = BackboneConfig(model=str(folder), pooler="cls")
    return build_backbone(cfg, load_tokenizer(cfg), dropout=dropout)


def test_unset_dropout_is_simcses_p_where_the_config_turns_it_off(folders):
    _, f = folders
    assert set(_dropouts(_backbone(f["modernbert"], None))) == {0.0}  # an evaluation: the config as saved
    trained = _backbone(f["modernbert"], DropoutSetting(None, needed=True))
    assert set(_dropouts(trained)) == {DEFAULT_DROPOUT}
    assert (trained.config.embedding_dropout, trained.config.attention_dropout, trained.config.mlp_dropout) == (0.1,) * 3
    assert set(_dropouts(_backbone(f["distilbert"], DropoutSetting(0.0)))) == {0.0}  # its own names: dropout off


def test_a_model_type_csebench_does_not_know_is_refused_where_dropout_must_reach_it(folders):
    from csebench.core.errors import ConfigError

    _, f = folders
    for setting, needle in ((DropoutSetting(None, needed=True), "the run's positives come from dropout"),
                            (DropoutSetting(0.2, needed=False), "training.dropout 0.2 cannot be applied")):
        with pytest.raises(ConfigError) as err:
            _backbone(f["ernie"], setting)
        assert needle in str(err.value) and "model_type 'ernie'" in str(err.value) and "\n" not in str(err.value)
    # positives of the method's own and no setting: the model's own dropout, as saved
    assert set(_dropouts(_backbone(f["ernie"], DropoutSetting(None, needed=False)))) == {0.1}


def _train(tmp, capsys, folder, method, *settings, out="run"):
    argv = ["train", "--params", str(PARAMS), "--backbone", str(folder), "--method", method, "--corpus",
            str(tmp / "corpus.txt"), "--senteval", str(tmp / "se"), "--out", str(tmp / out), "--cache-dir",
            str(tmp / "cache"), "--no-progress", "--no-sts", "--seed", "3",
            *[a for s in ("training.max_steps=2", "training.batch_size=8", "training.max_seq_length=16", *settings)
              for a in ("--set", s)]]
    return argv if capsys is None else run_cli(capsys, argv)


@pytest.mark.parametrize("model_type", ["modernbert", "distilbert"])
def test_the_dropout_set_is_the_dropout_trained_with(folders, capsys, model_type):
    """The dropout check: the same seed with training.dropout 0.1 and 0.0 gives different losses (ModernBERT's config
    has 0, DistilBERT names its own), and train.json records the dropout in effect."""
    tmp, f = folders
    losses = {}
    for p in ("0.1", "0.0"):
        rc, err = _train(tmp, capsys, f[model_type], "simcse", f"training.dropout={p}", out=f"{model_type}-{p}")
        assert rc == 0, err
        run = tmp / f"{model_type}-{p}"
        with open(run / "train_curve.csv", encoding="utf-8") as fh:
            losses[p] = float(next(csv.DictReader(fh))["loss"])
        d = json.loads((run / "train.json").read_text())["dropout"]
        assert d["setting"] == float(p) and d["p"] == float(p) and d["model_type"] == model_type
        assert set(d["config"]) == set(MODEL_TYPES[model_type].dropout) and set(d["config"].values()) == {float(p)}
        assert set(d["modules"]) == ({"0.1"} if p == "0.1" else {"0"}) and sum(d["modules"].values()) > 3
        packed_forward = json.loads((run / "train.json").read_text())["packed_forward"]
        assert packed_forward == ({"used": True} if model_type == "distilbert" else
                                  {"used": False, "why_not": f"model_type modernbert: {MODEL_TYPES['modernbert'].not_packed}"})
    assert abs(losses["0.1"] - losses["0.0"]) > 0.01, losses


def test_views_that_do_not_differ_stop_the_first_step(folders, capsys, monkeypatch):
    """A model type whose map misses its dropout (here ModernBERT's, made to name a head's only): the first step finds
    the two views the same and stops in one line, leaving no run folder; a method whose positives are its own
    (PromptBERT's second template) and dropout 0 set on purpose train."""
    tmp, f = folders
    monkeypatch.setitem(MODEL_TYPES, "modernbert", ModelType(("classifier_dropout",)))
    line = assert_fails(capsys, _train(tmp, None, f["modernbert"], "simcse", out="same"),
                        "the two views of the first batch are the same", "model_type modernbert",
                        "classifier_dropout=0.1", "name the dropout settings this model reads", outputs=[tmp / "same"])
    assert "method simcse takes its positives from dropout" in line
    for method, settings in (("promptbert", ()), ("simcse", ("training.dropout=0",))):
        rc, err = _train(tmp, capsys, f["modernbert"], method, *settings, out=f"own-{method}")
        assert rc == 0, err


def test_unknown_model_type_refused_by_train_in_one_line(folders, capsys):
    tmp, f = folders
    assert_fails(capsys, _train(tmp, None, f["ernie"], "simcse", out="ernie-run"), "model_type 'ernie'", "training.dropout",
                 outputs=[tmp / "ernie-run"])


def test_terms_that_make_their_own_positives_say_so():
    """The views check is for methods whose positives come from dropout alone: PromptBERT's and SNCSE's templates,
    ESimCSE's repetition and the released SSCL-BERT's self positives make their own."""
    from csebench.objectives import own_positives
    from csebench.study.typed import Params

    params = Params.load(PARAMS)
    own = {}
    for method in ("simcse", "promptbert", "sncse", "esimcse", "esimcse_released", "sscl_bert", "sscl_bert_released",
                   "diffcse", "iscse"):
        p, suite, run = params.with_run_of_your_own("bert-base", method, "c.txt", {}, None, 1)
        own[method] = sorted(own_positives(p.suite(suite).resolve(run, 1).objectives))
    assert own == {"simcse": [], "promptbert": ["prompt"], "sncse": ["prompt"], "esimcse": ["momentum_negatives"],
                   "esimcse_released": ["momentum_negatives"], "sscl_bert": [], "sscl_bert_released": ["layer_negatives"],
                   "diffcse": [], "iscse": []}
    assert own_positives({"prompt": {"different_templates": False}}) == {}
    assert own_positives({"momentum_negatives": {"repetition": False}}) == {}


def test_the_random_backbones_config_leaves_dropout_to_training_dropout(tokenizer):
    from csebench.core.errors import ConfigError
    from csebench.model.encoder import build_backbone
    from csebench.study.params import BackboneConfig

    with pytest.raises(ConfigError, match="random_config sets hidden_dropout_prob: a run's dropout is training.dropout"):
        build_backbone(BackboneConfig(model="random", random_config={"hidden_dropout_prob": 0.3}), tokenizer)
    assert set(_dropouts(build_backbone(BackboneConfig(model="random"), tokenizer, dropout=0.25))) == {0.25}

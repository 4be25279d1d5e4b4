"""What every command that loads a model refuses, in one line naming the file: a folder that is not a
model, weights that differ from those the run recorded when it was trained, a damaged safetensors file."""

from __future__ import annotations

from pathlib import Path

import pytest

from runhelpers import SHARED, assert_fails, train_argv, write_config


@pytest.fixture()
def inputs(inputs):
    """conftest's inputs and a folder holding no model, tmp_path/notmodel."""
    notmodel = inputs / "notmodel"
    notmodel.mkdir()
    (notmodel / "notes.txt").write_text("not a model\n", encoding="utf-8")
    return inputs


# ----------------------------------------------------------------------------- a folder that is not a model


ACCEPTS = "takes a saved run's model/ folder, a Hugging Face hub id (e.g. bert-base-uncased) or packaged:minilm"


def _commands(t: Path) -> dict[str, list[str]]:
    m, se, out = str(t / "notmodel"), str(SHARED / "senteval"), str(t / "out" / "x.json")
    corpus = str(t / "corpus.txt")
    return {
        "eval-sts": ["eval-sts", "--model", m, "--senteval", se, "--out", out],
        "eval-transfer": ["eval-transfer", "--model", m, "--senteval", se, "--tasks", "TREC", "--out", out],
        "embed": ["embed", "--model", m, "--senteval", se, "--no-transfer", "--out", out],
        "teacher-cache": ["teacher-cache", "--model", m, "--corpus", corpus, "--out", str(t / "out" / "emb.npy")],
        "analyze-align-uniform": ["analyze", "align_uniform", "--model", m, "--senteval", se, "--out", out],
        "analyze-with-table": ["analyze", "embed_dim", "--model", m, "--senteval", se, "--out", out,
                               "--embeddings", str(t / "none.npz")],
        "analyze-layers": ["analyze", "layers", "--model", m, "--senteval", se, "--out", out],
        "analyze-neighbours": ["analyze", "neighbours", "--model", m, "--corpus", corpus, "--out", out],
        "analyze-teacher-logits": ["analyze", "teacher_logits", "--teacher", m, "--corpus", corpus, "--senteval", se,
                                   "--out", out],
    }


@pytest.mark.parametrize("command", list(_commands(Path("/x"))))
def test_folder_that_is_not_a_model(inputs, capsys, command):
    option = "--teacher" if command.endswith("teacher-logits") else "--model"
    line = assert_fails(capsys, _commands(inputs)[command], f"model folder {inputs / 'notmodel'} holds no model",
                        "no config.json, no model.safetensors or pytorch_model.bin", f"{option} {ACCEPTS}",
                        outputs=[inputs / "out"])
    assert "sentencepiece" not in line and line.startswith("csebench ")


def test_train_backbone_folder_that_is_not_a_model(inputs, capsys):
    cfg = write_config(inputs / "over.yaml", {
        "backbones": {"mine": {"model": str(inputs / "notmodel"), "pooler": "cls"}},
        "suites": {"ci": {"runs": [{"name": "simcse", "backbone": "mine", "method": "simcse"}]}}})
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), f"model folder {inputs / 'notmodel'} holds no model",
                 f"backbones.mine.model {ACCEPTS}", outputs=[out])


def test_model_check_cases(tmp_path, tiny_encoder):
    from csebench.encoder import check_model_source
    from csebench.errors import ConfigError

    (tmp_path / "cfg-only").mkdir()
    (tmp_path / "cfg-only" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"holds no model \(no model.safetensors or pytorch_model.bin\)"):
        check_model_source(str(tmp_path / "cfg-only"))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a model folder; --model takes"):
        check_model_source(str(tmp_path / "file.txt"))
    with pytest.raises(ConfigError, match="model folder not found: .*/nope; --model takes"):
        check_model_source(str(tmp_path / "nope"))
    tiny_encoder().save(tmp_path / "run" / "model")
    for ok in (str(tmp_path / "run" / "model"), "packaged:minilm", "bert-base-uncased", "princeton-nlp/unsup-simcse"):
        check_model_source(ok)  # a saved model, the packaged one, hub ids: no error

"""E5/BGE-style models: what a sentence-transformers folder declares beside its pooling (a Normalize module, its named
prompts and default prompt) kept by csebench's evaluation and its saved folders, and the prefix put before every
sentence (training.prefix, --prefix, the model's own default prompt) reaching the encoder in training and evaluation.
Tiny random folders (2 layers, hidden 32) with the MiniLM tokenizer; sentence-transformers as the reference."""

from __future__ import annotations

import json

import pytest
import torch

from runhelpers import STS_FAST, assert_fails, run_cli

pytestmark = pytest.mark.usefixtures("one_thread")
SENTENCES = ["a man plays a guitar .", "two dogs run in the park", "the quick brown fox"]
E5_PROMPTS = {"query": "query: ", "passage": "passage: "}  # E5's two prefixes, no default (its model card's)


@pytest.fixture()
def e5(tmp_path, tiny_encoder):
    """An E5-style folder: Transformer, Pooling (mean), Normalize; prompts query/passage, no default prompt."""
    folder = tmp_path / "e5"
    tiny_encoder("avg").save(folder)
    (folder / "csebench_encoder.json").unlink()  # a plain sentence-transformers folder
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": E5_PROMPTS,
                                                                          "default_prompt_name": None}))
    return folder


def st_encode(folder, sentences=SENTENCES, **kw):
    from sentence_transformers import SentenceTransformer

    return torch.as_tensor(SentenceTransformer(str(folder), device="cpu").encode(sentences, **kw))


def test_the_normalize_module_is_applied_and_survives_a_save(e5, tmp_path):
    """The folder's own Normalize: csebench's evaluation embeddings are unit vectors equal to sentence-transformers'
    (before, unnormalized); the folder csebench saves keeps the module (before, it was lost) and the prompts, and
    reloads in sentence-transformers with the same embeddings."""
    from csebench.model.encoder import load_encoder

    enc = load_encoder(e5)
    assert enc.normalize and enc.prompts == E5_PROMPTS and enc.prefix == ""
    ours = enc.encode(SENTENCES)
    assert torch.allclose(ours.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.allclose(ours, st_encode(e5), atol=1e-5)
    enc.save(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in saved] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((tmp_path / "saved" / "config_sentence_transformers.json").read_text()) == \
        {"prompts": E5_PROMPTS, "default_prompt_name": None}
    assert torch.allclose(st_encode(tmp_path / "saved"), ours, atol=1e-5)
    assert torch.allclose(load_encoder(tmp_path / "saved").encode(SENTENCES), ours, atol=1e-5)


def test_a_model_without_normalize_is_saved_without_it(tiny_encoder, tmp_path):
    from csebench.model.encoder import load_encoder

    tiny_encoder("avg").save(tmp_path / "m")
    enc = load_encoder(tmp_path / "m")
    assert not enc.normalize and enc.encode(SENTENCES).norm(dim=1).sub(1).abs().max() > 1e-3
    assert not (tmp_path / "m" / "config_sentence_transformers.json").exists()
    assert "Normalize" not in (tmp_path / "m" / "modules.json").read_text()


def test_the_prefix_reaches_the_encoder_and_the_saved_folder(e5, tmp_path):
    """load_encoder(prefix='query: ') encodes 'query: ' + each sentence, as sentence-transformers with the model's
    prompt 'query'; saved, the folder says so (csebench_encoder.json and the default prompt of
    config_sentence_transformers.json, by the model's own name for that text), so both reload with it."""
    from csebench.model.encoder import load_encoder

    plain = load_encoder(e5).encode(SENTENCES)
    enc = load_encoder(e5, prefix="query: ")
    ours = enc.encode(SENTENCES)
    assert not torch.allclose(ours, plain, atol=1e-3)
    assert torch.allclose(ours, load_encoder(e5).encode(["query: " + s for s in SENTENCES]), atol=1e-6)
    assert torch.allclose(ours, st_encode(e5, prompt_name="query"), atol=1e-5)
    enc.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config_sentence_transformers.json").read_text())["default_prompt_name"] == "query"
    assert torch.allclose(st_encode(tmp_path / "saved"), ours, atol=1e-5)  # its default prompt
    back = load_encoder(tmp_path / "saved")
    assert back.prefix == "query: " and torch.allclose(back.encode(SENTENCES), ours, atol=1e-6)
    other = load_encoder(e5, prefix="sts: ")  # a text the model does not name: the default prompt "csebench"
    other.save(tmp_path / "other")
    cfg = json.loads((tmp_path / "other" / "config_sentence_transformers.json").read_text())
    assert cfg == {"prompts": {**E5_PROMPTS, "csebench": "sts: "}, "default_prompt_name": "csebench"}
    assert torch.allclose(st_encode(tmp_path / "other"), other.encode(SENTENCES), atol=1e-5)


def test_a_models_default_prompt_is_its_prefix_unless_one_is_given(e5):
    from csebench.model.encoder import load_encoder

    cfg = e5 / "config_sentence_transformers.json"
    cfg.write_text(json.dumps({"prompts": E5_PROMPTS, "default_prompt_name": "passage"}))
    assert load_encoder(e5).prefix == "passage: "
    assert load_encoder(e5, prefix="").prefix == ""  # given: none
    assert torch.allclose(load_encoder(e5).encode(SENTENCES), st_encode(e5), atol=1e-5)


def test_training_prefix_reaches_the_training_rows_and_the_saved_model(tmp_path, shared_dir):
    """training.prefix: every corpus row is tokenized as prefix + sentence (its cache keyed apart), the dev scores
    and the saved model encode with it; unset, the run's key is as before."""
    from csebench.model.encoder import load_encoder
    from runhelpers import tiny_trainer

    tr = tiny_trainer(tmp_path, {}, steps=1, prefix="query: ")
    tok = tr.encoder.tokenizer
    assert tr.encoder.prefix == "query: " and tr.cfg.training.prefix == "query: "
    first = tr.tokens.get(0)
    sentence = (tmp_path / "corpus.txt").read_text(encoding="utf-8").splitlines()[0]
    assert list(first) == tok("query: " + sentence, truncation=True, max_length=tr.t.max_seq_length)["input_ids"]
    tr.run()
    saved = load_encoder(tmp_path / "out" / "model")
    assert saved.prefix == "query: "
    assert json.loads((tmp_path / "out" / "model" / "csebench_encoder.json").read_text())["prefix"] == "query: "
    assert tr.cfg.key() != tiny_trainer(tmp_path / "plain", {}, steps=1).cfg.key()


def test_training_prefix_unset_leaves_run_keys_as_they_were(project_root):
    from csebench.study.typed import Params

    params = Params.load(project_root / "params.yaml")
    cfg = params.suite("demo").resolve("simcse", 42)
    assert "prefix" not in cfg.identity()["training"]


def test_eval_sts_prefix_reaches_the_encoder_and_the_table_is_checked(e5, tmp_path, capsys, small):
    """`eval-sts --prefix 'query: '` scores the model with the prefix (the same numbers as encoding the prefixed
    sentences) and records it; a table embedded without it is refused for an evaluation with it, in one line."""
    from csebench.evaluation.embeddings import model_encoder
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts

    out = tmp_path / "sts.json"
    rc, err = run_cli(capsys, ["eval-sts", "--model", str(e5), "--senteval", str(small), *STS_FAST, "--prefix", "query: ",
                               "--out", str(out)])
    assert rc == 0, err
    result = json.loads(out.read_text())
    assert result["encoding"]["prefix"] == "query: "
    root = senteval_root(small)
    want = evaluate_sts(model_encoder(str(e5), prefix="query: "), root, max_pairs=20, seed=1111)
    plain = evaluate_sts(model_encoder(str(e5)), root, max_pairs=20, seed=1111)
    assert result["tasks"] == pytest.approx(want["tasks"], abs=1e-9) and want["tasks"] != plain["tasks"]
    rc, err = run_cli(capsys, ["embed", "--model", str(e5), "--senteval", str(small), "--no-transfer", *STS_FAST,
                               "--out", str(tmp_path / "plain.npz")])
    assert rc == 0, err
    assert_fails(capsys, ["eval-sts", "--model", str(e5), "--senteval", str(small), *STS_FAST, "--prefix", "query: ",
                          "--embeddings", str(tmp_path / "plain.npz"), "--out", str(tmp_path / "x" / "sts.json")],
                 "holds vectors of sentences after the prefix '', this evaluation puts 'query: ' before them",
                 outputs=[tmp_path / "x"])


def test_a_run_of_your_own_on_an_e5_folder_trains_with_its_prefix_and_keeps_its_modules(e5, inputs, capsys):
    """`csebench train --backbone E5_DIR --method simcse --prefix 'query: '`: the run's training.prefix; the trained
    folder keeps Normalize and the prompts, its default prompt the prefix by E5's own name, and reloads in
    sentence-transformers with csebench's embeddings."""
    from csebench.model.encoder import load_encoder

    out = inputs / "run"
    rc, err = run_cli(capsys, ["train", "--backbone", str(e5), "--method", "simcse", "--corpus", str(inputs / "corpus.txt"),
                               "--senteval", str(inputs / "se"), "--out", str(out), "--cache-dir", str(inputs / "cache"),
                               "--no-progress", "--no-sts", "--prefix", "query: ", "--set", "training.batch_size=8",
                               "--set", "training.max_steps=1", "--set", "training.dev_max_pairs=8"])
    assert rc == 0, err
    model = out / "model"
    assert json.loads((model / "training_config.json").read_text())["training"]["prefix"] == "query: "
    assert "Normalize" in (model / "modules.json").read_text()
    assert json.loads((model / "config_sentence_transformers.json").read_text()) == \
        {"prompts": E5_PROMPTS, "default_prompt_name": "query"}
    ours = load_encoder(model).encode(SENTENCES)
    assert torch.allclose(st_encode(model), ours, atol=1e-5)

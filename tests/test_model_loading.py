"""What every command that loads a model refuses, in one line naming the file: a folder that is not a
model, weights that differ from those the run recorded when it was trained, a damaged safetensors file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runhelpers import SHARED, STS_FAST, assert_fails, copy_run, run_cli, train_argv, write_config


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
    from csebench.model.encoder import check_model_source
    from csebench.core.errors import ConfigError

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


# ----------------------------------------------------------------------------- damaged weights


def test_damaged_weights_are_refused_naming_the_file(trained, tmp_path, capsys, small):
    """Bits flipped in model.safetensors moved STS13 from 43.40 to 43.42 with exit 0; NaN weights gave an
    all-null sts.json and `STS avg nan`, exit 0."""
    from csebench.model.encoder import model_files

    recorded = json.loads((trained / "train.json").read_text())["model_files"]
    assert recorded == model_files(trained / "model") and {"model.safetensors", "mlp_head.safetensors", "config.json",
                                                           "training_config.json"} <= set(recorded)
    run = copy_run(trained, tmp_path / "run")
    weights = run / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x10  # one bit of the last tensor
    weights.write_bytes(bytes(data))
    out = tmp_path / "out" / "sts.json"
    sts = ["eval-sts", "--senteval", str(small), *STS_FAST, "--out", str(out)]
    view = tmp_path / "suite" / "runs" / "simcse" / "seed1"
    view.mkdir(parents=True)
    (view / "model").symlink_to(run / "model")  # a suite's view of the run: its link is followed to train.json
    for model in (run / "model", view / "model"):
        assert_fails(capsys, [*sts, "--model", str(model)],
                     f"{model / 'model.safetensors'} has sha256 {model_files(run / 'model')['model.safetensors'][:12]}…, "
                     f"not the {recorded['model.safetensors'][:12]}… that {run / 'train.json'} recorded when the run was "
                     "trained: the model is damaged or was changed since; restore it or train the run again, or pass "
                     "--no-verify to use it anyway", outputs=[out.parent])
    for argv in (["embed", "--senteval", str(small), "--no-transfer", *STS_FAST, "--out", str(out)],
                 ["analyze", "align_uniform", "--senteval", str(small), "--out", str(out)]):
        assert_fails(capsys, [*argv, "--model", str(run / "model")], "model.safetensors has sha256", outputs=[out.parent])
    rc, err = run_cli(capsys, [*sts, "--model", str(run / "model"), "--no-verify"])
    assert rc == 0, err  # the user's call
    out.unlink()
    # heavier damage: NaN weights (0xff bytes) score nothing; that is an error, said before any score
    data[len(data) // 2:] = b"\xff" * (len(data) - len(data) // 2)
    weights.write_bytes(bytes(data))
    line = assert_fails(capsys, [*sts, "--model", str(run / "model"), "--no-verify"],
                        f"the model {run / 'model'} returned a torch.Tensor of shape (", "; its row 0 (sentence ",
                        "holds NaN (", "rows are not finite): check its weights (damaged, or from a training that diverged)",
                        outputs=[out.parent])
    assert not out.exists() and "\n" not in line
    (run / "model" / "mlp_head.safetensors").unlink()
    assert_fails(capsys, [*sts, "--model", str(run / "model")],
                 f"{run / 'model' / 'mlp_head.safetensors'} is missing: the model is damaged")


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_damaged_safetensors_is_one_line(tmp_path, capsys, tiny_encoder, small, damage):
    """A truncated, empty or garbage model.safetensors ended in `SafetensorError: Error while deserializing header`."""
    from runhelpers import train_argv, write_config, write_corpus, write_mini_senteval

    model = tmp_path / "model"
    tiny_encoder("avg").save(model)  # a model folder of no run (nothing recorded to verify against)
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes({"truncated": data[: len(data) // 2], "empty": b"", "garbage": b"not weights at all " * 20}[damage])
    out = tmp_path / "out" / "r.json"
    message = f"{weights} is damaged or not a safetensors file (Error while deserializing header: "
    for argv in (["eval-sts", "--senteval", str(small), *STS_FAST, "--out", str(out)],
                 ["embed", "--senteval", str(small), "--no-transfer", *STS_FAST, "--out", str(out)]):
        line = assert_fails(capsys, [*argv, "--model", str(model)], message, "restore it from where the model came from",
                            outputs=[out.parent])
        assert "Traceback" not in line
    write_corpus(tmp_path / "corpus.txt", n=16)
    write_mini_senteval(tmp_path / "se", pairs=12)
    cfg = write_config(tmp_path / "over.yaml", {"backbones": {"mine": {"model": str(model), "pooler": "avg"}},
                                                "suites": {"ci": {"runs": [{"name": "simcse", "backbone": "mine", "method": "simcse"}]}}})
    assert_fails(capsys, train_argv(tmp_path, tmp_path / "run", cfg), message)


# ----------------------------------------------------------------------------- an architecture transformers does not know


def _unknown_architecture(folder: Path, tiny_encoder, model_type: str | None) -> Path:
    """A model folder whose config.json declares ``model_type`` (None: none at all), weights and tokenizer
    otherwise whole: what transformers cannot build."""
    enc = tiny_encoder("cls")
    enc.backbone.save_pretrained(folder)
    enc.tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("architectures", None)
    config.pop("model_type")
    if model_type is not None:
        config["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.slow(seconds=1)
@pytest.mark.parametrize("model_type", ["hsecformer", None])
def test_an_architecture_transformers_does_not_know_is_one_line(tmp_path, tiny_encoder, small, model_type, capsys):
    """eval-sts as a user runs it (the program, in a process of its own: forked from this one, whose imports it
    shares), embed and train --backbone through the program's main() in this process, and evaluate_sts(DIR): one
    line naming the folder, the model_type, the transformers version and what to do, no 34-line traceback."""
    import transformers

    import csebench
    from csebench.core.errors import ConfigError
    from runhelpers import run_cli, run_csebench, write_corpus, write_mini_senteval

    model = _unknown_architecture(tmp_path / "hsec", tiny_encoder, model_type)
    version = f"transformers {transformers.__version__}"
    if model_type:
        said = (f"its config.json declares model_type 'hsecformer', an architecture {version} does not know; upgrade "
                "transformers (pip install --upgrade transformers) if a newer release has it, else use another model; "
                "csebench does not run code shipped with a model (trust_remote_code is not offered)")
    else:
        said = (f"its config.json declares no model_type, so {version} cannot tell its architecture; add the model_type "
                "of the architecture it was saved from (e.g. \"bert\", \"roberta\") to its config.json; csebench does not "
                "run code shipped with a model (trust_remote_code is not offered)")
    write_corpus(tmp_path / "corpus.txt", n=16)
    write_mini_senteval(tmp_path / "se", pairs=12)
    out = tmp_path / "out"
    for argv, option in ((["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--out", str(out / "s.json")], "--model"),
                         (["embed", "--model", str(model), "--senteval", str(small), "--no-transfer", *STS_FAST,
                           "--out", str(out / "e.npz")], "--model"),
                         (["train", "--backbone", str(model), "--method", "simcse", "--corpus", str(tmp_path / "corpus.txt"),
                           "--senteval", str(tmp_path / "se"), "--out", str(out / "run"), "--no-progress"], "--backbone")):
        if argv[0] == "eval-sts":  # as the program (forked: its own streams, logging and exit code)
            proc = run_csebench(["--threads", "1", *argv])
            rc, err = proc.returncode, proc.stderr
        else:
            rc, err = run_cli(capsys, ["--threads", "1", *argv])
        lines = [l for l in err.splitlines() if " INFO " not in l]
        assert rc == 2 and lines == [f"csebench {argv[0]}: error: model folder {model} ({option}): {said}"], err
        assert not out.exists(), argv[0]
    with pytest.raises(ConfigError) as err:
        csebench.evaluate_sts(str(model), senteval=small)
    assert str(err.value) == f"model folder {model} (--model): {said}"


# ----------------------------------------------------------------------------- a folder without its tokenizer, one whose
# ----------------------------------------------------------------------------- config or weights do not fit, damaged JSON

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def _refused_everywhere(capsys, tmp_path, model: Path, small: Path, *said: str, train: bool = True) -> None:
    """eval-sts, embed and `train --backbone` (in this process; ``train``) and csebench.evaluate_sts: one line holding
    ``said``, exit 2, no --out (or run folder, or token cache) left."""
    import csebench
    from csebench.core.errors import CsebenchError
    from runhelpers import write_corpus

    write_corpus(tmp_path / "corpus.txt", n=16)
    out = tmp_path / "out"
    for argv in (["eval-sts", "--senteval", str(small), *STS_FAST, "--out", str(out / "s.json"), "--model", str(model)],
                 ["embed", "--senteval", str(small), "--no-transfer", *STS_FAST, "--out", str(out / "e.npz"), "--model", str(model)],
                 ["train", "--backbone", str(model), "--method", "simcse", "--corpus", str(tmp_path / "corpus.txt"),
                  "--senteval", str(small), "--out", str(out / "run"), "--cache-dir", str(out / "cache"), "--no-progress"]
                 )[: 3 if train else 2]:
        rc, err = run_cli(capsys, argv)
        lines = [line for line in err.splitlines() if " INFO " not in line and " WARNING " not in line]
        assert rc == 2 and len(lines) == 1 and lines[0].startswith(f"csebench {argv[0]}: error: "), err
        assert all(s in lines[0] for s in said), lines[0]
        assert not out.exists(), argv[0]
    with pytest.raises(CsebenchError) as err:
        csebench.evaluate_sts(str(model), senteval=small, max_pairs=20)
    assert all(s in str(err.value) for s in said) and "\n" not in str(err.value)


def test_a_model_folder_without_its_tokenizer_is_refused_in_one_line(tmp_path, capsys, tiny_encoder, small):
    """MiniLM's folder without tokenizer.json, vocab.txt, tokenizer_config.json and special_tokens_map.json: eval-sts
    exited 0 with avg 8.65 (78.0 with its tokenizer), embed wrote a table and train a model: transformers built a
    tokenizer of the 5 special tokens, which reads every word as [UNK]."""
    model = tmp_path / "model"
    tiny_encoder("avg").save(model)
    for name in TOKENIZER_FILES:
        (model / name).unlink(missing_ok=True)
    _refused_everywhere(capsys, tmp_path, model, small, f"model folder {model} (",
                        "holds no tokenizer (none of tokenizer.json, vocab.txt, vocab.json with merges.txt, a "
                        "SentencePiece *.model): the one transformers builds without them knows only its 5 special "
                        "tokens ([UNK], [SEP], [PAD], [CLS], [MASK]) and reads every word as [UNK]",
                        "copy the tokenizer files of the model it was saved from into the folder")


def test_a_tokenizer_past_the_embedding_table_is_refused_and_a_smaller_one_is_not(tmp_path, capsys, tokenizer, small):
    """A tokenizer of 30,522 tokens beside a table of 1,000 rows: an index error in the middle of the evaluation. A
    smaller tokenizer is the rule (tables padded to a multiple of 64 rows, a rehearsal's 8,192-token stand-ins), and
    one that knows only special tokens is refused whatever its size."""
    from transformers import BertConfig, BertModel

    from csebench.core.errors import ConfigError
    from csebench.model.encoder import check_tokenizer, check_vocabulary

    def model_of(rows: int) -> BertModel:
        return BertModel(BertConfig(vocab_size=rows, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64, max_position_embeddings=128))

    folder = tmp_path / "small-table"
    model_of(1000).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    _refused_everywhere(capsys, tmp_path, folder, small, f"the tokenizer of model folder {folder} (",
                        f"has {len(tokenizer)} tokens, more than the 1000 rows of the model's embedding table "
                        "(vocab_size): a token id past 999 would index outside it")
    check_vocabulary(tokenizer, model_of(len(tokenizer) + 64), "padded")  # a padded table: no error
    check_tokenizer(tokenizer, "minilm")
    from transformers import BertTokenizer

    bare = BertTokenizer(vocab={t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])})
    with pytest.raises(ConfigError, match=r"the tokenizer of bare \(--model\) knows only its 5 special tokens"):
        check_tokenizer(bare, "bare")


def _edited_config(folder: Path, tiny_encoder, **change) -> Path:
    tiny_encoder("avg").save(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    return folder


@pytest.mark.parametrize("change,said", [
    ({"num_attention_heads": 5}, "transformers cannot build the model its config.json describes (The hidden size (32) "
                                 "is not a multiple of the number of attention heads (5)); correct config.json"),
    ({"hidden_size": "abc"}, "its config.json holds a value transformers refuses (Validation error for field "
                             "'hidden_size': TypeError: Field 'hidden_size' expected int, got str (value: 'abc'))"),
    ({"intermediate_size": 128}, "its weights do not have the shapes its config.json describes: "
                                 "encoder.layer.0.intermediate.dense.bias is [64] in the weights, [128] as config.json "
                                 "describes it (and 5 more tensors); the weights are another model's, or config.json "
                                 "was edited")])
def test_a_config_with_bad_values_or_weights_of_another_shape_is_one_line(tmp_path, capsys, tiny_encoder, small,
                                                                         change, said):
    """config.json's num_attention_heads 5 for hidden 32, hidden_size "abc", weights of another shape than it
    describes: a 45-line traceback each, and an empty --out left by train."""
    model = _edited_config(tmp_path / "model", tiny_encoder, **change)
    _refused_everywhere(capsys, tmp_path, model, small, f"model folder {model} (", said)


@pytest.mark.parametrize("name", ["csebench_encoder.json", "1_Pooling/config.json", "modules.json"])
def test_a_damaged_json_file_of_a_model_is_one_line(tmp_path, capsys, tiny_encoder, small, name):
    """csebench's metadata and sentence-transformers' modules.json and Pooling config, cut short: a JSONDecodeError
    traceback (modules.json: read as "no pooling declared", so pooled with cls, silently)."""
    model = tmp_path / "model"
    tiny_encoder("avg").save(model)
    if name != "csebench_encoder.json":
        (model / "csebench_encoder.json").unlink()  # its eval_pooler is read before the pooling files
    if name == "csebench_encoder.json":
        (model / name).write_text('{"pooler": "avg", "eval_')
    else:
        text = (model / name).read_text()
        (model / name).write_text(text[: len(text) // 2])
    # training reads no csebench_encoder.json of its backbone (the run's pooler is its own setting)
    _refused_everywhere(capsys, tmp_path, model, small, f"{model / name} is damaged: not valid JSON (line ",
                        "restore it as the model was saved", train=name != "csebench_encoder.json")

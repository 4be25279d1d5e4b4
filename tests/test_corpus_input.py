"""The corpus a user gives `prepare-corpus` and `train`: empty, not UTF-8, missing, lines of control
characters, overlong lines, fewer sentences than one batch. Each error is one clear line and exit 2, and
leaves no output behind that could look finished."""

from __future__ import annotations

import json
import logging

import pytest

from runhelpers import PARAMS, assert_fails, data_override, run_cli, train_argv, write_corpus


# ----------------------------------------------------------------------------- corpus


@pytest.mark.parametrize("content,needle", [(b"", "no sentences"), (b"\n   \n\t\n\n", "no sentences"),
                                            ("fine\ncaf\xe9\n".encode("latin-1"), "is not UTF-8: invalid byte at line 2")])
def test_bad_corpus_prepare(tmp_path, capsys, content, needle):
    bad = tmp_path / "bad-corpus.txt"
    bad.write_bytes(content)
    out = tmp_path / "out" / "corpus.txt"
    assert_fails(capsys, ["prepare-corpus", "--params", str(PARAMS), "--config", str(data_override(tmp_path, bad)),
                          "--data", "bad", "--out", str(out)], "bad-corpus.txt", needle, outputs=[out, out.parent])


@pytest.mark.parametrize("content,needle", [(b"", "no sentences"), (b"\n\n \n", "no sentences"),
                                            (b"ok\n\xff\xfe bad\n", "is not UTF-8")])
def test_bad_corpus_train(inputs, capsys, content, needle):
    bad = inputs / "bad-corpus.txt"
    bad.write_bytes(content)
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, None, corpus=bad), "bad-corpus.txt", needle,
                 outputs=[out, inputs / "cache"])


def test_missing_corpus(inputs, capsys):
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, None, corpus=inputs / "nope.txt"),
                 "corpus file not found", "nope.txt", outputs=[out])


def test_overlong_line_is_truncated_not_an_error(inputs, capsys, tokenizer):
    from csebench.training.data import load_tokenized_corpus

    corpus = inputs / "long.txt"
    long_line = " ".join(["word"] * 20000)
    corpus.write_text("a short sentence .\n" + long_line + "\nanother one .\n", encoding="utf-8")
    out = inputs / "prepared.txt"
    rc, err = run_cli(capsys, ["prepare-corpus", "--params", str(PARAMS), "--config",
                               str(data_override(inputs, corpus)), "--data", "bad", "--out", str(out)])
    assert rc == 0, err
    assert out.read_text(encoding="utf-8").splitlines()[1] == long_line  # kept whole in the corpus
    tc = load_tokenized_corpus(out, tokenizer, 32, inputs / "cache")
    assert len(tc) == 3 and tc.lengths().max() == 32  # truncated to training.max_seq_length
    assert tc.get(1)[-1] == tokenizer.sep_token_id  # truncation keeps the closing [SEP]


# ----------------------------------------------------------------------------- corpus text


@pytest.mark.parametrize("content,line,chars", [(b"\x00" * 64, 1, "U+0000"),
                                                (b"fine .\n\x01\x02 \x7f\nmore .\n", 2, "U+0001, U+0002, U+007F")])
def test_control_character_lines_are_refused(inputs, capsys, content, line, chars):
    bad = inputs / "bad-corpus.txt"
    bad.write_bytes(content)
    out = inputs / "prepared.txt"
    assert_fails(capsys, ["prepare-corpus", "--params", str(PARAMS), "--config", str(data_override(inputs, bad)),
                          "--data", "bad", "--out", str(out)],
                 f"corpus {bad} line {line} holds only control characters ({chars})", outputs=[out])
    assert_fails(capsys, train_argv(inputs, inputs / "run", None, corpus=bad), f"corpus {bad} line {line}")


# ----------------------------------------------------------------------------- corpus smaller than one batch


def test_corpus_smaller_than_one_batch_warns_and_records_the_batch(inputs, capsys, caplog):
    write_corpus(inputs / "small.txt", n=5)
    out = inputs / "run"
    with caplog.at_level(logging.WARNING, logger="csebench"):
        rc, err = run_cli(capsys, train_argv(inputs, out, None, corpus=inputs / "small.txt"))  # ci suite: batch 16
    assert rc == 0, err
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "fewer than" in r.getMessage()]
    assert warning == [f"corpus {inputs / 'small.txt'} has 5 sentences, fewer than training.batch_size 16: "
                       f"1 step of batch 5 will run"]
    train = json.loads((out / "train.json").read_text())
    assert train["steps"] == 1 and train["batch_size"] == 16 and train["effective_batch_sizes"] == [5]


def test_corpus_of_one_sentence_is_an_error_in_good_grammar(inputs, capsys):
    write_corpus(inputs / "one.txt", n=1)
    out = inputs / "run"
    line = assert_fails(capsys, train_argv(inputs, out, None, corpus=inputs / "one.txt"),
                        f"corpus {inputs / 'one.txt'} has 1 sentence: too few for in-batch negatives (need at least 2)")
    assert "1 sentences" not in line

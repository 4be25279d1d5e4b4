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


# ----------------------------------------------------------------------------- a corpus that is no regular file


def _train_as_a_user(capsys, monkeypatch, cwd, corpus, out, *settings, method="simcse"):
    """`csebench train --backbone tiny --method METHOD --corpus CORPUS --out OUT [--set ...]` run in ``cwd`` (where its
    default tokenized-corpus cache, data/cache, would be made), through the program's main() in this process (a
    fresh process each was 5 CPU-s of imports): (exit status, stderr's lines but the log's)."""
    from runhelpers import SHARED, run_cli

    cwd.mkdir(parents=True, exist_ok=True)
    argv = ["--threads", "1", "train", "--params", str(PARAMS), "--backbone", "tiny", "--method", method, "--corpus",
            str(corpus), "--senteval", str(SHARED / "senteval"), "--out", str(out), "--no-progress"]
    for setting in settings:
        argv += ["--set", setting]
    with monkeypatch.context() as mp:
        mp.chdir(cwd)
        rc, err = run_cli(capsys, argv)
    return rc, [l for l in err.splitlines() if " INFO " not in l and " WARNING " not in l]


def test_a_corpus_that_is_no_regular_file_is_named_for_what_it_is(tmp_path, capsys, monkeypatch):
    """/dev/zero, a folder and a named pipe exist: "corpus file not found" misled; each is said for what it is,
    before the run folder is made (a pipe is not opened: nothing waits for a writer)."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    out = tmp_path / "runs" / "mine"
    for corpus, kind in (("/dev/zero", "a character device"), (tmp_path / "folder", "a folder"), (fifo, "a named pipe (FIFO)")):
        rc, lines = _train_as_a_user(capsys, monkeypatch, tmp_path / "cwd", corpus, out)
        assert rc == 2 and lines == [f"csebench train: error: corpus {corpus} is {kind}, not a regular file: a corpus is a "
                                     "text file, one sentence per line; give that file (a stream or a device: save it "
                                     "to a file first)"], lines
        assert not (tmp_path / "runs").exists() and not any((tmp_path / "cwd").iterdir())


def test_a_dangling_link_and_a_missing_file_are_not_found(tmp_path):
    from csebench.core.corpus import read_corpus
    from csebench.core.errors import DataError

    (tmp_path / "link").symlink_to(tmp_path / "gone.txt")
    with pytest.raises(DataError, match=rf"^corpus {tmp_path / 'link'} is a symbolic link to {tmp_path / 'gone.txt'}, "
                                        "which does not exist: a corpus is a text file"):
        read_corpus(tmp_path / "link")
    with pytest.raises(DataError, match=rf"^corpus file not found: {tmp_path / 'nope.txt'}$"):
        read_corpus(tmp_path / "nope.txt")


# ----------------------------------------------------------------------------- a refused train leaves nothing it made

NAN_LOSS = ("training.learning_rate=1e30", "training.max_steps=3", "training.batch_size=16")  # NaN at step 2 on tiny


def test_a_refused_train_leaves_nothing_it_made(tmp_path, capsys, monkeypatch):
    """A loss that is not finite (before any checkpoint) and a template too long for the backbone are refused in
    one line after the run folder was made: that folder, its parents the command made and the tokenized-corpus
    cache it made in its working folder (data/cache) are gone; a folder that was there before stays as it was."""
    write_corpus(tmp_path / "corpus.txt", n=64)
    cwd, out = tmp_path / "cwd", tmp_path / "made" / "deeper" / "run"
    for method, settings, said in (
            ("simcse", NAN_LOSS, "csebench train: error: loss is nan at step "),
            ("promptbert", ("training.max_seq_length=128",),  # PromptBERT's template around every row: past 128 positions
             "csebench train: error: training.max_seq_length (suite cli, run tiny-promptbert) is 128, and objectives.prompt adds")):
        rc, lines = _train_as_a_user(capsys, monkeypatch, cwd, tmp_path / "corpus.txt", out, *settings, method=method)
        assert rc == 2 and len(lines) == 1 and lines[0].startswith(said), lines
        assert not (tmp_path / "made").exists() and not any(cwd.iterdir()), sorted(map(str, tmp_path.rglob("*")))
    before = tmp_path / "mine"  # a folder the user made: kept, and left as it was
    before.mkdir()
    rc, lines = _train_as_a_user(capsys, monkeypatch, cwd, tmp_path / "corpus.txt", before, *NAN_LOSS)
    assert rc == 2 and before.is_dir() and not any(before.iterdir()) and not any(cwd.iterdir())

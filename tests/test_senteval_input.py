"""The SentEval folder `prepare-senteval` and `train` read: missing files or folder, malformed lines.
Each is one clear line naming the file (and the line), exit 2, and leaves no output behind."""

from __future__ import annotations

import pytest

from runhelpers import PARAMS, assert_fails, data_override, train_argv, write_mini_senteval


# ----------------------------------------------------------------------------- SentEval


def test_missing_senteval_files(tmp_path, capsys):
    se = write_mini_senteval(tmp_path / "partial-senteval")  # has sts-dev.csv and SICK_trial.txt only
    out = tmp_path / "se-out"
    line = assert_fails(capsys, ["prepare-senteval", "--params", str(PARAMS), "--config",
                                 str(data_override(tmp_path, tmp_path / "x.txt", se)),
                                 "--data", "bad", "--out", str(out)],
                        "partial-senteval", "is missing", "STS/STS12-en-test", "SICK/SICK_test_annotated.txt",
                        outputs=[out / "ROOT"])
    assert "STS/STSBenchmark/sts-dev.csv" not in line  # only what is really missing


def test_missing_senteval_folder(inputs, capsys):
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, None, senteval=inputs / "no-such-senteval"),
                 "no-such-senteval", outputs=[out])


@pytest.mark.parametrize("bad_line,needles", [
    ("genre\tfile\t2012\t0001\t3.0\tonly six columns\n", ["sts-dev.csv:3", "expected at least 7 tab-separated columns, found 6"]),
    ("genre\tfile\t2012\t0001\thigh\ta man .\ta woman .\n", ["sts-dev.csv:3", "score 'high' is not a number"]),
])
def test_malformed_senteval_file(inputs, capsys, bad_line, needles):
    dev = inputs / "se" / "STS" / "STSBenchmark" / "sts-dev.csv"
    lines = dev.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = bad_line
    dev.write_text("".join(lines), encoding="utf-8")
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, None), *needles, outputs=[out])

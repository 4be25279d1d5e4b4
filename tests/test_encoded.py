"""What a user's encode function returns, checked before any score (csebench.evaluation.encoded): through the
Python API as a user calls it, csebench.evaluate_sts and evaluate_transfer with a function. Each malformed output
is one line saying what came back and what was expected; a constant embedding is scored, with a warning."""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")

EXPECTED = "expected a 2-D array of finite numbers, one row per sentence given ({n} rows, in their order)"


def _rows(sentences, d=8):
    """A well-formed embedding: one row per sentence, the same sentence always the same row."""
    return np.stack([np.random.default_rng(abs(hash(s)) % 2**32).standard_normal(d) for s in sentences])


def _nan_row(sentences):
    out = _rows(sentences)
    out[3, 1] = np.nan
    return out


def _inf_tensor(sentences):
    import torch

    out = torch.from_numpy(_rows(sentences)).float()
    out[0, 0] = float("inf")
    return out


CASES = [  # (what the function returns, the line after "the encode function returned ")
    ("nan", _nan_row, "a numpy.ndarray of shape ({n}, 8) and dtype float64 for {n} sentences; its row 3 (sentence {s3}) "
                      "holds NaN (1 of the {n} rows are not finite): " + EXPECTED),
    ("inf", _inf_tensor, "a torch.Tensor of shape ({n}, 8) and dtype float32 for {n} sentences; its row 0 (sentence {s0}) "
                         "holds inf (1 of the {n} rows are not finite): " + EXPECTED),
    ("twice the rows", lambda s: _rows([*s, *s]),
     "a numpy.ndarray of shape ({n2}, 8) and dtype float64 for {n} sentences: " + EXPECTED),
    ("a row short", lambda s: _rows(s[:-1]), "a numpy.ndarray of shape ({n1}, 8) and dtype float64 for {n} sentences: " + EXPECTED),
    ("1-D", lambda s: np.arange(len(s), dtype=float), "a numpy.ndarray of shape ({n},) and dtype float64 for {n} sentences: " + EXPECTED),
    ("None", lambda s: None, "None for {n} sentences: " + EXPECTED),
    ("strings", lambda s: [["0.5"] * 4 for _ in s],
     "a list (as an array: shape ({n}, 4), dtype <U3) for {n} sentences: " + EXPECTED),
    ("rows of two lengths", lambda s: [[0.5] * (4 + i % 2) for i in range(len(s))],
     "a list whose rows numpy cannot stack into one array (rows of different lengths?) for {n} sentences: " + EXPECTED),
    ("no columns", lambda s: np.zeros((len(s), 0)), "a numpy.ndarray of shape ({n}, 0) and dtype float64 for {n} sentences: " + EXPECTED),
]


def _sentences_of(evaluate, small, **kwargs) -> list[str]:
    """The sentences the evaluator hands the function (every distinct one, sorted), caught on their way."""
    seen = []

    def spy(sentences):
        seen.extend(sentences)
        return _rows(sentences)

    evaluate(spy, senteval=small, **kwargs)
    return seen


@pytest.mark.parametrize("evaluate, kwargs", [("evaluate_sts", {}), ("evaluate_transfer", {"tasks": ["MR"]})])
@pytest.mark.parametrize("case, encode, message", CASES, ids=[c[0] for c in CASES])
def test_a_malformed_encode_output_stops_before_any_score_in_one_line(small, evaluate, kwargs, case, encode, message):
    import csebench
    from csebench.core.errors import DataError

    run = getattr(csebench, evaluate)
    sentences = _sentences_of(run, small, **kwargs)
    n = len(sentences)
    with pytest.raises(DataError) as err:
        run(encode, senteval=small, **kwargs)
    expected = "the encode function returned " + message.format(
        n=n, n1=n - 1, n2=2 * n, s0=repr(sentences[0][:57] + "..." if len(sentences[0]) > 60 else sentences[0]),
        s3=repr(sentences[3][:57] + "..." if len(sentences[3]) > 60 else sentences[3]))
    assert str(err.value) == expected and "\n" not in str(err.value), case


def test_a_constant_embedding_is_scored_and_warned_about(small, caplog):
    import csebench

    constant = lambda sentences: np.ones((len(sentences), 8))  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="csebench"):
        sts = csebench.evaluate_sts(constant, senteval=small)
        transfer = csebench.evaluate_transfer(constant, senteval=small, tasks=["MR"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "constant embedding" in r.getMessage()]
    assert len(warnings) == 2 and all("the same vector for all" in w for w in warnings), warnings
    # scored: every STS task present (a constant embedding ranks nothing: each Spearman is undefined), MR by chance
    assert set(sts.tasks) == {"STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"}
    assert all(np.isnan(v) for v in sts.tasks.values())
    assert set(transfer.tasks) == {"MR"} and 0 <= transfer.tasks["MR"] <= 100
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="csebench"):  # a well-formed embedding: no warning
        csebench.evaluate_sts(_rows, senteval=small)
    assert not [r for r in caplog.records if "constant embedding" in r.getMessage()]


def test_the_check_keeps_what_scored_before():
    """A well-formed output scores as it did: a float tensor as given, numpy's float64 as float32, integers as
    floats, a list of one tensor per sentence stacked."""
    import torch

    from csebench.core.errors import DataError
    from csebench.evaluation.encoded import checked_embeddings

    s = ["a", "b", "c"]
    t = torch.ones(3, 2, dtype=torch.float64)
    assert checked_embeddings(t, s) is not None and checked_embeddings(t, s).dtype == torch.float64
    assert checked_embeddings(np.ones((3, 2)), s).dtype == torch.float32
    assert checked_embeddings([[1, 2], [3, 4], [5, 7]], s).tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]]
    assert checked_embeddings(torch.ones(3, 2, dtype=torch.float16), s).dtype == torch.float32
    rows = [torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0]), torch.tensor([5.0, 7.0])]
    assert checked_embeddings(rows, s).tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]]  # one tensor per sentence
    with pytest.raises(DataError, match=r"^the encode function returned a list of tensors of different shapes for 3 "):
        checked_embeddings([torch.ones(2), torch.ones(3), torch.ones(2)], s)

"""Issue 31, "Trust, round two": no option silently ignored, your own data checked, weights verified,
nothing outside a run folder touched or uploaded, one line where a traceback was. Each test failed
before the fix it names (docs/reliability.md lists every case with its message)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from runhelpers import write_small_shared
from test_bad_input import assert_fails, run_cli
from test_probing import make_probing

STS_FAST = ["--max-sts-pairs", "20", "--no-progress"]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """The first 40 lines of every STS file, a synthetic transfer set: seconds per evaluation."""
    return write_small_shared(tmp_path_factory.mktemp("small"), lines=40) / "senteval"


# ----------------------------------------------------------------------------- 1. --pooler and the embeddings table


def _embed(capsys, model: Path, out: Path, se: Path, *extra: str) -> dict:
    from csebench.embeddings import EmbeddingTable

    rc, err = run_cli(capsys, ["embed", "--model", str(model), "--senteval", str(se), "--no-transfer", *STS_FAST,
                               "--out", str(out), *extra])
    assert rc == 0, err
    return EmbeddingTable(out).meta


def test_pooler_is_recorded_and_checked_against_the_table(tmp_path, capsys, tiny_encoder, small):
    """`eval-sts --pooler avg --embeddings T` scored T's cls vectors (the table said pooler: null), and an avg
    table read without --pooler scored avg as the model's cls numbers; sts.json named no pooler."""
    model = tmp_path / "run" / "model"
    tiny_encoder("cls").save(model)  # its evaluation pooler: cls_before_pooler
    assert _embed(capsys, model, tmp_path / "cls.npz", small)["pooler"] == "cls_before_pooler"
    assert _embed(capsys, model, tmp_path / "avg.npz", small, "--pooler", "avg")["pooler"] == "avg"
    out = tmp_path / "out" / "r.json"

    def sts(table, *pooler):
        return ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--embeddings", str(tmp_path / table),
                *pooler, "--out", str(out)]

    assert_fails(capsys, sts("cls.npz", "--pooler", "avg"),
                 f"{tmp_path / 'cls.npz'} holds vectors pooled with cls_before_pooler, this evaluation asks for avg "
                 "(--pooler avg): pass --pooler cls_before_pooler, or make a table with avg (`csebench embed --pooler avg`), "
                 "or drop --embeddings", outputs=[out.parent])
    assert_fails(capsys, sts("avg.npz"),
                 f"{tmp_path / 'avg.npz'} holds vectors pooled with avg, this evaluation uses cls_before_pooler (the "
                 "model's own evaluation pooler: no --pooler given): pass --pooler avg", outputs=[out.parent])
    # every consumer checks it: transfer, probing, the analyses
    for argv in (["eval-transfer", "--tasks", "TREC", "--senteval", str(small)],
                 ["eval-probing", "--probing", str(make_probing(tmp_path / "probing", n=(20, 10, 10)))],
                 ["analyze", "align-uniform", "--senteval", str(small)],
                 ["analyze", "model-correlation", "--senteval", str(small), "--other-students", "packaged:minilm"]):
        assert_fails(capsys, [*argv, "--model", str(model), "--embeddings", str(tmp_path / "avg.npz"), "--out", str(out)],
                     "holds vectors pooled with avg, this evaluation uses cls_before_pooler", outputs=[out.parent])
    # a table of an older csebench (pooler: null) was made with the model's own pooler
    from csebench.embeddings import EmbeddingTable, write_embeddings

    old = EmbeddingTable(tmp_path / "cls.npz")
    write_embeddings(tmp_path / "old.npz", [""] * 0, np.zeros((0, 32), np.float32), {**old.meta, "pooler": None})
    assert_fails(capsys, sts("old.npz", "--pooler", "avg"), "old.npz holds vectors pooled with cls_before_pooler")
    # the result names the pooler, with a table and without
    for tag, argv in (("table", sts("avg.npz", "--pooler", "avg")),
                      ("direct", ["eval-sts", "--model", str(model), "--senteval", str(small), *STS_FAST, "--out", str(out)])):
        rc, err = run_cli(capsys, argv)
        assert rc == 0, err
        assert json.loads(out.read_text())["encoding"]["pooler"] == ("avg" if tag == "table" else "cls_before_pooler")

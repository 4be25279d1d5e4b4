"""Issue 12: rough edges a new user hits with the CLI. A folder that is not a model (every command
that loads one), a corpus smaller than one batch, and the transfer average of a subset of tasks."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from csebench.evaluation import TRANSFER_TASKS
from csebench.results.renderers import suite as rp
from runhelpers import PARAMS, SHARED, train_argv, write_config, write_corpus, write_mini_senteval
from runhelpers import assert_fails, run_cli
from runhelpers import make_senteval

ACCEPTS = "takes a saved run's model/ folder, a Hugging Face hub id (e.g. bert-base-uncased) or packaged:minilm"


@pytest.fixture()
def inputs(tmp_path):
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=24)
    notmodel = tmp_path / "notmodel"
    notmodel.mkdir()
    (notmodel / "notes.txt").write_text("not a model\n", encoding="utf-8")
    return tmp_path


# ----------------------------------------------------------------------------- 1. a folder that is not a model


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


# ----------------------------------------------------------------------------- 2. corpus smaller than one batch


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


# ----------------------------------------------------------------------------- 3. transfer average of a subset


def test_eval_transfer_subset_has_no_seven_task_average(tmp_path, capsys, caplog, tiny_encoder):
    tiny_encoder().save(tmp_path / "model")
    se = make_senteval(tmp_path / "se", n=20)
    out = tmp_path / "transfer.json"
    with caplog.at_level(logging.INFO, logger="csebench"):
        rc, err = run_cli(capsys, ["eval-transfer", "--model", str(tmp_path / "model"), "--senteval", str(se),
                                   "--tasks", "TREC", "MRPC", "CR", "SST2", "--out", str(out), "--no-progress"])
    assert rc == 0, err
    res = json.loads(out.read_text())
    assert "avg" not in res and res["avg_tasks"] == ["TREC", "MRPC", "CR", "SST2"]
    assert res["avg_subset"] == pytest.approx(np.mean([res["tasks"][t] for t in res["avg_tasks"]]))
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("transfer "))
    assert "nan" not in line
    assert line.startswith(f"transfer avg of 4 tasks {res['avg_subset']:.2f}, not the 7-task average (senteval): TREC ")


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
def test_report_never_shows_a_subset_average_as_the_average(tmp_path):
    from csebench.results.registry import load_registry
    from csebench.results.render import context
    from test_report import suite_params, write_run

    full = {t: 80.0 for t in TRANSFER_TASKS}
    write_run(tmp_path, "s", "simcse", 1, "simcse", "bert-base", transfer=full)
    # an avg written over 4 tasks (as write_run, or an older csebench, does), and the new avg_subset form
    write_run(tmp_path, "s", "iscse", 1, "iscse", "bert-base", transfer={"TREC": 90.0, "MRPC": 70.0, "CR": 75.0, "SST2": 85.0})
    c = write_run(tmp_path, "s", "sscl", 1, "sscl", "bert-base", transfer={"TREC": 90.0}) / "transfer.json"
    res = json.loads(c.read_text())
    del res["avg"]
    c.write_text(json.dumps({**res, "avg_subset": 90.0, "avg_tasks": ["TREC"]}))
    params = suite_params("s", {n: (n, "bert-base") for n in ("simcse", "iscse", "sscl")})
    ctx = context(load_registry().item("suite/s"), params, str(tmp_path))
    records = {r.info["name"]: r for r in rp.records(ctx, "transfer")}
    assert records["simcse"].avg == pytest.approx(80.0)
    assert records["iscse"].avg is None and records["sscl"].avg is None
    rows = {r.run: r for r in rp.group_rows(list(records.values()), "transfer", "s")}
    assert np.isnan(rows["iscse"].mean[-1]) and np.isnan(rows["sscl"].mean[-1])
    md = rp.render_markdown(list(rows.values()), "transfer", "s")
    iscse_line = next(l for l in md.splitlines() if "| iscse |" in l)
    assert iscse_line.split("|")[-4].strip() == "–"  # the Avg. cell

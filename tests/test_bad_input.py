"""Bad input (issue 6): each case exits with status 2 and one clear line on stderr naming the
problem and the file or key, and leaves no output behind that could look finished."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from csebench import cli
from runhelpers import PARAMS, SHARED, ci_training, train_argv, write_config, write_corpus, write_mini_senteval


@pytest.fixture()
def inputs(tmp_path):
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=24)
    return tmp_path


def run_cli(capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli.main(argv)
    err = capsys.readouterr().err
    return rc, err


def assert_fails(capsys, argv, *needles, outputs=()) -> str:
    rc, err = run_cli(capsys, argv)
    assert rc == 2, f"exit {rc}, stderr: {err}"
    line = [l for l in err.splitlines() if "error:" in l]
    assert line, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in: {err}"
    for out in outputs:
        out = Path(out)
        assert not out.exists() or (out.is_dir() and not any(out.iterdir())), f"{out} was left behind"
    print("STDERR>", line[-1])
    return line[-1]


def data_override(tmp: Path, corpus: Path, senteval: Path | None = None) -> Path:
    return write_config(tmp / "data.yaml", {"data": {"bad": {
        "corpus": {"path": str(corpus)}, "senteval": {"path": str(senteval or SHARED / "senteval")}}}})


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
    from csebench.data import load_tokenized_corpus

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


# ----------------------------------------------------------------------------- configuration


def _train_with(inputs, capsys, overrides: dict, *needles):
    cfg = write_config(inputs / "over.yaml", overrides)
    out = inputs / "run"
    return assert_fails(capsys, train_argv(inputs, out, cfg), *needles, outputs=[out, inputs / "cache"])


def test_unknown_method(inputs, capsys):
    _train_with(inputs, capsys, {"suites": {"ci": {"runs": [{"name": "simcse", "backbone": "tiny", "method": "simcsee"}]}}},
                "suites.ci, run 'simcse'.method", "unknown method 'simcsee'", "did you mean 'simcse'")


def test_unknown_backbone(inputs, capsys):
    _train_with(inputs, capsys, {"suites": {"ci": {"runs": [{"name": "simcse", "backbone": "tinny", "method": "simcse"}]}}},
                "run 'simcse'.backbone", "unknown backbone 'tinny'", "did you mean 'tiny'")


def test_unknown_pooler(inputs, capsys):
    _train_with(inputs, capsys, {"backbones": {"tiny": {"pooler": "clss"}}},
                "backbones.tiny.pooler", "unknown pooler 'clss'", "did you mean 'cls'")


def test_unknown_objective(inputs, capsys):
    _train_with(inputs, capsys, {"methods": {"simcse": {"objectives": {"gausian_negatives": {}}}}},
                "objectives: unknown objective 'gausian_negatives'", "did you mean 'gaussian_negatives'")


def test_unknown_objective_setting(inputs, capsys):
    _train_with(inputs, capsys, {"methods": {"simcse": {"objectives": {"gaussian_negatives": {"ratioo": 2}}}}},
                "objectives.gaussian_negatives", "unknown key 'ratioo'", "did you mean 'ratio'")


@pytest.mark.parametrize("lr", [0, -1e-5])
def test_learning_rate_must_be_positive(inputs, capsys, lr):
    _train_with(inputs, capsys, ci_training(learning_rate=lr), "learning_rate must be > 0", str(float(lr)))


def test_batch_size_one(inputs, capsys):
    _train_with(inputs, capsys, ci_training(batch_size=1), "batch_size must be >= 2", "in-batch negatives")


def test_typo_in_training_key(inputs, capsys):
    _train_with(inputs, capsys, ci_training(learning_rte=1e-4), "over.yaml: suites.ci.training: unknown key 'learning_rte'",
                "did you mean 'learning_rate'")


def test_typo_in_top_level_key_names_the_override_file(inputs, capsys):
    line = _train_with(inputs, capsys, {"trainin": {"learning_rate": 1e-4}}, "over.yaml", "unknown key 'trainin'",
                       "did you mean 'training'")
    assert "params.yaml" not in line


def test_typo_in_params_file_itself(inputs, capsys):
    bad = inputs / "params-typo.yaml"
    bad.write_text(PARAMS.read_text(encoding="utf-8").replace("  learning_rate: 3.0e-5", "  learning_rte: 3.0e-5", 1),
                   encoding="utf-8")
    out = inputs / "run"
    argv = train_argv(inputs, out, None)
    argv[argv.index("--params") + 1] = str(bad)
    assert_fails(capsys, argv, "params-typo.yaml: training: unknown key 'learning_rte'", "did you mean 'learning_rate'",
                 outputs=[out])


def test_invalid_yaml_override(inputs, capsys):
    cfg = inputs / "broken.yaml"
    cfg.write_text("training: {learning_rate: [1\n", encoding="utf-8")
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), "broken.yaml", "not valid YAML", outputs=[out])


def _has_term(module: str, attr: str) -> bool:
    try:
        return importlib.util.find_spec(f"csebench.objectives.{module}") is not None and \
            hasattr(importlib.import_module(f"csebench.objectives.{module}"), attr)
    except Exception:
        return False


import importlib  # noqa: E402


@pytest.mark.skipif(not _has_term("smoothing", "InstanceSmoothing"), reason="IS-CSE term (objectives/smoothing.py) not present")
def test_iscse_k_not_below_buffer_size(inputs, capsys):
    _train_with(inputs, capsys, {"methods": {"simcse": {"objectives": {"instance_smoothing": {"buffer_size": 8, "neighbors": 8}}}}},
                "objectives.instance_smoothing", "neighbors (8) must be < buffer_size (8)")


@pytest.mark.skipif(not _has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
@pytest.mark.parametrize("p", [0, 1.5, -0.1])
def test_group_p_outside_unit_interval(inputs, capsys, p):
    _train_with(inputs, capsys, {"methods": {"simcse": {"objectives": {"distillation": {
        "teachers": {"run": "simcse", "seeds": [2]}, "shuffle": "group_p", "p": p}}}}},
        "objectives.distillation.p must be in (0, 1]", f"got {float(p)}")


@pytest.mark.skipif(not _has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_cache_that_does_not_exist(inputs, capsys):
    cfg = write_config(inputs / "over.yaml", {"methods": {"simcse": {"objectives": {"distillation": {
        "teachers": {"run": "simcse", "seeds": [2]}}}}}})
    out = inputs / "run"
    missing = inputs / "teachers" / "simcse" / "seed2" / "embeddings.npy"
    assert_fails(capsys, train_argv(inputs, out, cfg) + ["--teacher-cache", str(missing)],
                 "teacher cache not found", str(missing), outputs=[out])


@pytest.mark.skipif(not _has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_model_that_does_not_exist(inputs, capsys):
    out = inputs / "emb.npy"
    assert_fails(capsys, ["teacher-cache", "--model", str(inputs / "no-teacher" / "model"), "--corpus",
                          str(inputs / "corpus.txt"), "--out", str(out)],
                 "teacher model folder not found", "no-teacher", outputs=[out])


# ----------------------------------------------------------------------------- NaN / inf loss


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_loss_stops_with_step_and_checkpoint(inputs, capsys, monkeypatch, bad):
    import csebench.objectives as objectives
    from csebench.checkpoint import read_state

    real = objectives.info_nce

    def poisoned(ctx, *args, **kwargs):
        loss = real(ctx, *args, **kwargs)
        return loss * bad if ctx.step >= 2 else loss  # the 3rd step (1-based) goes bad

    monkeypatch.setattr(objectives, "info_nce", poisoned)
    cfg = write_config(inputs / "over.yaml", ci_training(max_steps=6, eval_steps=2, checkpoint_steps=2, batch_size=8,
                                                         log_steps=1, eval_batch_size=64))
    out = inputs / "run"
    line = assert_fails(capsys, train_argv(inputs, out, cfg), f"loss is {bad} at step 3 of simcse/seed1",
                        f"the last good checkpoint is {out / 'checkpoint'} (step 2)", "learning_rate")
    assert not (out / "train.json").exists() and not (out / "model").exists()
    assert read_state(out / "checkpoint")["state"]["step"] == 2
    assert line.startswith("csebench train: error:")


@pytest.mark.parametrize("checkpoint_steps,stopped_after,last", [(100, 8, "no checkpoint was written yet"),
                                                                  (3, 6, "(step 3)")])
def test_non_finite_loss_is_read_back_every_log_steps(inputs, capsys, monkeypatch, checkpoint_steps, stopped_after,
                                                      last):
    """Losses stay on the device between reads (log steps, evaluations, checkpoints, the last step):
    a NaN at step 5 with log_steps 4 stops training at the read after step 8 (at most log_steps - 1
    steps late), or before the step-6 checkpoint is written; the message names step 5."""
    import csebench.objectives as objectives

    real, calls = objectives.info_nce, []

    def poisoned(ctx, *args, **kwargs):
        calls.append(ctx.step)
        loss = real(ctx, *args, **kwargs)
        return loss * math.nan if ctx.step >= 4 else loss  # the 5th step (1-based) goes bad

    monkeypatch.setattr(objectives, "info_nce", poisoned)
    cfg = write_config(inputs / "over.yaml", ci_training(max_steps=12, log_steps=4, eval_steps=100, batch_size=8,
                                                         checkpoint_steps=checkpoint_steps))
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), "loss is nan at step 5 of simcse/seed1", last)
    assert len(calls) == stopped_after  # steps run before the NaN was read back
    assert not (out / "train.json").exists() and not (out / "model").exists()


def test_non_finite_loss_before_any_checkpoint(inputs, capsys, monkeypatch):
    import csebench.objectives as objectives

    monkeypatch.setattr(objectives, "info_nce", lambda ctx, *args, **kwargs: ctx.z1.sum() * math.nan)
    cfg = write_config(inputs / "over.yaml", ci_training(max_steps=4, batch_size=8))
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), "loss is nan at step 1", "no checkpoint was written yet")
    assert not (out / "train.json").exists() and not (out / "model").exists()


@pytest.mark.skipif(not _has_term("distillation", "Distillation"), reason="DistillCSE term (objectives/distillation.py) not present")
def test_teacher_with_a_different_tokenizer(inputs, capsys):
    from csebench.config import BackboneConfig
    from csebench.encoder import build_encoder

    teacher = build_encoder(BackboneConfig(model="random", pooler="cls"), seed=3)
    teacher.tokenizer.add_tokens(["<teacher-only-token>"])  # a vocabulary the student does not have
    teacher.backbone.resize_token_embeddings(len(teacher.tokenizer))
    teacher.save(inputs / "teacher" / "model")
    cache = inputs / "teacher" / "embeddings.npy"
    rc, err = run_cli(capsys, ["teacher-cache", "--model", str(inputs / "teacher" / "model"), "--corpus",
                               str(inputs / "corpus.txt"), "--out", str(cache), "--max-seq-length", "32"])
    assert rc == 0, err
    cfg = write_config(inputs / "over.yaml", {"methods": {"simcse": {"objectives": {"distillation": {
        "teachers": {"run": "simcse", "seeds": [2]}}}}}})
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg) + ["--teacher-cache", str(cache)],
                 f"teacher cache {cache}", "uses a different tokenizer than the student", outputs=[out])


# ----------------------------------------------------------------------------- issue 19: gold scores


@pytest.mark.parametrize("value", ["inf", "nan", "-Infinity"])
def test_non_finite_gold_score_names_file_and_line(tmp_path, capsys, tiny_encoder, value):
    """Every third MSRpar score set to inf gave MSRpar 30.37 instead of 79.30 (nan: `STS avg nan` and a
    bare NaN in sts.json), exit 0. float() takes them; the loader must not."""
    import shutil

    se = tmp_path / "senteval"
    for folder in ("STS", "SICK"):
        shutil.copytree(SHARED / "senteval" / "downstream" / folder, se / folder)
    gold = se / "STS" / "STS12-en-test" / "STS.gs.MSRpar.txt"
    lines = gold.read_text(encoding="utf-8").splitlines(keepends=True)
    gold.write_text("".join(f"{value}\n" if i % 3 == 2 else line for i, line in enumerate(lines)), encoding="utf-8")
    tiny_encoder("avg").save(tmp_path / "model")
    out = tmp_path / "out" / "sts.json"
    assert_fails(capsys, ["eval-sts", "--model", str(tmp_path / "model"), "--senteval", str(se), "--out", str(out),
                          "--no-progress"], f"{gold}:3: score '{value}' is not a finite number", outputs=[out.parent])

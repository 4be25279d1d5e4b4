"""The trainer: the dev scores in train.json (STS-B dev of the selected checkpoint, SICK-R dev, their
average), and a loss that is not finite stopping training with its step and the last good checkpoint."""

from __future__ import annotations

import json
import math

import pytest

from csebench.results import metrics as M
from csebench.results.runs import RunRef
from runhelpers import assert_fails, ci_training, train_argv, write_config, write_corpus, write_mini_senteval


# ----------------------------------------------------------------------------- NaN / inf loss


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_loss_stops_with_step_and_checkpoint(inputs, capsys, monkeypatch, bad):
    import csebench.objectives.compose as objectives  # where Objective looks info_nce up
    from csebench.training.checkpoint import read_state

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
    import csebench.objectives.compose as objectives  # where Objective looks info_nce up

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
    import csebench.objectives.compose as objectives  # where Objective looks info_nce up

    monkeypatch.setattr(objectives, "info_nce", lambda ctx, *args, **kwargs: ctx.z1.sum() * math.nan)
    cfg = write_config(inputs / "over.yaml", ci_training(max_steps=4, batch_size=8))
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), "loss is nan at step 1", "no checkpoint was written yet")
    assert not (out / "train.json").exists() and not (out / "model").exists()


@pytest.mark.parametrize("where,said", [
    ("extra_loss", "term gaussian_negatives"),
    ("extra_negatives", "the contrastive loss (InfoNCE), from the extra negatives of term gaussian_negatives"),
    ("embeddings", "the contrastive loss (InfoNCE), from the embeddings (z1, z2)")])
def test_a_nan_between_reads_is_said_at_its_step_naming_what_produced_it(inputs, capsys, monkeypatch, where, said):
    """A NaN at step 3 with log_steps 2 (a step whose logs are not read): the line names step 3, not the read at
    step 4, and what was not finite there (a term's own loss part, the extra negatives a term added to InfoNCE,
    the embeddings), not InfoNCE by default. After step 3 the weights are NaN, so at step 4 every part was: that
    step's parts blamed InfoNCE and every term."""
    from csebench.objectives import gaussian
    import csebench.training.trainer as T

    real_negatives, real_encode = gaussian.GaussianNegatives.extra_negatives, T.Trainer.encode_views
    nan_at = lambda ctx, x: x * math.nan if ctx.step == 2 else x  # noqa: E731  the 3rd step (1-based)
    if where == "extra_loss":
        monkeypatch.setattr(gaussian.GaussianNegatives, "extra_loss", lambda self, ctx: nan_at(ctx, ctx.z1.sum() * 0),
                            raising=False)
    elif where == "extra_negatives":
        monkeypatch.setattr(gaussian.GaussianNegatives, "extra_negatives",
                            lambda self, ctx: nan_at(ctx, real_negatives(self, ctx)))
    else:
        def encode(self, batch):
            ctx = real_encode(self, batch)
            ctx.z1 = nan_at(ctx, ctx.z1) if ctx.step == 2 else ctx.z1
            return ctx
        monkeypatch.setattr(T.Trainer, "encode_views", encode)
    cfg = write_config(inputs / "over.yaml", {**ci_training(max_steps=6, log_steps=2, eval_steps=100, batch_size=8,
                                                            checkpoint_steps=100),
                                              "methods": {"simcse": {"objectives": {"gaussian_negatives": {}}}}})
    line = assert_fails(capsys, train_argv(inputs, inputs / "run", cfg),
                        f"loss is nan at step 3 of simcse/seed1 (not finite at step 3: {said}); no checkpoint was "
                        "written yet")
    assert "InfoNCE" not in line or where != "extra_loss"


# ------------------------------------------------------------------------ determinism is the trainer's, for its life only


def test_a_trainer_gives_the_process_its_own_determinism_settings_back(inputs, capsys, monkeypatch):
    """`csebench.cli.main(["train", ...])` in a Python process (a notebook, the rehearsal) left deterministic mode on,
    its NaN fill of new memory off, cuDNN's flags and CUBLAS_WORKSPACE_CONFIG set: a user's torch.empty(4) then held
    old memory instead of NaN. After a finished run, and after a refused one (the trainer stopped while building),
    every setting is the process's own again."""
    import os

    import torch

    from csebench.cli import main
    from csebench.training.trainer import _determinism_state, release_all_determinism

    release_all_determinism()  # what trainers of earlier tests in this process, driven step by step, still hold
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = _determinism_state()
    try:
        # a user's deterministic mode with its NaN fill, and cuDNN benchmarking on
        torch.use_deterministic_algorithms(True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = True, False
        mine = _determinism_state()
        cfg = write_config(inputs / "over.yaml", ci_training(max_steps=2, eval_steps=2, batch_size=8))
        assert main(train_argv(inputs, inputs / "run", cfg)) == 0
        assert _determinism_state() == mine and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
        assert torch.empty(4).isnan().all()  # new memory filled with NaN again, as the user had it
        # nothing set: a run refused inside the trainer (one sentence: no in-batch negatives) sets nothing either
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = True
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, False
        plain = _determinism_state()
        (inputs / "one.txt").write_text("a single sentence\n", encoding="utf-8")
        assert_fails(capsys, train_argv(inputs, inputs / "run2", cfg, corpus=inputs / "one.txt"), "has 1 sentence")
        assert _determinism_state() == plain and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    finally:
        from csebench.training.trainer import _restore_determinism

        _restore_determinism(before)


def test_overlapping_trainers_keep_deterministic_mode_until_the_last_is_done(monkeypatch):
    """Two holders (a Trainer built while another one lives): the settings stay until both are released, then the
    process's own come back once; a second release does nothing."""
    import torch

    from csebench.training.trainer import (DeterministicMode, _determinism_state, _restore_determinism,
                                           release_all_determinism)

    release_all_determinism()
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = _determinism_state()
    try:
        torch.use_deterministic_algorithms(False)
        own = _determinism_state()
        first, second = DeterministicMode(), DeterministicMode()
        first.release()
        first.release()
        assert torch.are_deterministic_algorithms_enabled() and not torch.utils.deterministic.fill_uninitialized_memory
        with second:
            pass
        assert _determinism_state() == own
        # a holder dropped without release (a failed notebook cell): release_all gives the settings back now, and
        # the dropped holder's later release leaves a newer holder's settings alone
        dropped = DeterministicMode()
        release_all_determinism()
        assert _determinism_state() == own
        newer = DeterministicMode()
        dropped.release()
        assert torch.are_deterministic_algorithms_enabled()
        newer.release()
        assert _determinism_state() == own
    finally:
        _restore_determinism(before)


# ------------------------------------------------------------------------ the dev scores in train.json (SICK-R dev too)


def test_train_json_records_sickr_dev_and_the_dev_average_of_the_selected_checkpoint(tmp_path):
    from csebench.cli import main
    from csebench.model.encoder import load_encoder
    from csebench.training.trainer import DevEvaluator

    write_corpus(tmp_path / "corpus.txt", n=32)
    write_mini_senteval(tmp_path / "se", pairs=24)
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=3, eval_steps=1, batch_size=8, log_steps=1))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    summary = json.loads((out / "train.json").read_text())
    dev = DevEvaluator(tmp_path / "se", 8, precision="fp32")
    model = load_encoder(out / "model")  # the best STS-B dev checkpoint
    assert summary["stsb_dev_best"] == pytest.approx(dev(model), abs=1e-3)
    assert summary["sickr_dev"] == pytest.approx(dev.sickr(model), abs=1e-3)
    assert summary["avg_sts_dev"] == pytest.approx((summary["stsb_dev_best"] + summary["sickr_dev"]) / 2, abs=1e-4)
    ref = RunRef("ci", "simcse")
    results = tmp_path / "results"
    (results / "ci" / "runs" / "simcse").mkdir(parents=True)
    (out).rename(results / "ci" / "runs" / "simcse" / "seed1")
    assert M.value("avg_sts_dev", str(results), ref, 1) == summary["avg_sts_dev"]
    assert M.value("sickr_dev", str(results), ref, 1) == summary["sickr_dev"]
    assert M.files_for("avg_sts_dev", "r", ref, 1) == ["r/ci/runs/simcse/seed1/train.json"]


def test_sickr_dev_is_scored_once_for_the_selected_checkpoint_and_kept_in_every_checkpoint(tmp_path, monkeypatch):
    """Not at every new best: once the selection is final (training ends), and before a checkpoint is written,
    so that a resumed run has it without the weights it was selected with."""
    from csebench.training import checkpoint
    from csebench.cli import main
    from csebench.training.trainer import DevEvaluator, Trainer

    calls, saved = [], []
    real_sickr, real_save = DevEvaluator.sickr, Trainer.save_checkpoint
    monkeypatch.setattr(DevEvaluator, "sickr", lambda self, enc: calls.append(1) or real_sickr(self, enc))

    def save(self):
        real_save(self)
        saved.append(checkpoint.read_state(self.ckpt_dir)["state"])

    monkeypatch.setattr(Trainer, "save_checkpoint", save)
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=24)
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=6, eval_steps=1, batch_size=8, log_steps=1,
                                                            checkpoint_steps=3, learning_rate=5e-3))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    dev_rows = (out / "dev_curve.csv").read_text().splitlines()[1:]
    assert len(dev_rows) == 6 and len(saved) == 1
    scores = [float(r.split(",")[1]) for r in dev_rows]
    new_bests = sum(s > max(scores[:i], default=float("-inf")) for i, s in enumerate(scores))
    assert new_bests >= 3, scores  # scoring at every new best would have taken 3 passes or more
    assert len(calls) <= 2  # at most at the checkpoint and at the end
    assert saved[0]["best_step"] >= 1 and saved[0]["best_sickr_dev"] == saved[0]["best_sickr_dev"]  # not NaN


@pytest.mark.parametrize("stsb,best_step", [([50.0, 60.0, 70.0], 3), ([70.0, 60.0, 50.0], 1)])
def test_sickr_dev_scores_the_selected_weights_whether_training_moved_past_them_or_not(tmp_path, monkeypatch, stsb,
                                                                                         best_step):
    """The best checkpoint at the last step is scored on the weights in place (nothing copied out and back, nor kept
    on the host when it is selected: no step follows); an earlier one on its kept weights, the last ones restored
    after: both are the saved model's SICK-R dev."""
    from csebench.cli import main
    from csebench.model.encoder import load_encoder
    from csebench.training.trainer import DevEvaluator, Trainer

    scores = iter(stsb)
    monkeypatch.setattr(DevEvaluator, "__call__", lambda self, enc: next(scores))
    kept = []  # at the end of training: whether the selected weights were held on the host
    real_score = Trainer.score_best_sickr
    monkeypatch.setattr(Trainer, "score_best_sickr", lambda self: kept.append(self._best_weights is not None) or real_score(self))
    write_corpus(tmp_path / "corpus.txt", n=32)
    write_mini_senteval(tmp_path / "se", pairs=24)
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=3, eval_steps=1, batch_size=8, log_steps=1,
                                                            learning_rate=5e-3))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    monkeypatch.undo()
    summary = json.loads((out / "train.json").read_text())
    assert summary["best_step"] == best_step and kept == [best_step < 3]
    dev = DevEvaluator(tmp_path / "se", 8, precision="fp32")
    assert summary["sickr_dev"] == pytest.approx(dev.sickr(load_encoder(out / "model")), abs=1e-3)


def test_dev_summary_leaves_out_scores_that_are_not_finite():
    from csebench.training.trainer import dev_summary

    assert dev_summary(80.0, 70.0) == {"sickr_dev": 70.0, "avg_sts_dev": 75.0}
    assert dev_summary(float("-inf"), 70.0) == {"sickr_dev": 70.0, "avg_sts_dev": None}
    assert dev_summary(80.0, float("nan")) == {"sickr_dev": None, "avg_sts_dev": None}


# ----------------------------------------------------------------------------- torch.compile


def test_compiled_training_pads_to_length_buckets_and_compiles_static_graphs(inputs, monkeypatch, caplog):
    """With ``training.compile`` every step's padded width is a multiple of compile_width_multiple and
    the model is compiled with static shapes: one graph per bucket. Dynamic lengths made inductor's
    steps 30x slower than eager on an H200 (BENCHMARKS.md, GPU section)."""
    import torch

    from csebench.cli import main
    from csebench.model.encoder import SentenceEncoder
    from csebench.training.trainer import _stack_views, compile_width_multiple

    assert [compile_width_multiple(n) for n in (32, 64, 65, 128, 512)] == [8, 8, 16, 16, 64]
    ids = torch.ones(2, 5, dtype=torch.long)
    stacked, mask, seg = _stack_views({"view1": (ids, ids), "view2": (ids[:, :3], ids[:, :3])}, 0, 8)
    assert stacked.shape == (4, 8) and mask[:, 5:].sum() == 0 and mask[2:, 3:].sum() == 0
    assert seg == {"view1": slice(0, 2), "view2": slice(2, 4)}

    real_compile, kwargs, widths = torch.compile, [], []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: kwargs.append(kw) or real_compile(m, backend="eager", **kw))
    real_forward = SentenceEncoder.forward
    monkeypatch.setattr(SentenceEncoder, "forward",
                        lambda self, input_ids, *a, **kw: widths.append(input_ids.shape[1]) or real_forward(self, input_ids, *a, **kw))
    cfg = write_config(inputs / "over.yaml", ci_training(max_steps=4, eval_steps=4, batch_size=8, log_steps=1,
                                                         compile=True))
    import logging

    with caplog.at_level(logging.INFO, logger="csebench"):
        assert main(["--threads", "1", *train_argv(inputs, inputs / "run", cfg)]) == 0
    assert kwargs == [{"dynamic": False}]
    train_widths = widths[:4]  # the dev evaluation (eval mode, uncompiled code path) comes after
    assert train_widths and all(w % 8 == 0 for w in train_widths), widths
    # the first step of each width builds its graph, and the log says what that cost
    said = [r.getMessage() for r in caplog.records if "compiled the graph of padded width" in r.getMessage()]
    assert len(said) == len(set(train_widths)) and all("training.compile: one graph per width, a multiple of 8" in x
                                                        for x in said), said


# ----------------------------------------------------------------------------- progress without a bar

PROGRESS = (r"simcse/seed1 step (\d+)/6 loss (\d+\.\d{4}) stsb_dev (?:(-?\d+\.\d\d) \(best -?\d+\.\d\d @ (\d+)\)|- \(first at step 3\)) "
            r"(\d[\d.e+-]*) steps/s (\d[\d.e+-]*) sentences/s ETA (\d+s|\d+m\d\ds|\d+h\d\dm)$")


def _progress(caplog) -> list[tuple]:
    import re

    lines = [r.getMessage() for r in caplog.records if r.name == "csebench.training.trainer" and " step " in r.getMessage()]
    out = []
    for line in lines:
        m = re.match(PROGRESS, line)
        assert m, line
        out.append((int(m[1]), float(m[2]), m[3], float(m[5]), float(m[6]), m[7]))
    return out


def test_no_progress_logs_a_line_every_log_steps_with_loss_dev_rate_and_eta(inputs, capsys, caplog):
    """`csebench train --no-progress`: one line at each logged step (step 1, then every log_steps) and each dev
    evaluation, saying the step, the loss of train_curve.csv, the last dev score, the rate and the time left;
    the record every log step writes (train_curve.csv) is as before; the last line reads as a sentence (the JSON
    summary is train.json's)."""
    import csv
    import logging

    from runhelpers import run_cli

    cfg = write_config(inputs / "over.yaml", ci_training(max_steps=6, log_steps=2, eval_steps=3, batch_size=8))
    with caplog.at_level(logging.INFO, logger="csebench"):
        rc, err = run_cli(capsys, train_argv(inputs, inputs / "run", cfg))
    assert rc == 0, err
    lines = _progress(caplog)
    assert [l[0] for l in lines] == [1, 2, 3, 4, 6]  # logged steps 1, 2, 4, 6 and the dev evaluations at 3 and 6
    curve = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(inputs / "run" / "train_curve.csv"))}
    assert sorted(curve) == [1, 2, 4, 6]
    for step, loss, dev, steps_s, sentences_s, eta in lines:
        if step in curve:
            assert loss == pytest.approx(curve[step], abs=1e-4)
        assert (dev is None) == (step < 3)  # no dev score before the first evaluation
        assert steps_s > 0 and sentences_s == pytest.approx(8 * steps_s, rel=0.01)  # batch 8
    dev = {int(r["step"]): float(r["stsb_dev"]) for r in csv.DictReader(open(inputs / "run" / "dev_curve.csv"))}
    assert [float(l[2]) for l in lines if l[2] is not None] == pytest.approx([dev[3], dev[3], dev[6]], abs=0.006)
    assert lines[-1][5] == "0s"
    done = [r.getMessage() for r in caplog.records if r.getMessage().startswith("done: ")]
    summary = json.loads((inputs / "run" / "train.json").read_text())  # the whole summary is in the file
    assert summary["steps"] == 6 and done == [f"done: simcse/seed1: 6 steps, STS-B dev {summary['stsb_dev_best']:.2f} "
                                              f"at step {summary['best_step']}; {inputs / 'run'} (model/, train.json)"]


@pytest.mark.parametrize("tty, steps", [(True, [3, 6]), (False, [1, 2, 3, 4, 6])])
def test_the_bar_shows_only_where_stderr_is_a_terminal(tmp_path, monkeypatch, caplog, tty, steps):
    """With the bar on (no --no-progress), a terminal gets the bar and a line at each dev evaluation; a log file
    or pipe (stderr not a TTY: Snakemake's, a cluster's) gets no bar, a line every log_steps instead."""
    import logging

    import csebench.model.encoder as encoder_mod
    import csebench.training.trainer as trainer_mod
    from runhelpers import train_tiny

    # the dev evaluation's encoding decides as training does (where the test's own stderr is a terminal, it drew
    # an encode bar of its own when the test ran alone)
    monkeypatch.setattr(trainer_mod, "_stderr_is_tty", lambda: tty)
    monkeypatch.setattr(encoder_mod, "stderr_is_tty", lambda: tty)
    bars = []
    real = trainer_mod.Trainer.run

    def run(self):
        import tqdm

        orig = tqdm.tqdm.__init__

        def init(bar, *a, **kw):
            if kw.get("unit") == "step":  # the training bar (an encoding's bar is another test's)
                bars.append(not kw.get("disable"))
            return orig(bar, *a, **kw)

        monkeypatch.setattr(tqdm.tqdm, "__init__", init)
        self.show_progress = True
        return real(self)

    monkeypatch.setattr(trainer_mod.Trainer, "run", run)
    with caplog.at_level(logging.INFO, logger="csebench"):
        train_tiny(tmp_path, {}, steps=6, log_steps=2, eval_steps=3)
    assert bars == [tty] and [l[0] for l in _progress(caplog)] == steps


def test_the_progress_line_s_loss_keeps_four_significant_digits():
    """A loss near zero (an easy corpus, a late step) read "loss 0.0000" in a piped log: now 2.000e-04."""
    from csebench.training.trainer import loss_text

    assert [loss_text(x) for x in (3.17934, 0.48213, 0.1, 0.0123456, 2e-4, 0.0, float("nan"))] == [
        "3.1793", "0.4821", "0.1000", "1.235e-02", "2.000e-04", "0.0000", "nan"]


def test_an_encoding_draws_a_bar_only_on_a_terminal_else_logs_lines(monkeypatch, caplog, tiny_encoder):
    """eval-sts, embed and the dev scores encode with a progress bar where stderr is a terminal, as training does; into
    a file or a pipe they write a log line at most every ENCODE_LOG_SECONDS instead (here 0: one per batch)."""
    import logging

    import tqdm

    import csebench.model.encoder as encoder_mod

    enc = tiny_encoder("cls")
    bars = []
    orig = tqdm.tqdm.__init__
    monkeypatch.setattr(tqdm.tqdm, "__init__", lambda bar, *a, **kw: (bars.append(kw.get("desc")), orig(bar, *a, **kw))[1])
    monkeypatch.setattr(encoder_mod, "ENCODE_LOG_SECONDS", 0.0)
    sentences = [f"sentence number {i}" for i in range(10)]
    for tty in (True, False):
        monkeypatch.setattr(encoder_mod, "stderr_is_tty", lambda: tty)
        with caplog.at_level(logging.INFO, logger="csebench.model.encoder"):
            caplog.clear()
            enc.encode(sentences, batch_size=4, show_progress=True)
        lines = [r.getMessage().rsplit(" in ", 1)[0] for r in caplog.records if r.getMessage().startswith("encode: ")]
        assert (bars, lines) == ((["encode"], []) if tty else (["encode"], ["encode: 4 of 10 sentences",
                                                                           "encode: 8 of 10 sentences",
                                                                           "encode: 10 of 10 sentences"]))


def test_duration_and_rate_of_the_progress_line():
    from csebench.training.trainer import _duration

    assert [_duration(s) for s in (0.4, 5, 59.6, 61, 123, 3599, 3600, 3725)] == ["0s", "5s", "1m00s", "1m01s",
                                                                                "2m03s", "59m59s", "1h00m", "1h02m"]


# ----------------------------------------------------------------------------- training.dev_metric (what selects)


@pytest.mark.parametrize("metric,best_step", [(None, 2), ("stsb", 2), ("avg_sts", 3)])
def test_dev_metric_selects_on_stsb_dev_or_on_its_mean_with_sickr_dev(tmp_path, monkeypatch, metric, best_step):
    """STS-B dev 50, 60, 55, 52 and SICK-R dev 50, 40, 70, 45 at steps 1-4: STS-B dev alone selects step 2 (the
    default, unchanged); their mean (DCLR's run.sh: --metric_for_best_model avg_sts) 50, 50, 62.5, 48.5 selects
    step 3, and train.json holds that checkpoint's STS-B dev, SICK-R dev and mean; dev_curve.csv all three."""
    from csebench.cli import main
    from csebench.training.trainer import DevEvaluator

    stsb, sickr = iter([50.0, 60.0, 55.0, 52.0]), iter([50.0, 40.0, 70.0, 45.0])
    monkeypatch.setattr(DevEvaluator, "__call__", lambda self, enc: next(stsb))
    monkeypatch.setattr(DevEvaluator, "sickr", lambda self, enc: next(sickr))
    write_corpus(tmp_path / "corpus.txt", n=32)
    write_mini_senteval(tmp_path / "se", pairs=24)
    extra = {} if metric is None else {"dev_metric": metric}
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=4, eval_steps=1, batch_size=8, log_steps=1, **extra))
    out = tmp_path / "run"
    assert main(["--threads", "1", *train_argv(tmp_path, out, cfg)]) == 0
    summary = json.loads((out / "train.json").read_text())
    curve = (out / "dev_curve.csv").read_text().splitlines()
    assert summary["best_step"] == best_step
    if metric == "avg_sts":
        assert curve[0] == "step,stsb_dev,sickr_dev,avg_sts_dev" and curve[3] == "3,55.0,70.0,62.5"
        assert (summary["stsb_dev_best"], summary["sickr_dev"], summary["avg_sts_dev"]) == (55.0, 70.0, 62.5)
        assert summary["dev_metric"] == "avg_sts"
    else:  # SICK-R dev scored once, for the selected checkpoint: the first value drawn
        assert curve[0] == "step,stsb_dev" and len(curve) == 5
        assert (summary["stsb_dev_best"], summary["sickr_dev"], summary["avg_sts_dev"]) == (60.0, 50.0, 55.0)
        assert "dev_metric" not in summary


def test_dev_metric_is_checked_and_its_default_keeps_run_keys():
    from csebench.study.params import TrainingConfig, load_params
    from csebench.study.resolve import resolve_run
    from csebench.core.errors import ConfigError
    from csebench.core.schema import from_dict
    from runhelpers import PARAMS

    for bad, msg in (({"dev_metric": "sickr"}, "dev_metric: unknown 'sickr'"),
                     ({"dev_metric": "avg_sts", "dev_set": "mine"}, "needs STS-B and SICK-R dev")):
        with pytest.raises(ConfigError, match=msg) as e:
            from_dict(TrainingConfig, bad, "training")
        assert "\n" not in str(e.value)
    cfg = resolve_run(load_params(PARAMS), "ci", "simcse", 1)
    before = cfg.key()
    cfg.training.dev_metric = "stsb"  # the default written out: the same selection, the same key
    assert cfg.key() == before
    cfg.training.dev_metric = "avg_sts"
    assert cfg.key() != before


def test_non_finite_loss_names_the_terms_whose_parts_were_not_finite_and_their_package(inputs, capsys, monkeypatch,
                                                                                        tmp_path):
    """A term's loss part that is NaN stops training in the one line, which names the term, and the package and
    version of a term that is not csebench's own (the contrastive part is named when it is the one)."""
    from csebench.objectives import TERMS
    from test_plugins import TERM, fake_dist

    monkeypatch.setattr(TERMS, "_loaded", {})
    monkeypatch.setattr(TERMS, "_plugins", None)
    nan_term = TERM.replace("return self.settings.weight * ctx.z1.float().mean(0).pow(2).sum()",
                            "return ctx.z1.float().sum() * float('nan')")
    fake_dist(tmp_path / "site", "nan-terms", {"csebench.objectives": {"centre": "nan_terms_t.term:Centre"}},
              {"nan_terms_t/__init__.py": "", "nan_terms_t/term.py": nan_term})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cfg = write_config(inputs / "over.yaml", {**ci_training(max_steps=4, batch_size=8, log_steps=1),
                                              "methods": {"simcse": {"objectives": {"centre": {}}}}})
    assert_fails(capsys, train_argv(inputs, inputs / "run", cfg),
                 "loss is nan at step 1 of simcse/seed1 (not finite at step 1: term centre (package nan-terms 0.1.0)); "
                 "no checkpoint was written yet")


def test_without_a_bar_a_line_comes_at_least_every_progress_seconds(tmp_path, monkeypatch, caplog):
    """A log without a bar is not silent for long: a line at least every PROGRESS_SECONDS (here 0: every step),
    whatever log_steps is, each with the last loss read."""
    import logging

    import csebench.training.trainer as trainer_mod
    from runhelpers import train_tiny

    monkeypatch.setattr(trainer_mod, "_stderr_is_tty", lambda: False)
    monkeypatch.setattr(trainer_mod, "PROGRESS_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="csebench"):
        train_tiny(tmp_path, {}, steps=6, log_steps=4, eval_steps=3)
    lines = _progress(caplog)
    steps = [l[0] for l in lines]
    assert set(steps) == {1, 2, 3, 4, 5, 6}, steps
    assert lines[1][1] == lines[0][1]  # step 2 is not read: it says step 1's loss

"""Resume after SIGKILL, determinism, NaN stop.

Four `csebench train` subprocesses on the ci suite (tiny random BERT, 96 sentences, batch 8,
12 steps, dev every 2 steps, checkpoint every 3; SimCSE + IS-CSE + GS-InfoNCE): a reference run, a second identical run
(determinism), a run killed with SIGKILL once a checkpoint exists, and that run's rerun with
the same command. The rerun must resume (train_timing.json says from which step) and end with
byte-identical metrics files and identical weights.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from csebench.training.checkpoint import read_state
from runhelpers import ci_training, fail_writing_train_json, popen_train, train_argv, write_config, write_corpus, write_mini_senteval

METRIC_FILES = ["train.json", "train_curve.csv", "dev_curve.csv"]
OBJECTIVES = {"instance_smoothing": {"buffer_size": 24, "neighbors": 4}, "gaussian_negatives": {}}
TRAINING = dict(max_steps=12, eval_steps=2, checkpoint_steps=3, batch_size=8, log_steps=1,
                learning_rate=1.0e-4, eval_batch_size=64)


def _wait(proc, log: Path, timeout: float = 240) -> None:
    try:
        rc = proc.wait(timeout=timeout)
    except Exception:
        proc.kill()
        raise
    assert rc == 0, log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    write_corpus(tmp / "corpus.txt")
    write_mini_senteval(tmp / "se")
    # with IS-CSE (its buffer must survive the kill) and GS-InfoNCE (its per-step draws must repeat)
    cfg = write_config(tmp / "over.yaml", {**ci_training(**TRAINING), "methods": {"simcse": {"objectives": OBJECTIVES}}})
    dirs = {k: tmp / k for k in ("reference", "again", "killed")}

    # Phase 1: reference and the run to be killed, side by side.
    ref = popen_train(train_argv(tmp, dirs["reference"], cfg), tmp / "reference.log")
    victim = popen_train(train_argv(tmp, dirs["killed"], cfg), tmp / "killed.log")
    ckpt = dirs["killed"] / "checkpoint" / "manifest.json"
    deadline = time.time() + 240
    while not ckpt.exists() and victim.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert victim.poll() is None, "the run finished (or failed) before a checkpoint appeared:\n" + \
        (tmp / "killed.log").read_text(errors="replace")[-3000:]
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_state = {"train_json": (dirs["killed"] / "train.json").exists(),
                    "ckpt_step": read_state(ckpt.parent)["state"]["step"]}

    # Phase 2: the same command again (resumes), and an independent repeat of the reference.
    again = popen_train(train_argv(tmp, dirs["again"], cfg), tmp / "again.log")
    resumed = popen_train(train_argv(tmp, dirs["killed"], cfg), tmp / "resumed.log")
    _wait(ref, tmp / "reference.log")
    _wait(again, tmp / "again.log")
    _wait(resumed, tmp / "resumed.log")
    return dirs, killed_state


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    w = load_file(run_dir / "model" / "model.safetensors")
    w.update({f"head.{k}": v for k, v in load_file(run_dir / "model" / "mlp_head.safetensors").items()})
    return w


def _same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), f"weights differ: {k}"


@pytest.mark.slow(seconds=3)
def test_killed_run_resumes_to_identical_results(runs):
    dirs, killed = runs
    assert not killed["train_json"], "the victim was killed after it had finished"
    assert 3 <= killed["ckpt_step"] < 12
    timing = json.loads((dirs["killed"] / "train_timing.json").read_text())
    assert timing["resumed_from_step"] == killed["ckpt_step"], timing  # it resumed, it did not start over
    assert timing["steps_this_attempt"] == 12 - killed["ckpt_step"]
    for name in METRIC_FILES:
        assert (dirs["killed"] / name).read_bytes() == (dirs["reference"] / name).read_bytes(), name
    _same_weights(dirs["killed"], dirs["reference"])
    # the finished run leaves no checkpoint, partial model or temporaries behind
    leftovers = sorted(p.name for p in dirs["killed"].iterdir())
    assert leftovers == ["dev_curve.csv", "model", "train.json", "train_curve.csv", "train_timing.json"], leftovers


@pytest.mark.slow(seconds=1)
def test_same_seed_gives_byte_identical_metrics(runs):
    dirs, _ = runs
    for name in METRIC_FILES:
        assert (dirs["again"] / name).read_bytes() == (dirs["reference"] / name).read_bytes(), name
    _same_weights(dirs["again"], dirs["reference"])
    summary = json.loads((dirs["reference"] / "train.json").read_text())
    assert summary["steps"] == 12 and "train_seconds" not in summary
    assert len((dirs["reference"] / "dev_curve.csv").read_text().splitlines()) == 1 + 6
    curve = (dirs["reference"] / "train_curve.csv").read_text().splitlines()
    active = curve[0].split(",").index("instance_smoothing/active")
    assert curve[-1].split(",")[active] == "1.0"  # the IS-CSE loss was on by the end


@pytest.mark.slow(seconds=1)
def test_failure_while_writing_outputs_leaves_nothing_finished_and_rerun_resumes(tmp_path, capsys, monkeypatch):
    """A failure at the very end (disk full while writing train.json) leaves no train.json, curves
    or model; the checkpoint survives and the same command then resumes and completes."""
    from csebench import cli

    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=4, eval_steps=2, checkpoint_steps=2, batch_size=8,
                                                           log_steps=1, eval_batch_size=64))
    out = tmp_path / "run"
    fail_writing_train_json(monkeypatch)
    assert cli.main(train_argv(tmp_path, out, cfg)) == 2  # one line: cannot write .../train.json: No space left on device
    left = sorted(p.name for p in out.iterdir())
    assert left == ["checkpoint"], left
    monkeypatch.undo()
    assert cli.main(train_argv(tmp_path, out, cfg)) == 0
    assert json.loads((out / "train_timing.json").read_text())["resumed_from_step"] == 2
    assert sorted(p.name for p in out.iterdir()) == ["dev_curve.csv", "model", "train.json", "train_curve.csv",
                                                     "train_timing.json"]


@pytest.mark.slow(seconds=2)
def test_half_swapped_checkpoint_stale_files_and_changed_config(tmp_path, monkeypatch, caplog):
    """Kill between the two renames of the checkpoint swap (only .checkpoint.old left), plus stale
    temporaries and an old train.json: the rerun resumes from .checkpoint.old and cleans up. A
    changed hyperparameter makes the checkpoint foreign: the run starts over, with a warning."""
    import math

    import csebench.objectives.compose as objectives  # where Objective looks info_nce up
    from csebench import cli

    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    training = dict(max_steps=4, eval_steps=2, checkpoint_steps=2, batch_size=8, log_steps=1, eval_batch_size=64)
    cfg = write_config(tmp_path / "over.yaml", ci_training(**training))
    out = tmp_path / "run"
    real = objectives.info_nce
    monkeypatch.setattr(objectives, "info_nce", lambda ctx, *a: real(ctx, *a) * (math.nan if ctx.step >= 2 else 1))
    assert cli.main(train_argv(tmp_path, out, cfg)) == 2  # stops at step 3, checkpoint of step 2 kept
    monkeypatch.setattr(objectives, "info_nce", real)
    (out / "checkpoint").rename(out / ".checkpoint.old")
    (out / ".best_model.partial.x1y2.tmp").mkdir()
    (out / "train.json").write_text("{}")  # a finished run: kept, unless --force
    assert cli.main(train_argv(tmp_path, out, cfg)) == 2
    assert (out / "train.json").read_text() == "{}" and (out / ".checkpoint.old").is_dir()
    assert cli.main(train_argv(tmp_path, out, cfg) + ["--force"]) == 0
    assert json.loads((out / "train_timing.json").read_text())["resumed_from_step"] == 2
    assert json.loads((out / "train.json").read_text())["steps"] == 4
    assert sorted(p.name for p in out.iterdir()) == ["dev_curve.csv", "model", "train.json", "train_curve.csv",
                                                     "train_timing.json"]

    # a checkpoint written with another learning rate is not resumed
    out2 = tmp_path / "run2"
    monkeypatch.setattr(objectives, "info_nce", lambda ctx, *a: real(ctx, *a) * (math.nan if ctx.step >= 2 else 1))
    assert cli.main(train_argv(tmp_path, out2, cfg)) == 2
    monkeypatch.setattr(objectives, "info_nce", real)
    cfg2 = write_config(tmp_path / "over2.yaml", ci_training(**{**training, "learning_rate": 5e-5}))
    with caplog.at_level("WARNING", logger="csebench.training.trainer"):
        assert cli.main(train_argv(tmp_path, out2, cfg2)) == 0
    assert "different configuration" in caplog.text
    assert json.loads((out2 / "train_timing.json").read_text())["resumed_from_step"] is None

"""`csebench rehearse` passes a run only when each objective term of its method fired in the rehearsed steps: its
train.json records the first step at which the term changed the loss, and the same run without the term gives other
losses. A term that waits (IS-CSE's buffer, 1,024 rows by default, never full in 2 steps of 8 sentences) is given
its rehearsal-scale settings (a buffer of one batch); made to wait anyway, it fails the run in one line that says
why. Runs of the ci suite (tiny random BERT): seconds each."""

from __future__ import annotations

import json
import logging
import re

import pytest
import torch

from runhelpers import write_config


def _rehearse_simcse_with(tmp_path, capsys, caplog, objectives: dict):
    cfg = write_config(tmp_path / "over.yaml", {"methods": {"simcse": {"objectives": objectives}}})
    out = tmp_path / "r"
    from csebench import cli

    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="csebench"):
        rc = cli.main(["--threads", "1", "rehearse", "--config", str(cfg), "--suites", "ci", "--only", "ci/simcse",
                       "--out", str(out), "--keep-models"])
    said = capsys.readouterr()
    lines = [r.getMessage() for r in caplog.records if r.name == "csebench.workflow.rehearse"]
    return rc, said.out + said.err, lines, out


@pytest.mark.slow(seconds=4)
def test_a_waiting_term_fires_at_rehearsal_scale_and_the_run_says_so(tmp_path, capsys, caplog):
    rc, err, lines, out = _rehearse_simcse_with(tmp_path, capsys, caplog, {"instance_smoothing": {"buffer_size": 1024}})
    assert rc == 0, err
    assert re.fullmatch(r"\[1/1\] ci/simcse seed 1 \(random\): passed in \d+\.\d s; terms fired: instance_smoothing at "
                        r"step 2 \(extra loss\)", lines[0]), lines
    assert "objective terms shown to fire (a loss part or changed negatives, and other losses without them): " \
           "instance_smoothing in 1 run" in err
    params = (out / "params.yaml").read_text(encoding="utf-8")  # made small in the rehearsal's params only
    assert re.search(r"instance_smoothing:\n\s+buffer_size: 8\n\s+neighbors: 7", params), params
    (train,) = out.glob("results/runs/*/seed1/train.json")
    assert json.loads(train.read_text())["terms_fired"] == {"instance_smoothing": {"step": 2, "how": ["extra loss"]}}


@pytest.mark.slow(seconds=1)
def test_a_term_made_to_wait_fails_the_run_with_its_reason(tmp_path, capsys, caplog, monkeypatch):
    from csebench.objectives.smoothing import InstanceSmoothing

    monkeypatch.setattr(InstanceSmoothing, "at_rehearsal_scale", classmethod(lambda cls, *a: {}))
    rc, err, lines, _ = _rehearse_simcse_with(tmp_path, capsys, caplog, {"instance_smoothing": {"buffer_size": 1024}})
    assert rc == 2
    assert re.fullmatch(r"\[1/1\] ci/simcse seed 1 \(random\): FAILED in \d+\.\d s: TrainingError: instance_smoothing "
                        r"never ran in 2 steps of 8 sentences: its buffer of 1024 rows held 16 \(it acts from 1024\)",
                        lines[0]), lines


@pytest.mark.slow(seconds=1)
def test_a_term_whose_output_changes_nothing_fails_the_run(tmp_path, capsys, caplog, monkeypatch):
    """Extra negative columns at -inf: the term hands something over each step, and no loss moves."""
    from csebench.objectives.gaussian import GaussianNegatives

    monkeypatch.setattr(GaussianNegatives, "extra_negatives",
                        lambda self, ctx: torch.full((ctx.z1.shape[0], 1), float("-inf"), device=ctx.z1.device))
    rc, err, lines, _ = _rehearse_simcse_with(tmp_path, capsys, caplog, {"gaussian_negatives": {}})
    assert rc == 2
    assert re.fullmatch(r"\[1/1\] ci/simcse seed 1 \(random\): FAILED in \d+\.\d s: TrainingError: gaussian_negatives "
                        r"changed nothing: the run's losses at its 2 steps \([\d., ]+\) and weights equal those of the "
                        r"same run without it", lines[0]), lines

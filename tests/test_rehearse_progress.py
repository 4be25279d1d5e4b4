"""`csebench rehearse` says each run as it passes or fails, one short line each (the logger csebench.workflow.rehearse,
which the command's console shows), not only in its closing report; a failure's traceback goes to
rehearse.log only."""

from __future__ import annotations

import logging
import re

import pytest

from runhelpers import run_cli


@pytest.mark.slow(seconds=3)
def test_rehearse_says_each_run_as_it_passes_or_fails(tmp_path, capsys, caplog, monkeypatch):
    from csebench.workflow import rehearse

    real = rehearse.Rehearsal.train
    seen_before_second: list[str] = []

    def train(self, suite, run, seed, resume=False):
        if run == "distillcse":  # the second run: what was said of the first is said already
            seen_before_second.extend(r.getMessage() for r in caplog.records if r.name == "csebench.workflow.rehearse")
            raise RuntimeError("the student broke\nsecond line of its message")
        return real(self, suite, run, seed, resume)

    monkeypatch.setattr(rehearse.Rehearsal, "train", train)
    out = tmp_path / "r"
    with caplog.at_level(logging.INFO, logger="csebench"):
        rc, err = run_cli(capsys, ["--threads", "1", "rehearse", "--suites", "ci", "--limit", "2", "--out", str(out)])
    assert rc == 2 and err.strip().endswith(f"1 rehearsal(s) failed (listed above; {out / 'rehearse.log'} has each traceback)")
    lines = [r.getMessage() for r in caplog.records if r.name == "csebench.workflow.rehearse"]
    assert re.fullmatch(r"\[1/2\] ci/simcse seed 1 \(random\): passed in \d+\.\d s", lines[0]), lines
    assert seen_before_second == lines[:1]  # said as the first run passed, before the second began
    assert re.fullmatch(r"\[2/2\] ci/distillcse seed 1 \(random\): FAILED in \d+\.\d s: RuntimeError: the student broke",
                        lines[1]), lines
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    log = (out / "rehearse.log").read_text(encoding="utf-8")
    assert "passed in" in log and "Traceback (most recent call last)" in log and "second line of its message" in log
    # caplog's handler is one of the root's, as the console's is: the command's filter kept the traceback from it
    assert not [r for r in caplog.records if r.name.startswith("csebench.workflow.rehearse.")]

"""Nothing finished is lost, nothing half-made looks finished.

A finished run is refused without --force and kept until a forced rerun completes; one process per
run folder (lock with pid and host, stale locks taken over); a checkpoint that does not match its
manifest is not resumed; a report or paper item appears whole or not at all, and Ctrl-C prints one
line and gives 130 only while something is unfinished; every written file follows the umask.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from csebench import cli
from runhelpers import (ROOT, STS_FAST, assert_fails, ci_training, copy_run, env, fail_writing_train_json,
                        needs_pipeline, run_cli, train_argv, write_config, write_corpus, write_mini_senteval)
from test_report import suite_config, sts_scores, write_run

TRAINING = dict(max_steps=4, eval_steps=2, checkpoint_steps=2, batch_size=8, log_steps=1, eval_batch_size=64)
FINISHED = ["dev_curve.csv", "model", "train.json", "train_curve.csv", "train_timing.json"]


@pytest.fixture()
def inputs(tmp_path):
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    return tmp_path


def _snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _poison_from_step(monkeypatch, step: int) -> None:
    import csebench.objectives.compose as objectives  # where Objective looks info_nce up

    real = objectives.info_nce
    monkeypatch.setattr(objectives, "info_nce", lambda ctx, *args, **kwargs: real(ctx, *args, **kwargs) * (math.nan if ctx.step >= step else 1))


# ----------------------------------------------------------------------------- a finished run


def test_finished_run_is_refused_without_force_and_kept_until_a_forced_rerun_completes(inputs, capsys, monkeypatch):
    out = inputs / "run"
    assert run_cli(capsys, train_argv(inputs, out, write_config(inputs / "a.yaml", ci_training(**TRAINING))))[0] == 0
    finished = _snapshot(out)

    # the same command again: refused, nothing touched
    line = assert_fails(capsys, train_argv(inputs, out, inputs / "a.yaml"),
                        f"run folder {out} holds a finished run (train.json); pass --force to train it again")
    assert "choose another --out" in line and _snapshot(out) == finished

    # --force with other settings, failing at step 3: the finished run is still whole (and a checkpoint waits)
    cfg_b = write_config(inputs / "b.yaml", ci_training(**{**TRAINING, "learning_rate": 5e-5}))
    _poison_from_step(monkeypatch, 2)
    assert run_cli(capsys, train_argv(inputs, out, cfg_b) + ["--force"])[0] == 2
    monkeypatch.undo()
    # the new attempt's work files beside it: its checkpoint and its best model so far
    assert {k: v for k, v in _snapshot(out).items() if not k.startswith(("checkpoint/", "best_model.partial/"))} == finished
    assert (out / "checkpoint" / "manifest.json").is_file()

    # --force again: resumes the new run and only now replaces the finished one
    rc, err = run_cli(capsys, train_argv(inputs, out, cfg_b) + ["--force"])
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == FINISHED
    assert json.loads((out / "train_timing.json").read_text())["resumed_from_step"] == 2
    assert json.loads((out / "model" / "training_config.json").read_text())["training"]["learning_rate"] == 5e-5
    assert (out / "model" / "model.safetensors").read_bytes() != finished["model/model.safetensors"]


def test_a_failure_while_replacing_leaves_the_finished_run(inputs, capsys, monkeypatch):
    out = inputs / "run"
    cfg = write_config(inputs / "a.yaml", ci_training(**TRAINING))
    assert run_cli(capsys, train_argv(inputs, out, cfg))[0] == 0
    finished = _snapshot(out)
    fail_writing_train_json(monkeypatch)
    rc, err = run_cli(capsys, train_argv(inputs, out, cfg) + ["--force"])  # one line, no OSError traceback
    assert rc == 2 and err == (f"csebench train: error: cannot write {out / 'train.json'}: No space left on device (errno "
                               "ENOSPC); nothing finished was replaced, the temporaries are removed\n")
    # curves, model, timing: none was swapped in; the new run's checkpoint waits for a rerun
    assert {k: v for k, v in _snapshot(out).items() if not k.startswith("checkpoint/")} == finished
    assert (out / "checkpoint" / "manifest.json").is_file()


# ----------------------------------------------------------------------------- the run-folder lock


def _hold_lock(run: Path) -> subprocess.Popen:
    code = ("import sys, time\nfrom csebench.training.runlock import run_lock\n"
            "with run_lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run)], cwd=ROOT, env=env(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_process_on_a_run_folder_exits_2_naming_the_owner_then_a_stale_lock_is_taken_over(inputs, capsys, caplog):
    out = inputs / "run"
    owner = _hold_lock(out)
    try:
        assert_fails(capsys, train_argv(inputs, out, None),
                     f"run folder {out} is in use by pid {owner.pid} on host {socket.gethostname()}",
                     "wait for it to end or stop it")
        assert not (out / "train.json").exists()
    finally:
        owner.kill()  # killed: its lock file stays behind, with its pid
        owner.wait()
    lock = json.loads((out / ".lock").read_text())
    assert lock["pid"] == owner.pid and lock["host"] == socket.gethostname()
    cfg = write_config(inputs / "a.yaml", ci_training(**TRAINING))
    with caplog.at_level(logging.WARNING, logger="csebench.training.runlock"):
        rc, err = run_cli(capsys, train_argv(inputs, out, cfg))
    assert rc == 0, err
    assert f"taking over the stale lock of pid {owner.pid} on host {socket.gethostname()}" in caplog.text
    assert sorted(p.name for p in out.iterdir()) == FINISHED  # the lock is gone with its owner


def test_lock_in_the_same_process_and_released_after_an_error(tmp_path):
    from csebench.core.errors import TrainingError
    from csebench.training.runlock import run_lock

    with run_lock(tmp_path / "run"):
        with pytest.raises(TrainingError, match=f"in use by pid {os.getpid()}"):
            with run_lock(tmp_path / "run"):
                pass
    with pytest.raises(RuntimeError):
        with run_lock(tmp_path / "run"):
            raise RuntimeError("boom")
    assert not (tmp_path / "run" / ".lock").exists()
    with run_lock(tmp_path / "run"):  # free again
        pass


# ----------------------------------------------------------------------------- checkpoint manifest


@pytest.mark.parametrize("damage,problem", [
    ("delete_best", "does not match its manifest.json: best_model/model.safetensors is missing"),
    ("edit_state", "does not match its manifest.json: tensors.safetensors has changed"),
    ("no_manifest", "has no manifest.json"),
])
def test_checkpoint_that_does_not_match_its_manifest_starts_over(inputs, capsys, monkeypatch, caplog, damage, problem):
    out = inputs / "run"
    cfg = write_config(inputs / "a.yaml", ci_training(**TRAINING))
    _poison_from_step(monkeypatch, 2)
    assert run_cli(capsys, train_argv(inputs, out, cfg))[0] == 2  # stops at step 3, checkpoint of step 2 kept
    monkeypatch.undo()
    ckpt = out / "checkpoint"
    if damage == "delete_best":
        (ckpt / "best_model" / "model.safetensors").unlink()
    elif damage == "edit_state":
        data = bytearray((ckpt / "tensors.safetensors").read_bytes())
        data[-1] ^= 0xFF
        (ckpt / "tensors.safetensors").write_bytes(bytes(data))
    else:
        (ckpt / "manifest.json").unlink()
    with caplog.at_level(logging.WARNING, logger="csebench.training.trainer"):
        rc, err = run_cli(capsys, train_argv(inputs, out, cfg))
    assert rc == 0, err
    assert f"checkpoint {ckpt} {problem}; starting over" in caplog.text
    assert json.loads((out / "train_timing.json").read_text())["resumed_from_step"] is None
    assert (out / "model" / "model.safetensors").is_file()


def test_checkpoint_state_round_trips_without_pickle(tmp_path):
    import numpy as np
    import torch

    from csebench.training import checkpoint

    base = torch.arange(6.0)
    state = {"optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": base[:3]}}, "param_groups": [
        {"betas": (0.9, 0.999), "params": [0], "foreach": None}]}, "shared": base, "view": base[2:4],
        "best": -math.inf, "rows": [[1, math.nan]], "numpy": ("MT19937", np.arange(4, dtype=np.uint32), 2),
        "__odd": 1}
    folder = tmp_path / "ckpt"
    folder.mkdir()
    checkpoint.save(folder, state)
    assert checkpoint.verify(folder) is None
    back = checkpoint.load(folder)
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert list(back["optimizer"]["state"]) == [0] and torch.equal(back["optimizer"]["state"][0]["exp_avg"], base[:3])
    assert torch.equal(back["view"], base[2:4]) and back["best"] == -math.inf and math.isnan(back["rows"][0][1])
    assert back["numpy"][0] == "MT19937" and back["numpy"][1].dtype == np.uint32 and back["__odd"] == 1
    assert checkpoint.read_state(folder)["best"] == -math.inf


# ----------------------------------------------------------------------------- report, paper items, Ctrl-C


def _report_argv(root: Path) -> list[str]:
    """`results render` of suite s (a --config file adds it to params.yaml): two runs with results."""
    for name, method, base in (("simcse", "simcse", 70.0), ("iscse", "iscse", 71.0)):
        write_run(root / "results", "s", name, 1, method, "bert-base", sts=sts_scores(base), curves=True)
    cfg = suite_config(root / "suite.yaml", "s", {"simcse": ("simcse", "bert-base"), "iscse": ("iscse", "bert-base")})
    return ["results", "render", "--params", str(ROOT / "params.yaml"), "--config", str(cfg), "--item", "suite/s",
            "--results", str(root / "results"), "--n-boot", "50"]


def _report_outputs(root: Path) -> dict[str, bytes]:
    suite = root / "results" / "s"
    return {str(p.relative_to(suite)): p.read_bytes() for p in sorted(suite.rglob("*"))
            if p.is_file() and "runs" not in p.parts}


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_report_interrupted_leaves_no_new_file_and_prints_one_line(tmp_path, capsys, monkeypatch):
    import csebench.results.renderers.suite as rp

    argv = _report_argv(tmp_path)
    monkeypatch.setattr(rp, "plot_curves", _interrupt)  # the tables are written by then
    rc, err = run_cli(capsys, argv)
    assert (rc, err) == (130, "csebench results: interrupted\n")
    assert _report_outputs(tmp_path) == {}
    monkeypatch.undo()
    assert run_cli(capsys, argv)[0] == 0
    before = _report_outputs(tmp_path)
    assert {"README.md", "tables/sts.md", "figures/training_curves.png"} <= set(before)
    monkeypatch.setattr(rp, "suite_readme", _interrupt)  # the last output
    assert run_cli(capsys, argv)[0] == 130
    assert _report_outputs(tmp_path) == before  # the previous report, whole


def test_paper_item_interrupted_leaves_no_file(tmp_path, capsys, monkeypatch):
    import csebench.results.renderers.grid as grid

    out = tmp_path / "papers" / "simcse"
    monkeypatch.setattr(grid, "write_csv", _interrupt)  # after the Markdown table
    rc, err = run_cli(capsys, ["results", "render", "--item", "simcse/table-main", "--results", str(tmp_path / "results"),
                               "--out-dir", str(out)])
    assert (rc, err) == (130, "csebench results: interrupted\n")
    assert not out.exists() or not any(out.iterdir())
    monkeypatch.undo()
    assert run_cli(capsys, ["results", "render", "--item", "simcse/table-main", "--results", str(tmp_path / "results"),
                            "--out-dir", str(out)])[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["table-main.csv", "table-main.md", "table-main.tex"]


def test_interrupt_while_importing_prints_one_line(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_setup_logging", _interrupt)  # imports transformers: the slowest start-up step
    rc, err = run_cli(capsys, ["plan", "--suites", "ci"])
    assert (rc, err) == (130, "csebench plan: interrupted\n")


def test_interrupt_after_everything_was_written_is_not_an_interruption(tmp_path):
    """Ctrl-C once the command has written and logged everything: exit 0, no traceback (the program in a process of
    its own, forked from this one)."""
    import signal
    import time

    from runhelpers import run_program

    argv = _report_argv(tmp_path)

    def program():
        rc = cli.main()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        return rc

    proc = run_program(program, ["csebench", *argv], env=env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr
    assert "suite/s: results/s/tables/sts.md" in proc.stderr.replace(str(tmp_path) + "/", "") and (tmp_path / "results/s/README.md").is_file()


# ----------------------------------------------------------------------------- permissions


def test_every_written_file_follows_the_umask(inputs, capsys, monkeypatch):
    import csebench.core.io as io

    old = os.umask(0o002)
    monkeypatch.setattr(io, "_UMASK", 0o002)
    try:
        out = inputs / "results" / "s" / "runs" / "simcse" / "seed1"
        cfg = write_config(inputs / "a.yaml", ci_training(**TRAINING))
        assert run_cli(capsys, train_argv(inputs, out, cfg, cache=inputs / "cache"))[0] == 0
        argv = _report_argv(inputs)
        assert run_cli(capsys, argv)[0] == 0
    finally:
        os.umask(old)
    modes = {str(p.relative_to(inputs)): stat.S_IMODE(p.stat().st_mode)
             for p in [*(inputs / "results").rglob("*"), *(inputs / "cache").rglob("*")]}
    assert "results/s/runs/simcse/seed1/model/model.safetensors" in modes
    wrong = {p: oct(m) for p, m in modes.items() if m != (0o775 if (inputs / p).is_dir() else 0o664)}
    assert not wrong, wrong


# ----------------------------------------------------------------------------- Snakemake reruns


@pytest.mark.slow(seconds=3)
@needs_pipeline
def test_snakemake_rerun_of_a_finished_training_job(tmp_path, ci_build, warm_jobs):
    """Snakemake removes a job's declared outputs before it runs it again, so `train` sees no finished
    run there and needs no --force: a forced rerun (as after a hyperparameter change) completes. (A copy of the
    session's build of the ci suite.)"""
    from csebench.study.jobs import run_folder
    from csebench.study.params import load_params
    from runhelpers import CI_BUILD, run_snakemake

    assert ci_build.returncode == 0, ci_build.stderr[-4000:]
    proj = ci_build.copy(tmp_path / "proj")
    target = "results/ci/runs/simcse/seed1/train.json"
    before = (proj / target).stat().st_mtime_ns
    again = run_snakemake([*CI_BUILD, "plan=false", "warm_start=false", "--forcerun", "train", "--", target], cwd=proj,
                          env={**ci_build.env, **warm_jobs})
    assert again.returncode == 0, again.stderr[-3000:]
    # the suite's folder is a view of the run's own (docs/runs.md), where it trains
    run = proj / run_folder(load_params(proj / "params.yaml"), "ci", "simcse", 1)
    assert (proj / target).stat().st_mtime_ns > before
    later = {"model_card.md", "teacher"} | {p.name for p in run.glob("eval-*")}  # the card's, a student's, the evaluations'
    assert sorted(p.name for p in run.iterdir() if p.name not in later | {"logs"}) == FINISHED
    assert (proj / "results/ci/runs/simcse/seed1/model").resolve() == (run / "model").resolve()


@pytest.mark.slow(seconds=11)
@needs_pipeline
def test_snakemake_killed_with_kill_9_then_rerun_as_documented_resumes_the_training_job(tmp_path, shared_dir, warm_jobs):
    """A kill -9 of the whole Snakemake build mid-training (docs/reliability.md). A plain
    rerun stops at Snakemake's stale lock and says so; after `snakemake --unlock`, the rerun with the
    workflow's profile (rerun-incomplete: true) runs the train job again, and it resumes from the
    checkpoint the killed job left. (The jobs fork from the session's warm server: the client a kill -9 takes
    with the build takes its job with it, as with the build's own server.)"""
    import signal
    import time

    from csebench.study.jobs import run_folder
    from csebench.study.params import load_params
    from runhelpers import copy_project, fork_snakemake, run_snakemake, tool_env

    proj = copy_project(tmp_path / "proj")
    # a run long enough to be killed between its first checkpoint and its end (STS-B dev at every step)
    over = write_config(proj / "longer.yaml", {"suites": {"ci": {"training": {
        "max_steps": 16, "checkpoint_steps": 2, "eval_steps": 1}}}})
    target = "results/ci/runs/simcse/seed1/train.json"
    base = ["--cores", "2", "--configfile", "config/ci.yaml", "--config", "plan=false", "warm_start=false",
            f"params_overrides=[{over.name}]"]
    env = {**tool_env(shared_dir), **warm_jobs}
    run = proj / run_folder(load_params(proj / "params.yaml", [over]), "ci", "simcse", 1)
    manifest = run / "checkpoint" / "manifest.json"
    build = fork_snakemake(base + ["--profile", "workflow/profiles/default", "--", target], proj, env,
                           tmp_path / "killed.log", start_new_session=True)
    deadline = time.time() + 300
    while not manifest.exists() and build.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    alive = build.poll() is None
    os.killpg(build.pid, signal.SIGKILL)  # Snakemake, its job's shell and `csebench train`
    build.wait()
    assert alive and manifest.exists(), (tmp_path / "killed.log").read_text()[-3000:]
    assert not (run / "train.json").exists()

    plain = run_snakemake(base + ["--", target], cwd=proj, env=env, timeout=300)
    assert plain.returncode != 0 and "--unlock" in plain.stdout + plain.stderr, plain.stdout[-2000:] + plain.stderr[-2000:]
    unlock = run_snakemake(base + ["--unlock"], cwd=proj, env=env, timeout=300)
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    rerun = run_snakemake(base + ["--profile", "workflow/profiles/default", "--", target], cwd=proj, env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    timing = json.loads((run / "train_timing.json").read_text())
    assert timing["resumed_from_step"] >= 2, timing
    assert f"from step {timing['resumed_from_step']}" in (run / "logs" / "train.log").read_text()
    assert json.loads((run / "train.json").read_text())["steps"] == 16


@pytest.mark.slow(seconds=4)
@needs_pipeline
def test_a_build_while_another_holds_the_lock_is_one_line_and_dry_runs_and_unlock_still_work(tmp_path, shared_dir):
    """A second Snakemake build while one runs stopped, after planning its whole DAG, with Snakemake's four-line
    LockException. The other build's locks are written here as Snakemake writes them (.snakemake/locks/N.output.lock:
    the files it makes, one a line; a real build of the ci suite holds results/ci/tables/sts.md there). The default
    target stops before planning, naming the target; a target given on the command line, whose DAG only Snakemake
    knows, stops where Snakemake finds the lock, in the same one line. A dry run still runs beside the lock, and the
    --unlock command the line gives clears a stale one."""
    from runhelpers import copy_project, run_snakemake, tool_env

    proj = copy_project(tmp_path / "proj")
    locks = proj / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    base = ["--cores", "1", "--configfile", "config/ci.yaml", "--config", "plan=false"]

    def snakemake(*args):
        proc = run_snakemake(base + list(args), cwd=proj, env=tool_env(shared_dir), timeout=300)
        errors = [line for line in proc.stderr.splitlines() if "error" in line.lower() or "lock" in line.lower()]
        return proc.returncode, errors

    unlock = "`snakemake --unlock --cores 1 --configfile config/ci.yaml --config plan=false`"
    (locks / "0.output.lock").write_text("results/ci/tables/sts.md\nresults/README.md\n")
    (locks / "0.input.lock").write_text("data/ci/corpus.txt\n")
    assert snakemake() == (1, [f"csebench: error: another Snakemake build is running in {proj} and holds the lock on "
                               "results/ci/tables/sts.md and 1 more of this build's targets (.snakemake/locks): wait for it to "
                               f"end; if none runs (a build was killed), remove its stale lock with {unlock}, then run this again"])
    (locks / "0.output.lock").write_text("data/ci/corpus.txt\n")  # below the targets: Snakemake's own check finds it
    assert snakemake("--", "results/ci/tables/sts.md") == (1, [
        f"csebench: error: another Snakemake build is running in {proj} and holds the lock on files this build needs "
        f"(.snakemake/locks): wait for it to end; if none runs (a build was killed), remove its stale lock with {unlock}, "
        "then run this again"])
    rc, _ = snakemake("-n", "--quiet", "rules")
    assert rc == 0 and (locks / "0.output.lock").exists()  # a dry run beside a running build, as Snakemake allows it
    command = unlock.strip("`").split()
    assert command[0] == "snakemake"
    proc = run_snakemake(command[1:], cwd=proj, env=tool_env(shared_dir), timeout=300)
    assert proc.returncode == 0 and not locks.exists(), proc.stderr[-2000:]


# ----------------------------------------------------------------------------- a run's outputs linked out of the run


def test_a_run_output_linked_out_of_the_run_is_refused_and_never_deleted_through(trained, tmp_path, capsys):
    """model/ a link to a folder elsewhere: `train --force` died with `OSError: Cannot call rmtree on a symbolic
    link`, and the .model.old link it left blocked every later train."""
    from runhelpers import train_argv

    inputs = trained.parent
    run = copy_run(trained, tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    (run / "model").rename(elsewhere)
    (run / "model").symlink_to(elsewhere)
    kept = sorted(p.name for p in elsewhere.iterdir())
    argv = train_argv(inputs, run, None) + ["--force"]
    assert_fails(capsys, argv, f"{run / 'model'} is a symbolic link to {elsewhere}, outside the run folder {run}: csebench "
                               "writes a run's outputs inside its folder and never deletes through a link; remove the link "
                               "(what it points to stays) or choose another --out")
    assert sorted(p.name for p in elsewhere.iterdir()) == kept and (run / "train.json").is_file()
    # an older csebench's leftover: .model.old, a link out of the run, is unlinked; what it points to stays
    (run / "model").unlink()
    shutil_copy = __import__("shutil").copytree
    shutil_copy(elsewhere, run / "model")
    (run / ".model.old").symlink_to(elsewhere)
    rc, err = run_cli(capsys, argv)
    assert rc == 0, err
    assert not (run / ".model.old").is_symlink() and sorted(p.name for p in elsewhere.iterdir()) == kept
    assert (run / "model").is_dir() and not (run / "model").is_symlink()


# ------------------------------------------------------------- Ctrl-C before the command is known, and during an import


def test_an_interrupt_names_the_subcommand_even_before_argparse(capsys, monkeypatch):
    """A Ctrl-C at 0.2 s printed `csebench: interrupted`."""
    from csebench import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    rc, err = run_cli(capsys, ["-v", "--threads", "1", "train", "--suite", "ci"])
    assert rc == 130 and err == "csebench train: interrupted\n"


def test_an_interrupt_during_rehearse_is_an_interruption_not_a_failed_run(tmp_path, capsys, monkeypatch):
    """`csebench rehearse` runs each command in process: the command caught the Ctrl-C and returned 130, which the
    rehearsal took for a failed run, went on with the next, and ended `1 rehearsal(s) failed`, exit 2."""
    from csebench.training import trainer

    real = trainer.Trainer.run

    def interrupted(self):
        if type(self) is trainer.Trainer:  # `csebench train` resuming the rehearsal's first attempt
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(trainer.Trainer, "run", interrupted)
    rc, err = run_cli(capsys, ["--threads", "1", "rehearse", "--suites", "ci", "--only", "ci/simcse", "--out", str(tmp_path / "r")])
    assert (rc, err.splitlines()[-1]) == (130, "csebench rehearse: interrupted"), err
    assert "FAILED" not in err and "failed" not in err


def test_an_interrupt_during_an_import_is_one_line_and_never_raised_inside_it(tmp_path):
    """Ctrl-C during torch's import raised KeyboardInterrupt inside it, where pybind11 code cannot pass it on:
    `terminate called after throwing an instance of 'pybind11::error_already_set'`, exit 134, an 85-line dump.
    The stand-in module records a KeyboardInterrupt raised inside its import (the C++ code would abort there)."""
    import subprocess
    import sys

    from runhelpers import ROOT, env

    marker = tmp_path / "raised-inside-the-import"
    (tmp_path / "slow_import.py").write_text(
        "import os, signal, time\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    raise\n")
    script = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
              "from csebench import cli\nfrom csebench.core import io\nfrom csebench.study import cli as study_cli\n"
              "def cmd(args):\n"
              f"    with io.atomic_path({str(tmp_path / 'out.txt')!r}) as tmp:\n"
              "        tmp.write_text('half')\n"
              "        import slow_import\n"
              "study_cli.cmd_runs = cmd\n"
              "sys.exit(cli.main(['runs']))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (130, "csebench runs: interrupted\n")
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow_import.py"]  # the unfinished output's temporary removed


# ---------------------------------------------------------- a read-only output folder, a full disk, two renders at once


@pytest.fixture()
def read_only(monkeypatch):
    """A folder on a read-only file system: creating a file or folder in it fails with EROFS (the machine's
    tests cannot mount one; every csebench output is created through tempfile's mkstemp/mkdtemp)."""
    import errno
    import os
    import tempfile

    folders: list[Path] = []

    def refuse(real):
        def create(*args, dir=None, **kwargs):
            if dir is not None and any(Path(dir).resolve().is_relative_to(f.resolve()) for f in folders):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
            return real(*args, dir=dir, **kwargs)

        return create

    monkeypatch.setattr(tempfile, "mkstemp", refuse(tempfile.mkstemp))
    monkeypatch.setattr(tempfile, "mkdtemp", refuse(tempfile.mkdtemp))
    return folders


def test_a_read_only_output_folder_stops_before_any_work(trained, tmp_path, capsys, monkeypatch, read_only, small):
    """render, eval-sts, train and model-card ended in `OSError: [Errno 30] Read-only file system` tracebacks,
    eval-sts only after computing everything."""
    from csebench.evaluation import embeddings
    from runhelpers import PARAMS, train_argv

    run = copy_run(trained, tmp_path / "run")
    read_only.append(run)
    encoded = []
    monkeypatch.setattr(embeddings, "model_encoder", lambda *a, **k: encoded.append(a) or (lambda s: None))
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    assert_fails(capsys, ["eval-sts", "--model", str(run / "model"), "--senteval", str(small), *STS_FAST,
                          "--out", str(run / "eval" / "sts.json")],
                 f"cannot write {run / 'eval' / 'sts.json'}: {run} is not writable (Read-only file system); nothing was done")
    assert encoded == []  # found before any encoding
    assert_fails(capsys, ["model-card", "--run", str(run)], f"cannot write {run / 'model'}: {run / 'model'} is not writable")
    assert_fails(capsys, train_argv(trained.parent, run, None) + ["--force"], f"cannot write {run}: {run} is not writable")
    results = tmp_path / "results"
    results.mkdir()
    read_only.append(results)
    assert_fails(capsys, ["results", "render", "--params", str(PARAMS), "--item", "suite/ci", "--results", str(results)],
                 f"cannot write {results}: {results} is not writable (Read-only file system)")
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before  # nothing finished touched


def test_a_full_disk_during_render_keeps_the_old_report(tmp_path, capsys, monkeypatch):
    """A full disk while `results render` writes (a fake fsync raising ENOSPC: no small file system can be mounted
    here): one line, exit 2; the previous report stays whole and no temporary is left."""
    import errno
    import os

    argv = _report_argv(tmp_path)
    assert run_cli(capsys, argv)[0] == 0
    before = _report_outputs(tmp_path)
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    rc, err = run_cli(capsys, argv)
    monkeypatch.setattr(os, "fsync", real)
    assert (rc, err) == (2, "csebench results: error: a write failed: No space left on device (errno ENOSPC); nothing "
                            "finished was replaced, the temporaries are removed\n")
    assert _report_outputs(tmp_path) == before
    assert not [p for p in (tmp_path / "results").rglob(".*.tmp")]


@pytest.fixture()
def small_disk(tmp_path):
    """A real file system of 3 MB (tmpfs), smaller than the ci suite's model (3.9 MB of weights): mounted where
    this machine lets the tests mount one (root), else the test is skipped saying why; always unmounted."""
    import shutil

    folder = tmp_path / "small-disk"
    folder.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: a small file system cannot be mounted")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"a small file system cannot be mounted here (mount -t tmpfs: {proc.stderr.strip() or proc.returncode})")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_train_on_a_real_full_disk_is_one_line(inputs, capsys, small_disk):
    """`csebench train` into a 3 MB file system: safetensors' writer fails with its own SafetensorError ("I/O error:
    No space left on device (os error 28)"), which was a 22-line traceback and exit 1. One line, exit 2, naming the
    output being written; its temporaries are removed (the file system has its room back) and nothing looks finished."""
    out = small_disk / "run"
    rc, err = run_cli(capsys, train_argv(inputs, out, write_config(inputs / "a.yaml", ci_training(**TRAINING))))
    assert (rc, err) == (2, f"csebench train: error: cannot write {out / 'best_model.partial'}: No space left on device "
                            "(errno ENOSPC); nothing finished was replaced, the temporaries are removed\n")
    assert not [p for p in small_disk.rglob("*") if p.name.endswith(".tmp")]
    assert not (out / "train.json").exists() and not (out / "model").exists()
    assert sum(p.stat().st_size for p in small_disk.rglob("*") if p.is_file()) < 100_000  # no half-written weights


def test_the_error_safetensors_raises_on_a_full_disk_is_one_line(inputs, capsys, monkeypatch):
    """Where no file system can be mounted: csebench's own safetensors writes (the training head in the best model so
    far, the checkpoint's tensors) raise what safetensors raises on a full disk. One line naming the output, exit 2;
    the temporary is removed."""
    import safetensors.torch
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)  # not transformers' writer, which keeps its own name
    out = inputs / "run"
    rc, err = run_cli(capsys, train_argv(inputs, out, write_config(inputs / "a.yaml", ci_training(**TRAINING))))
    assert (rc, err) == (2, f"csebench train: error: cannot write {out / 'best_model.partial'}: No space left on device "
                            "(errno ENOSPC); nothing finished was replaced, the temporaries are removed\n")
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")] and not (out / "best_model.partial").exists()


def test_two_renders_of_one_suite_at_once_both_finish_with_whole_outputs(tmp_path, capsys):
    """Two `csebench results render` processes on the same suite at the same moment:
    each writes its set of outputs through temporaries renamed into place, so both exit 0, the tables
    are those one render writes alone, and no temporary is left."""
    from runhelpers import fork_csebench

    argv = _report_argv(tmp_path)
    assert run_cli(capsys, argv)[0] == 0
    alone = {k: v for k, v in _report_outputs(tmp_path).items() if not k.endswith(".png")}  # PNGs carry a time
    # two processes of their own, forked from this one (each a second of imports less)
    procs = [fork_csebench(argv, tmp_path / f"render{i}.log", env_=dict(os.environ)) for i in range(2)]
    codes = [p.wait(300) for p in procs]
    assert codes == [0, 0], [(tmp_path / f"render{i}.log").read_text()[-2000:] for i in range(2)]
    both = _report_outputs(tmp_path)
    assert {k: v for k, v in both.items() if not k.endswith(".png")} == alone
    assert all(v.startswith(b"\x89PNG") for k, v in both.items() if k.endswith(".png"))
    assert not [p for p in (tmp_path / "results").rglob(".*.tmp")]

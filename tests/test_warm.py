"""csebench.workflow.warm: a local build's jobs run in children of one warm Python; what a job sees (arguments,
folder, environment, streams, exit code, signals) is what it would see cold, and anything amiss falls
back to a cold start."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from runhelpers import BIN, ROOT, ci_training, train_argv, write_config


def _started():
    from csebench.workflow import warm

    proc = warm.start()
    assert proc is not None and os.environ.get(warm.ENV)
    return proc, dict(os.environ)


def _stopped(proc) -> None:
    from csebench.workflow import warm

    warm.stop(proc)
    assert proc.poll() is not None and warm.ENV not in os.environ


@pytest.fixture(scope="module")
def warm_server():
    """One server for the tests that leave it running, as a build's serves all its jobs (each server loads torch and
    transformers: 6 CPU-s): (its process, the environment that points at it)."""
    proc, env = _started()
    yield proc, env
    _stopped(proc)


@pytest.fixture()
def server(warm_server):
    proc, env = warm_server
    assert proc.poll() is None, "a test before this one stopped the module's server"
    return proc, dict(env)


@pytest.fixture()
def own_server():
    """A server of the test's own, to stop: forked from this process (runhelpers.start_warm_server), since what its
    test checks is the client once the server is gone, not a server's start (the module's server is one started as a
    build starts it; another such start loads torch and transformers again: 6-7 CPU-s)."""
    from runhelpers import start_warm_server, stop_warm_server

    proc, env = start_warm_server()
    yield proc, {**os.environ, **env}
    stop_warm_server(proc, env)


def _csebench(env, *argv, cwd=ROOT, **kw):
    return subprocess.run([str(BIN / "csebench"), *map(str, argv)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, **kw)


def _startup(stderr: str) -> float:
    line = [x for x in stderr.splitlines() if ": ran " in x][-1]
    return float(line.split("of which start-up ")[1].split(" s")[0])


def test_a_command_runs_warm_with_the_jobs_folder_environment_and_streams(server, tmp_path):
    _, env = server
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())  # a relative --params: the job's folder
    env = {**env, "CSEBENCH_SHARED": str(tmp_path / "elsewhere")}
    first = _csebench(env, "show-config", "--suite", "ci", "--run", "simcse", "--seed", "1", cwd=tmp_path)
    proc = _csebench(env, "show-config", "--suite", "demo", "--run", "simcse", "--seed", "42", cwd=tmp_path)
    assert first.returncode == proc.returncode == 0, proc.stderr
    cfg = json.loads(proc.stdout)
    assert cfg["suite"] == "demo" and str(tmp_path / "elsewhere") in json.dumps(cfg)  # the job's own environment
    assert _startup(proc.stderr) < 0.5  # nothing left to import: it forked from the warm server
    bad = _csebench(env, "show-config", "--suite", "nope", "--run", "simcse", "--seed", "1", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("csebench show-config: error: ") and not bad.stdout


def test_no_server_or_a_dead_one_runs_the_command_cold(own_server, tmp_path):
    proc, env = own_server
    proc.terminate()
    proc.wait()
    out = _csebench(env, "show-config", "--suite", "ci", "--run", "simcse", "--seed", "1")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["suite"] == "ci"


def _start_long_training(env, tmp_path):
    from runhelpers import write_corpus, write_mini_senteval

    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    cfg = write_config(tmp_path / "over.yaml", ci_training(epochs=100000, max_steps=100000, eval_steps=100000, batch_size=8, log_steps=1000,
                                                            checkpoint_steps=100000))
    argv = train_argv(tmp_path, tmp_path / "run", cfg)
    job = subprocess.Popen([str(BIN / "csebench"), *argv], cwd=ROOT, env={**env, "CSEBENCH_DATA_CHECK": "0"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "run" / ".lock").exists() and job.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # into its training steps
    return job


def _alive(pid: int) -> bool:
    """Running (a zombie that no one has reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children(server_pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(server_pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


@pytest.mark.slow(seconds=2)
def test_ctrl_c_reaches_the_child_once_and_it_says_interrupted(server, tmp_path):
    proc, env = server
    job = _start_long_training(env, tmp_path)
    assert job.poll() is None and _children(proc.pid), job.stderr.read() if job.poll() is not None else ""
    job.send_signal(signal.SIGINT)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 130, err
    assert err.strip().splitlines()[-1] == "csebench train: interrupted"
    assert not list((tmp_path / "run").glob(".*.tmp")) and not (tmp_path / "run" / "train.json").exists()


@pytest.mark.slow(seconds=2)
def test_a_job_that_disappears_takes_its_child_with_it(server, tmp_path):
    proc, env = server
    job = _start_long_training(env, tmp_path)
    children = _children(proc.pid)
    assert len(children) == 1
    job.kill()  # kill -9 of the job's own process: nothing of it is left running
    job.wait()
    deadline = time.time() + 30
    while any(_alive(c) for c in children) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(c) for c in children)


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    code = ("import os, time; from csebench.workflow import warm; p = warm.start(); "
            "print(p.pid, flush=True); os._exit(0)")  # the starter vanishes without stopping it
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    pid = int(out.stdout.split()[0])
    deadline = time.time() + 30
    while time.time() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the warm server outlived the build that started it")


def test_a_server_whose_build_is_gone_before_it_has_loaded_loads_nothing_more(tmp_path):
    """A build that ends while its server is still loading (a dry run, a DAG that fails): the server loads no more
    modules (torch came first; transformers and sklearn were 5 of its 7 CPU-s) and runs nothing after loading."""
    from csebench.workflow import warm

    child = os.fork()
    if child == 0:  # serve in a child of this process, told that its build is another process (gone)
        code = 3
        try:
            warmed = []
            warm.PRELOAD = ("json",)
            warm.serve(str(tmp_path / "socket"), -1, None, warm_up=lambda: warmed.append(1))
            code = 1 if warmed else 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the server went on loading for a build that is gone"


def test_a_build_of_a_few_jobs_that_import_no_torch_starts_no_server():
    """The server's preload (torch, transformers, sklearn: 5-7 CPU-s) is for jobs that import them; a build of a few
    jobs that prepare data or link views only runs them cold (~0.4 CPU-s each); every name the table lists is a rule
    of the workflow (a renamed rule would otherwise start a server again, unnoticed)."""
    import re

    from csebench.workflow.warm import COLD_JOBS, COLD_RULES, worth_starting

    assert not worth_starting(["prepare_senteval", "prepare_corpus"]) and not worth_starting([])
    assert worth_starting(["prepare_senteval", "train"]) and worth_starting(["view_trained"] * (COLD_JOBS + 1))
    assert worth_starting(None)  # jobs not known: a server, as before
    rules = {m for f in [ROOT / "Snakefile", *(ROOT / "workflow/rules").glob("*.smk")]
             for m in re.findall(r"^rule (\w+):", f.read_text(encoding="utf-8"), re.M)}
    assert COLD_RULES <= rules, COLD_RULES - rules
    # what those rules' commands import (prepare-*, view-run, suite-metrics): no torch, transformers, sklearn, matplotlib
    code = ("import sys, csebench.cli, csebench.training.data, csebench.workflow.runviews, csebench.results.tidy, "
            "csebench.study.cli; print(sorted(m for m in ('torch', 'transformers', 'sklearn', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]

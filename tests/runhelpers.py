"""The tests' shared helpers: small inputs written from the shared data (a corpus, a SentEval folder, a
whole small $CSEBENCH_SHARED), config overrides, running the CLI in-process (`run_cli`, `assert_fails`)
or as a subprocess (`env`, `tool_env`), a copy of the project, the README's layout.

Programs that need a process of their own but not a fresh interpreter (a run to kill, a Snakemake build) start
forked from the test's process, which has imported torch, csebench and Snakemake already (`fork_program`,
`run_program`, `run_snakemake`, `fork_csebench`): a fresh Python spent 2-5 CPU-s importing them again.

Everything is written under pytest's tmp_path from the shared data; nothing is copied into the repo.
Fixtures shared by several test files (`one_thread`, `inputs`, `small`, `trained`, `ci_build`) are in conftest.py;
`built_once` builds a project once for the whole session, whichever worker asks first (`ci_build` is one).
"""

from __future__ import annotations

import fcntl
import importlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml

from csebench.workflow.warm import exit_status_of, flush_and_exit

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared"))
PARAMS = ROOT / "params.yaml"
BIN = Path(sys.executable).parent  # the venv's tools: csebench, snakemake, dvc
STS_FAST = ["--max-sts-pairs", "20", "--no-progress"]  # an STS evaluation in seconds (with the `small` fixture)


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def write_corpus(path: Path, n: int = 96) -> Path:
    """The first n lines of the shared demo corpus."""
    lines = []
    with open(SHARED / "corpus" / "demo-sentences.txt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                lines.append(line.strip())
            if len(lines) >= n:
                break
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_mini_senteval(root: Path, pairs: int = 48) -> Path:
    """A SentEval-like folder holding only what training needs: the first STS-B dev and SICK-R dev pairs."""
    for rel, head in (("STS/STSBenchmark/sts-dev.csv", 0), ("SICK/SICK_trial.txt", 1)):  # SICK has a header line
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(SHARED / "senteval" / "downstream" / rel, encoding="utf-8") as fh:
            dst.write_text("".join(line for _, line in zip(range(pairs + head), fh)), encoding="utf-8")
    return root


def make_senteval(root, n=40):
    """A tiny SentEval tree whose labels are decided by one word, so a sentence encoder that
    looks at that word separates them."""
    from csebench.evaluation import transfer as T

    pos = [f"good movie number {i}" for i in range(n)]
    neg = [f"bad film take {i} here" for i in range(n)]
    for task, (folder, f1, f0) in T.BINARY_FILES.items():
        write(root / folder / f1, "\n".join(pos) + "\n", "latin-1")
        write(root / folder / f0, "\n".join(neg) + "\n", "latin-1")
    sst = lambda k: "".join(f"good thing {k} {i} \t1\nbad thing {k} {i} \t0\n" for i in range(n // 2))
    for split in ("train", "dev", "test"):
        write(root / "SST" / "binary" / f"sentiment-{split}", sst(split))
    trec = lambda k: "".join(f"{c}:x {c.lower()} question {k} {i} ?\n" for i in range(40) for c in T.TREC_CLASSES)
    write(root / "TREC" / "train_5500.label", trec("tr"), "latin-1")
    write(root / "TREC" / "TREC_10.label", trec("te"), "latin-1")
    head = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    mrpc = lambda k: head + "".join(f"1\t{i}\t{i}\tsame {k} {i}\tsame {k} {i}\n0\t{i}\t{i}\tgood {k} {i}\tbad {k} {i}\n"
                                    for i in range(n // 2))
    write(root / "MRPC" / "msr_paraphrase_train.txt", mrpc("tr"))
    write(root / "MRPC" / "msr_paraphrase_test.txt", mrpc("te"))
    return root


def write_small_shared(dst: Path, lines: int = 40) -> Path:
    """$CSEBENCH_SHARED for a fast DAG: the first lines of every STS file of the shared SentEval (input and
    gold files cut alike), a synthetic transfer set, 300 corpus sentences."""
    src = SHARED / "senteval" / "downstream"
    for f in (src / "STS").rglob("*"):
        if f.is_file():
            out = dst / "senteval" / "downstream" / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(b"".join(f.read_bytes().splitlines(keepends=True)[:lines]))
    for name in ("SICK_trial.txt", "SICK_test_annotated.txt"):
        out = dst / "senteval" / "downstream" / "SICK" / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"".join((src / "SICK" / name).read_bytes().splitlines(keepends=True)[: lines + 1]))
    make_senteval(dst / "senteval" / "downstream")
    write_corpus(dst / "corpus" / "demo-sentences.txt", 300)
    return dst


def write_config(path: Path, overrides: dict) -> Path:
    path.write_text(yaml.safe_dump(overrides), encoding="utf-8")
    return path


def data_override(tmp: Path, corpus: Path, senteval: Path | None = None) -> Path:
    """A --config override adding data source `bad` (--data bad): the given corpus and SentEval folder."""
    return write_config(tmp / "data.yaml", {"data": {"bad": {
        "corpus": {"path": str(corpus)}, "senteval": {"path": str(senteval or SHARED / "senteval")}}}})


def ci_training(**training) -> dict:
    """A --config override of the ci suite's training settings."""
    return {"suites": {"ci": {"training": training}}}


def train_argv(tmp: Path, out: Path, config: Path | None, corpus: Path | None = None,
               senteval: Path | None = None, cache: Path | None = None, seed: int = 1) -> list[str]:
    argv = ["train", "--params", str(PARAMS), "--suite", "ci", "--run", "simcse", "--seed", str(seed),
            "--corpus", str(corpus or tmp / "corpus.txt"), "--senteval", str(senteval or tmp / "se"),
            "--out", str(out), "--cache-dir", str(cache or tmp / "cache"), "--no-progress"]
    if config is not None:
        argv[1:1] = ["--config", str(config)]
    return argv


def run_cli(capsys, argv: list[str]) -> tuple[int, str]:
    """`csebench ARGV` in this process: (exit status, stderr)."""
    from csebench import cli

    capsys.readouterr()
    rc = cli.main(argv)
    err = capsys.readouterr().err
    return rc, err


def assert_fails(capsys, argv, *needles, outputs=()) -> str:
    """`csebench ARGV` exits 2 with an error line holding every needle and leaves none of ``outputs``
    behind (or leaves it an empty folder); returns the error line."""
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


def assert_train_fails(inputs, capsys, overrides: dict, *needles):
    """`csebench train` of the ci suite on ``inputs`` (the fixture) with the --config ``overrides`` fails as
    assert_fails checks, leaving no run folder and no cache."""
    cfg = write_config(inputs / "over.yaml", overrides)
    out = inputs / "run"
    return assert_fails(capsys, train_argv(inputs, out, cfg), *needles, outputs=[out, inputs / "cache"])


def has_term(module: str, attr: str) -> bool:
    """Whether csebench.objectives.<module> exists and defines ``attr`` (an objective term)."""
    try:
        return importlib.util.find_spec(f"csebench.objectives.{module}") is not None and \
            hasattr(importlib.import_module(f"csebench.objectives.{module}"), attr)
    except Exception:
        return False


EXTRAS = {"pipeline": ("snakemake", "dvc")}  # the optional extras tests need, by the modules they install


def needs_extra(name: str):
    """A mark that skips a test, saying why, where the optional [name] extra of pyproject.toml is not installed."""
    import pytest

    missing = [m for m in EXTRAS[name] if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"the optional [{name}] extra is not installed ({', '.join(missing)} "
                                                    f"missing): pip install -e '.[{name}]'")


needs_pipeline = needs_extra("pipeline")  # tests that run snakemake or dvc


def copy_run(run: Path, dst: Path) -> Path:
    """A copy of a run folder (without its lock), to damage or change."""
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns(".lock"))
    return dst


def fail_writing_train_json(monkeypatch) -> None:
    """The trainer's last output, train.json, fails as on a full disk (monkeypatch.undo() restores it)."""
    import csebench.training.trainer as trainer_mod

    real = trainer_mod.write_json

    def disk_full(path, obj):
        if Path(path).name == "train.json":
            raise OSError(28, "No space left on device", str(path))
        return real(path, obj)

    monkeypatch.setattr(trainer_mod, "write_json", disk_full)


def env() -> dict:
    """The environment of a `python -m csebench` subprocess: offline, the shared data, one OpenMP thread."""
    e = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
             CSEBENCH_SHARED=str(SHARED), OMP_NUM_THREADS="1")
    return e


def tool_env(shared: Path | None = None) -> dict:
    """The environment of the venv's tools run as subprocesses (snakemake, csebench, dvc): offline, the venv's
    bin/ first on PATH; with ``shared``, that $CSEBENCH_SHARED and the check of SentEval's published data on."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{BIN}:{os.environ['PATH']}")
    if shared is not None:
        env["CSEBENCH_SHARED"] = str(shared)
        env.pop("CSEBENCH_DATA_CHECK", None)  # the shared data is SentEval's published data: checked as for users
    return env


def copy_project(dst: Path) -> Path:
    """A copy of the project at ``dst``: its tracked and untracked-but-not-ignored files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if not (ROOT / f).is_file():
            continue
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst / f)
    return dst


# ----------------------------------------------------------------------------- programs forked from this process

_FRESH_WARNINGS = list(warnings.filters)  # as the interpreter set them (pytest changes them only while a test runs)


class Forked:
    """A program running in a child forked from this process (``fork_program``), with subprocess.Popen's interface:
    ``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill`` and ``returncode`` (-N: ended by signal N)."""

    def __init__(self, pid: int, args: list[str]):
        self.pid, self.args, self.returncode = pid, args, None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _as_fd(target, mode: int) -> tuple[int, bool]:
    """(a file descriptor, whether to close it) for a stream given as None (inherit), DEVNULL, a path or a file."""
    if target is subprocess.DEVNULL:
        return os.open(os.devnull, mode), True
    if isinstance(target, (str, Path)):
        return os.open(target, mode | os.O_CREAT | os.O_TRUNC, 0o644), True
    return target.fileno(), False


def _release_descriptors() -> None:
    """In a forked child: every descriptor above 2 made a non-inheritable /dev/null (see fork_program)."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS): every number up to the limit that is open
        fds = []
        for fd in range(3, min(os.sysconf("SC_OPEN_MAX"), 65536)):
            try:
                os.fstat(fd)
                fds.append(fd)
            except OSError:
                pass
    for fd in fds:
        if fd > 2 and fd != null:
            try:
                os.dup2(null, fd, inheritable=False)
            except OSError:  # the listing's own descriptor, closed since
                pass
    os.close(null)


def fork_program(main, argv: list[str], cwd: Path | str = ROOT, env: dict | None = None, stdin=subprocess.DEVNULL,
                 stdout=None, stderr=None, start_new_session: bool = False) -> Forked:
    """``main()`` run as the program ``argv`` in a child forked from this process: its own process (signals, kill -9,
    exit code, a session of its own with ``start_new_session``), folder, environment (exactly ``env``), standard
    streams (DEVNULL, a path, a file, or this process's with None; stderr=subprocess.STDOUT joins stdout), arguments
    (sys.argv), logging (no handler yet), warnings filters and unseeded random generators as a fresh interpreter has
    them; what it imported is this process's. ``main`` returns or raises SystemExit with the exit code. Not for a
    program whose start reads what this process fixed at import: PYTHONPATH, HF_* settings, a plugin's entry points."""
    env = dict(os.environ if env is None else env)
    ends = []
    fds = []
    for target, mode in ((stdin, os.O_RDONLY), (stdout, os.O_WRONLY), (stderr, os.O_WRONLY)):
        if target is None:
            fds.append(len(fds))  # this process's own descriptor 0, 1 or 2
        elif target is subprocess.STDOUT:
            fds.append(fds[1])
        else:
            fd, close = _as_fd(target, mode)
            fds.append(fd)
            if close:
                ends.append(fd)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if start_new_session:
                os.setsid()
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python sets it: KeyboardInterrupt
            moved = [os.dup(fd) for fd in fds]  # (one of them may be 0, 1 or 2 itself)
            for target, fd in enumerate(moved):
                os.dup2(fd, target)
                os.close(fd)
            # nothing else of this process's: a fresh program has only its three streams (and a child holding the
            # test worker's pipe to pytest-xdist's controller would keep the session from ending). Each descriptor
            # above 2 is pointed at /dev/null rather than closed, so that its number stays taken: an object of this
            # process that still holds it (a file or pipe the garbage collector finalises later, in the program)
            # closes its /dev/null, not a pipe the program opened since under that number (a forked Snakemake's
            # next job failed in Popen with EBADF, once in make test)
            _release_descriptors()
            sys.stdin = sys.__stdin__ = open(0, "r", closefd=False)
            sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)
            sys.stderr = sys.__stderr__ = open(2, "w", closefd=False, buffering=1)
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            sys.argv = list(argv)
            import atexit
            import logging
            import random

            atexit._clear()  # this process's exit handlers are not the program's
            root = logging.getLogger()
            for handler in list(root.handlers):
                root.removeHandler(handler)
            root.setLevel(logging.WARNING)
            warnings.filters[:] = _FRESH_WARNINGS
            warnings._filters_mutated()
            random.seed()  # unseeded generators drawn anew, as a fresh interpreter's are (torch's too)
            for name, reseed in (("numpy", lambda m: m.random.seed()), ("torch", lambda m: m.seed())):
                if name in sys.modules:
                    reseed(sys.modules[name])
            if "torch" in sys.modules and env.get("OMP_NUM_THREADS", "").isdigit():
                sys.modules["torch"].set_num_threads(int(env["OMP_NUM_THREADS"]))
            code = exit_status_of(main)
            atexit._run_exitfuncs()  # the program's own
        except BaseException:  # the fork's own setup failed
            traceback.print_exc()
        finally:
            flush_and_exit(code)
    for fd in ends:
        os.close(fd)
    return Forked(pid, list(argv))


def run_program(main, argv: list[str], cwd: Path | str = ROOT, env: dict | None = None,
                timeout: float | None = None) -> subprocess.CompletedProcess:
    """fork_program, waited for, its output captured: what subprocess.run(..., capture_output=True, text=True)
    returns (a program still running at ``timeout`` is killed: subprocess.TimeoutExpired)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = fork_program(main, argv, cwd=cwd, env=env, stdout=out, stderr=err)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        return _completed(list(argv), proc.returncode, out, err)


def _completed(args, returncode: int, out, err) -> subprocess.CompletedProcess:
    """A CompletedProcess of text read back from the files ``out`` and ``err`` a program wrote its output to."""
    out.seek(0)
    err.seek(0)
    return subprocess.CompletedProcess(args, returncode, out.read().decode(errors="replace"),
                                       err.read().decode(errors="replace"))


def run_command(cmd: str | list[str], cwd: Path | str, env: dict, timeout: float | None = None) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True) (a string through the shell), with the output going to
    files, as to a terminal, and the input from /dev/null: a daemon the command leaves behind (DVC's queue worker
    lives on after `dvc exp run --run-all` until its next check, every 10 s, finds the queue empty) holds those
    files, not pipes the caller would wait on to close, nor this process's input (xdist's channel)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=timeout,
                              shell=isinstance(cmd, str))
        return _completed(cmd, proc.returncode, out, err)


def _snakemake_main():
    from snakemake.cli import main

    return main(sys.argv[1:])


def run_snakemake(args: list[str], cwd: Path | str = ROOT, env: dict | None = None,
                  timeout: float | None = 600) -> subprocess.CompletedProcess:
    """`snakemake ARGS` (the venv's) in ``cwd``, forked from this process (run_program): Snakemake and its plugins
    are imported here once (2.3 of the 3 CPU-s of a `snakemake -n` of the ci suite)."""
    import snakemake.cli  # noqa: F401  before the fork: once for every later build

    return run_program(_snakemake_main, ["snakemake", *args], cwd=cwd, env=env, timeout=timeout)


def fork_snakemake(args: list[str], cwd: Path | str, env: dict, log: Path, start_new_session: bool = False) -> Forked:
    """`snakemake ARGS` forked from this process, running on (fork_program), its output (both streams) in ``log``."""
    import snakemake.cli  # noqa: F401

    return fork_program(_snakemake_main, ["snakemake", *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=start_new_session)


def _csebench_main():
    from csebench.cli import main

    return main(sys.argv[1:])


def _preload_csebench() -> None:
    """What a build's warm server loads before it forks its jobs (csebench.workflow.warm.PRELOAD), loaded here once:
    a child forked before this process imported them would import them itself, every time."""
    from csebench.workflow.warm import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)


def run_csebench(argv: list[str], cwd: Path | str = ROOT, env_: dict | None = None,
                 timeout: float | None = 300) -> subprocess.CompletedProcess:
    """`csebench ARGV` as the program, forked from this process (run_program): its exit code and both streams, as
    subprocess.run(..., capture_output=True, text=True) gives them."""
    _preload_csebench()
    return run_program(_csebench_main, ["csebench", *argv], cwd=cwd, env=env_ if env_ is not None else env(),
                       timeout=timeout)


def fork_csebench(argv: list[str], log: Path, cwd: Path | str = ROOT, env_: dict | None = None,
                  start_new_session: bool = False) -> Forked:
    """`csebench ARGV` forked from this process (fork_program), its output (both streams) in ``log``."""
    _preload_csebench()
    return fork_program(_csebench_main, ["csebench", *argv], cwd=cwd, env=env_ if env_ is not None else env(),
                        stdout=log, stderr=subprocess.STDOUT, start_new_session=start_new_session)


def start_warm_server() -> tuple[Forked, dict]:
    """A warm server (csebench.workflow.warm.serve) forked from this process, which has loaded what a build's server
    loads (its start costs nothing; a server started as a build starts one loads torch and transformers: 6-7 CPU-s):
    (the server, the environment that sends a build's jobs to it). A build run with that environment and
    ``--config warm_start=false`` starts no server of its own: its jobs fork from this one, as they would from
    their build's. It ends with this process, or with ``stop_warm_server``."""
    from csebench.cli import build_parser, main
    from csebench.workflow.warm import ENV, serve

    _preload_csebench()
    build_parser()
    path = os.path.join(tempfile.mkdtemp(prefix="csebench-warm-"), "socket")
    parent = os.getpid()
    proc = fork_program(lambda: serve(path, parent, main), ["csebench-warm-server"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.path.exists(path), f"the forked warm server did not start (exit {proc.poll()})"
    return proc, {ENV: path}


def stop_warm_server(proc: Forked, env: dict) -> None:
    from csebench.workflow.warm import ENV

    proc.terminate()
    proc.wait(30)
    shutil.rmtree(os.path.dirname(env[ENV]), ignore_errors=True)


# ----------------------------------------------------------------------------- builds shared by the session


@dataclass
class Built:
    """A project built once for the session (``built_once``): ``proj`` is the finished project, which no test changes
    (``copy`` gives one a copy of its own); ``returncode``, ``stdout`` and ``stderr`` are its build's."""

    proj: Path
    env: dict
    returncode: int
    stdout: str
    stderr: str

    def copy(self, dst: Path) -> Path:
        """A copy of the built project at ``dst``: its files with their times (Snakemake, which plans by times, sees
        what it saw) and its links as links (a suite's views link into the run store, relatively)."""
        shutil.copytree(self.proj, dst, symlinks=True)
        return dst


def session_dir(tmp_path_factory) -> Path:
    """The folder every process of this pytest session shares: the workers' common parent under xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(root: Path, name: str, build, env: dict) -> Built:
    """``build(proj, env)`` (a subprocess.CompletedProcess) run once under ``root`` (``session_dir``) for the whole
    session: the first process to ask builds it while holding a lock, the others wait on the lock or find it built.
    A build that raised is recorded as failed (returncode -1, the traceback as its stderr), not tried again."""
    folder = root / name
    record = folder / "built.json"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not record.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                try:
                    proc = build(folder / "proj", env)
                    done = {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
                except Exception:
                    done = {"returncode": -1, "stdout": "", "stderr": traceback.format_exc()}
                record.write_text(json.dumps(done), encoding="utf-8")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return Built(folder / "proj", env, **json.loads(record.read_text(encoding="utf-8")))


CI_BUILD = ["--cores", "2", "--configfile", "config/ci.yaml", "--profile", "workflow/profiles/default",
            "--resources", "gpu=2", "--config", "threads=1"]  # two one-thread jobs at a time, as make demo on 2 cores


def build_ci(proj: Path, env: dict, warm: dict | None = None) -> subprocess.CompletedProcess:
    """The ci suite end to end through Snakemake in a copy of the project (the `ci_build` fixture); with ``warm``
    (conftest's warm_jobs), its jobs fork from that warm server (--config warm_start=false)."""
    copy_project(proj)
    args = [*CI_BUILD, "warm_start=false"] if warm else CI_BUILD
    return run_snakemake(args, cwd=proj, env={**env, **(warm or {})}, timeout=900)  # forked: Snakemake imported once


def popen_train(argv: list[str], log: Path) -> Forked:
    """`csebench --threads 1 ARGV` as a process of its own (to kill, to wait for), forked from this one, its output in
    ``log``."""
    return fork_csebench(["--threads", "1", *argv], log)


def random_step_context(b=4, n=None, d=8, step=0, total=10, offset=0, tau=0.05, seed=0):
    """A StepContext of random anchors (b, d) and candidates (n, d) that track gradients."""
    import torch

    from csebench.objectives.base import StepContext

    g = torch.Generator().manual_seed(seed)
    n = n or b
    z1 = torch.randn(b, d, generator=g, requires_grad=True)
    z2 = torch.randn(n, d, generator=g, requires_grad=True)
    return StepContext(z1=z1, z2=z2, temperature=tau, step=step, total_steps=total,
                       indices=torch.arange(b), all_indices=torch.arange(n), positive_offset=offset)


# ----------------------------------------------------------------------------- the README's layout


def user_env() -> dict:
    """The environment of a user who followed the README: the venv activated (`. .venv/bin/activate`),
    offline as CI is (HF_HUB_OFFLINE=1, .ci/run), and no CSEBENCH_* variable, which the README never sets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSEBENCH_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{BIN}:{os.environ['PATH']}",
               VIRTUAL_ENV=str(BIN.parent))
    return env


def readme_checkout(base: Path, name: str = "proj") -> Path:
    """A copy of the project at base/<name> with the shared data beside it at base/shared, as the
    README lays them out (`../shared`); the tracked and untracked-but-not-ignored files only."""
    base.mkdir(parents=True, exist_ok=True)
    if not (base / "shared").exists():
        (base / "shared").symlink_to(SHARED.resolve(), target_is_directory=True)
    dst = base / name
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dst / f)
    return dst


def readme_block(heading: str, doc: Path = ROOT / "README.md") -> list[str]:
    """The commands of the first fenced code block after the line containing ``heading``, one per
    line, without comments (a line of its own that is a comment is kept as a marker, '#...')."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if heading in line)
    begin = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].startswith("```"))
    out = []
    for line in lines[begin + 1:end]:
        if line.lstrip().startswith("#"):
            out.append(line.strip())
        elif line.strip():
            out.append(line.split("  #")[0].rstrip())
    return out


def train_tiny(tmp: Path, objectives: dict, steps: int = 3, batch_size: int = 8, teacher: bool = False,
               **training) -> tuple[dict, object]:
    """Train the ci suite's tiny random BERT for a few steps with ``objectives`` (the method's terms) on
    the first 96 shared corpus sentences; ``teacher``: a frozen random encoder's cached embeddings are
    the teacher of any term that reads teachers (``teachers: {run: simcse, seeds: [2]}``).
    Returns (train.json's summary, the trainer)."""
    tr = tiny_trainer(tmp, objectives, steps, batch_size, teacher, **training)
    return tr.run(), tr


def tiny_trainer(tmp: Path, objectives: dict, steps: int = 3, batch_size: int = 8, teacher: bool = False,
                 **training):
    """train_tiny's trainer, built and not yet run."""
    from csebench.study.params import BackboneConfig, load_params
    from csebench.study.resolve import resolve_run
    from csebench.model.encoder import build_encoder
    from csebench.training.trainer import Trainer

    write_corpus(tmp / "corpus.txt")
    write_mini_senteval(tmp / "se")
    caches = []
    if teacher:
        from csebench.training.teachers import build_teacher_cache

        build_encoder(BackboneConfig(model="random", pooler="cls"), seed=7).save(tmp / "teacher")
        build_teacher_cache(tmp / "teacher", tmp / "corpus.txt", tmp / "teacher.npy", max_seq_length=32)
        caches = [str(tmp / "teacher.npy")]
    params = load_params(PARAMS)
    params["suites"]["ci"]["training"] = {"batch_size": batch_size, "max_steps": steps, "eval_steps": steps, **training}
    params["methods"]["simcse"]["objectives"] = objectives
    cfg = resolve_run(params, "ci", "simcse", 1)
    return Trainer(cfg, tmp / "corpus.txt", tmp / "se", tmp / "out", show_progress=False, teacher_cache=caches)


class FakeBank:
    """A teacher bank whose cosines of corpus rows are given directly (the objective tests of terms
    that read frozen teachers: DCLR's complementary model, RankCSE's teachers)."""

    num_teachers = 1

    def __init__(self, cos):
        self.cos = cos

    def logits(self, rows, cols, device=None):
        return self.cos[rows][:, cols].clone()


# ----------------------------------------------------------------------------- tiny models of every architecture

# model_type -> (tokenizer kind, config keyword arguments besides vocabulary, positions and special-token ids): 3
# layers (3: SSCL reads two intermediate ones), hidden 32, 2 heads (ALBERT and ELECTRA with factorised embeddings of 16, as ALBERT and ELECTRA-small are)
TINY_ARCHITECTURES = {
    "bert": ("wordpiece", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64)),
    "roberta": ("bpe", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                            type_vocab_size=1)),
    "xlm-roberta": ("bpe", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                                type_vocab_size=1)),
    "camembert": ("bpe", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                              type_vocab_size=1)),
    "distilbert": ("wordpiece", dict(dim=32, n_layers=3, n_heads=2, hidden_dim=64)),
    "deberta-v2": ("wordpiece", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                                     type_vocab_size=0, relative_attention=True, pos_att_type=["p2c", "c2p"],
                                     position_buckets=32, max_relative_positions=-1, norm_rel_ebd="layer_norm",
                                     position_biased_input=False)),  # DeBERTa-v3's attention
    "deberta": ("wordpiece", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                                  type_vocab_size=0, relative_attention=True, pos_att_type=["p2c", "c2p"],
                                  max_relative_positions=32)),
    "mpnet": ("wordpiece", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                                relative_attention_num_buckets=32)),
    "modernbert": ("wordpiece", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                                     local_attention=8)),  # layer 0 global, layer 1 a sliding window of 8
    "electra": ("wordpiece", dict(embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                  intermediate_size=64)),
    "albert": ("wordpiece", dict(embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                 intermediate_size=64)),
    "nomic_bert": ("wordpiece", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64)),
}
ROBERTA_POSITIONS = ("roberta", "xlm-roberta", "camembert", "mpnet")  # position ids start after the padding id


def tiny_tokenizers(corpus: Path, vocab_size: int = 600) -> dict:
    """The two tokenizer kinds of the tiny architectures, learnt from ``corpus`` in a fraction of a second:
    uncased WordPiece with BERT's special ids, byte-level BPE with RoBERTa's (csebench.model.standins)."""
    from csebench.core.corpus import read_corpus
    from csebench.model.standins import train_tokenizer

    sentences = read_corpus(corpus)
    return {"wordpiece": train_tokenizer("bert", sentences, vocab_size),
            "bpe": train_tokenizer("roberta", sentences, vocab_size)}


class _Ids:
    """Stands in for a tokenizer where only its size and special ids matter (a model built without one)."""

    def __init__(self, kind: str, size: int = 120):
        self.size = size
        self.pad_token_id, self.cls_token_id, self.sep_token_id = (0, 1, 2) if kind == "wordpiece" else (1, 0, 2)
        self.bos_token_id, self.eos_token_id = self.cls_token_id, self.sep_token_id

    def __len__(self):
        return self.size


def tiny_config(model_type: str, tokenizer=None, positions: int = 64, **changes):
    """The transformers config of a tiny ``model_type`` model for ``tokenizer`` (TINY_ARCHITECTURES); without one, a
    vocabulary of 120 ids with the special ids of the architecture's tokenizer kind."""
    from transformers import AutoConfig

    kind, kw = TINY_ARCHITECTURES[model_type]
    tokenizer = tokenizer if tokenizer is not None else _Ids(kind)
    pad = tokenizer.pad_token_id
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    extra = pad + 1 if model_type in ROBERTA_POSITIONS else 0
    special = dict(pad_token_id=pad, bos_token_id=cls, eos_token_id=sep)
    if model_type == "modernbert":
        special.update(cls_token_id=cls, sep_token_id=sep)
    return AutoConfig.for_model(model_type, vocab_size=len(tokenizer), max_position_embeddings=positions + extra,
                                initializer_range=0.05, **special, **{**kw, **changes})


def tiny_model(model_type: str, tokenizer=None, seed: int = 0, **changes):
    """A tiny ``model_type`` model with random weights drawn from ``seed`` (the caller's RNG left as it was)."""
    import torch
    from transformers import AutoModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModel.from_config(tiny_config(model_type, tokenizer, **changes))


def write_tiny_model(folder: Path, model_type: str, tokenizers: dict, **changes) -> Path:
    """A model folder of a tiny random ``model_type`` model and its tokenizer (what `csebench train --backbone` takes)."""
    tokenizer = tokenizers[TINY_ARCHITECTURES[model_type][0]]
    tiny_model(model_type, tokenizer, **changes).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder

"""Warm starts: the jobs of a local Snakemake build run in processes forked from one that has imported
torch, transformers and csebench already.

A build runs a couple of hundred `csebench` commands; each started cold spends 1-3 s importing torch and
transformers before its work (much of a small build's time: benchmarks/build_profile.py). The Snakefile
starts one server per local build (``start``); it imports those modules once and waits on a Unix socket
in a private temporary folder. `csebench` finds it through ``CSEBENCH_WARM`` (the socket's path, which
the jobs inherit) and hands it its arguments, working folder, environment, umask and standard streams;
the server forks, the child runs the command as the program would (csebench.cli.main) with those, and
the exit code comes back. A signal the job receives (Snakemake stopping it, Ctrl-C) is passed to the
child, and a job that disappears takes its child with it. Anything amiss before the child starts (no
server, a server that died) and the command runs cold in the job's own process, as without a server.

The server is single-threaded (every fork happens from its one thread, so no lock another thread holds
is copied into a child); it never runs torch itself (no thread pool or CUDA context exists to copy),
lives in its own session (a Ctrl-C at the terminal reaches the jobs' clients, which pass it on once), and
ends with the build (``stop``), or by itself when the process that started it is gone.
Jobs submitted to a cluster run cold: the server is started for local execution only.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

ENV = "CSEBENCH_WARM"
IN_CHILD = [False]  # this process is a server's child: its commands run here, never forwarded again
# what the commands import: loaded once in the server, inherited by every child
# (the modules the ci suite's jobs import, measured; transformers' model code alone takes 1.5 s)
PRELOAD = ("torch", "numpy", "transformers.modeling_utils", "transformers.models.bert.modeling_bert",
           "transformers.models.roberta.modeling_roberta", "transformers.models.auto.tokenization_auto",
           "transformers.tokenization_utils_tokenizers", "safetensors.torch", "jsonschema", "sklearn.model_selection",
           "sklearn.metrics", "csebench.study.jobs", "csebench.model.encoder", "csebench.training.trainer", "csebench.training.teachers",
           "csebench.evaluation.embeddings", "csebench.evaluation.sts", "csebench.evaluation.transfer",
           "csebench.evaluation.envelope", "csebench.analysis.core", "csebench.analysis.pipeline", "csebench.results.render",
           "csebench.results.registry", "csebench.sharing.modelcard", "csebench.workflow.runviews", "csebench.core.stats")
_HEADER = struct.Struct("!I")
# rules whose commands import neither torch nor transformers: a cold start of one is ~0.4 CPU-s, the server's preload
# 5-7 CPU-s (a 2-core Zen 4), so a build of a few of these alone (the data prepared for a suite, the views of a run
# made again) starts no server (``worth_starting``); any other rule, or more of these, and it does
COLD_RULES = frozenset({"prepare_corpus", "prepare_senteval", "prepare_probing", "suite_metrics", "view_trained",
                        "view_evaluated", "view_probing", "view_analysis", "all"})
COLD_JOBS = 8  # at most this many jobs of COLD_RULES run cold (each ~0.4 CPU-s, with nothing forked)


def _send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    from csebench.core.io import dumps_json

    data = dumps_json(message, indent=None).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], fds)
    else:
        sock.sendall(payload)


def _recv(sock: socket.socket, with_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One message (None when the peer closed first) and the descriptors that came with it."""
    fds: list[int] = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, _HEADER.size, with_fds)
    else:
        data = sock.recv(_HEADER.size)
    while data and len(data) < _HEADER.size:
        more = sock.recv(_HEADER.size - len(data))
        if not more:
            break
        data += more
    if len(data) < _HEADER.size:
        for fd in fds:
            os.close(fd)
        return None, []
    (n,) = _HEADER.unpack(data)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            return None, fds
        body += chunk
    return json.loads(body), fds


# ----------------------------------------------------------------------------- the job's side


def forward(argv: list[str]) -> int | None:
    """Run ``csebench argv`` in the build's warm server; its exit code, or None when there is no server
    to run it (the caller then runs it itself)."""
    path = os.environ.get(ENV)
    if not path or IN_CHILD[0]:
        return None
    child: list[int] = []
    pending: list[int] = []

    def relay(signum, _frame):  # a signal for the job goes to the child that runs it (once it exists)
        if not child:
            pending.append(signum)
            return
        try:
            os.kill(child[0], signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, relay) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        umask = os.umask(0)
        os.umask(umask)
        _send(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask}, [0, 1, 2])
        started, _ = _recv(sock)
    except OSError:
        started = None
    if not started or "pid" not in started:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:  # stopped before anything ran: as a cold command would be
            return 130 if pending[0] == signal.SIGINT else 128 + pending[0]
        return None
    child.append(int(started["pid"]))
    for signum in pending:
        relay(signum, None)
    while True:
        try:
            done, _ = _recv(sock)
            break
        except InterruptedError:
            continue
        except OSError:
            done = None
            break
    sock.close()
    if not done:
        print(f"csebench: the build's warm server stopped while running `csebench {' '.join(argv)}`", file=sys.stderr)
        return 1
    return int(done["rc"])


# ----------------------------------------------------------------------------- the server


def _run_child(request: dict, fds: list[int], keep_closed: list, program) -> None:
    """In the forked child: become the job's process, run the command, exit with its code."""
    code = 1
    try:
        IN_CHILD[0] = True
        for thing in keep_closed:
            os.close(thing) if isinstance(thing, int) else thing.close()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.umask(int(request["umask"]))
        sys.argv = ["csebench", *request["argv"]]
        import random

        random.seed()  # a fresh process's unseeded generators differ run to run; copies of one would not
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        code = exit_status_of(program)
    except BaseException:  # the job's own setup failed (its errors are exit_status_of's)
        import traceback

        traceback.print_exc()
    finally:
        flush_and_exit(code)


def exit_status_of(program) -> int:
    """``program()`` run as a process's main: the exit status Python would give it (the int it returns or
    SystemExit's code; 130 on Ctrl-C; 1, its traceback printed, on any other error)."""
    try:
        result = program()
        return result if isinstance(result, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1


def flush_and_exit(code: int):
    """End a forked process now, its output flushed (os._exit: none of the parent's exit handlers run)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _exit_code(status: int) -> int:
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def serve(path: str, parent: int, program, warm_up=None) -> None:
    """Accept jobs on ``path`` until the process ``parent`` is gone or the server is told to stop (SIGTERM);
    each runs ``program()`` (csebench.cli.main, which reads its arguments from sys.argv) in a child.
    ``warm_up()`` runs once after the modules load (csebench.cli.build_parser: every package's commands)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)  # a job that connects while the modules load waits here
    for name in PRELOAD:
        if os.getppid() != parent:  # the build is gone (a dry run, a DAG that failed): load nothing more for it
            listener.close()  # (loading the rest, transformers and sklearn, was 5 of the server's 7 CPU-s)
            return
        try:
            __import__(name)
        except Exception:  # a module that cannot load here is loaded (or fails) in the child
            pass
    try:
        from csebench.results.plotting import pyplot

        pyplot()  # on the Agg backend, as the figures draw
    except Exception:
        pass
    try:
        if warm_up is not None:
            warm_up()
    except Exception:  # what fails here fails (and says so) in the child
        pass
    # what is loaded by now lives as long as the server: frozen, no job's collections rescan it, and the pages the
    # children share with the server are not copied for the collector's bookkeeping
    gc.freeze()
    stopping = []
    # SIGTERM (stop) wakes the loop at once through this pair: select() resumes after a handler that returns,
    # so without it the build's end waited out the rest of the 1 s timeout
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("listen", None))
    sel.register(wake_r, selectors.EVENT_READ, ("wake", None))
    jobs: dict[int, tuple[socket.socket, int | None]] = {}  # child pid -> (its client, its pidfd)
    while not stopping and os.getppid() == parent:
        for key, _ in sel.select(timeout=1.0):
            kind, pid = key.data
            if kind == "wake":
                try:
                    wake_r.recv(64)
                except OSError:
                    pass
            elif kind == "listen":
                try:
                    conn, _ = listener.accept()
                    conn.settimeout(30)
                    request, fds = _recv(conn, with_fds=3)
                    conn.settimeout(None)
                except OSError:
                    continue
                if not request or len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                child = os.fork()
                if child == 0:
                    signal.set_wakeup_fd(-1)
                    _run_child(request, fds, [listener, sel, conn, wake_r, wake_w,
                                              *(x for job in jobs.values() for x in job if x is not None)], program)
                for fd in fds:
                    os.close(fd)
                try:
                    _send(conn, {"pid": child})
                except OSError:
                    os.kill(child, signal.SIGTERM)
                pidfd = os.pidfd_open(child) if hasattr(os, "pidfd_open") else None
                jobs[child] = (conn, pidfd)
                sel.register(conn, selectors.EVENT_READ, ("client", child))
                if pidfd is not None:
                    sel.register(pidfd, selectors.EVENT_READ, ("child", child))
            elif kind == "client":  # the job's side closed before its child ended: the job is gone
                try:
                    gone = key.fileobj.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    sel.unregister(key.fileobj)
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
        for pid in list(jobs):  # reap every child that ended; tell its job the exit code
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                continue
            conn, pidfd = jobs.pop(pid)
            for obj in (conn, pidfd):
                if obj is not None:
                    try:
                        sel.unregister(obj)
                    except (KeyError, ValueError):
                        pass
            if pidfd is not None:
                os.close(pidfd)
            try:
                _send(conn, {"rc": _exit_code(status)})
            except OSError:
                pass
            conn.close()
    listener.close()
    for pid, (conn, _) in jobs.items():  # the build is over: what still runs is stopped
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        conn.close()


def worth_starting(rules: list[str] | None) -> bool:
    """Whether a build whose jobs are of ``rules`` (one name per job; None: not known) gains from a server."""
    return rules is None or len(rules) > COLD_JOBS or any(r not in COLD_RULES for r in rules)


def start() -> subprocess.Popen | None:
    """Start the build's server and point this process's future jobs at it (``CSEBENCH_WARM``)."""
    folder = tempfile.mkdtemp(prefix="csebench-warm-")  # private (0700), and short: a socket path is at most ~100 bytes
    path = os.path.join(folder, "socket")
    # not -m: one module object, one IN_CHILD. Once serve returns (its children stopped), the server ends at once:
    # a normal interpreter exit with torch, transformers and sklearn loaded took 2-3 s of the build's end (1.9 CPU-s)
    # tearing those modules down; the server has nothing buffered to flush and no exit handler of its own
    code = ("import os; from csebench.cli import build_parser, main; from csebench.workflow.warm import serve; "
            f"serve({path!r}, {os.getpid()}, main, build_parser); os._exit(0)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if not os.path.exists(path):
        proc.kill()
        return None
    os.environ[ENV] = path
    return proc


def stop(proc: subprocess.Popen | None) -> None:
    """End the build's server; later commands of this process run cold."""
    path = os.environ.pop(ENV, None)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    if path:
        for p in (path, os.path.dirname(path)):
            try:
                os.rmdir(p) if p != path else os.unlink(p)
            except OSError:
                pass


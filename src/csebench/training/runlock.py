"""One training process per run folder: RUN_DIR/.lock names its owner (pid, host) while it runs.

The lock itself is an flock on that file, which the kernel (or the NFS lock manager) drops when
the owner dies however it dies: a lock file nobody holds is stale and is taken over with a warning.
Where the file system has no flock, the pid is checked instead (on the same host).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Iterator

from csebench.core.errors import TrainingError
from csebench.core.io import dumps_json

log = logging.getLogger(__name__)
LOCK_NAME = ".lock"


def _owner(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        owner = json.loads(os.read(fd, 4096).decode("utf-8"))
        return owner if isinstance(owner, dict) else {}
    except (OSError, ValueError):
        return {}


def _describe(owner: dict) -> str:
    if not owner:
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner["since"])) if "since" in owner else "?"
    return f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')} (since {since})"


def _may_run(owner: dict) -> bool:
    """Without flock: whether the owner may still run (a process on another host cannot be checked)."""
    if owner.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(owner["pid"]), 0)
    except (KeyError, ValueError, TypeError, ProcessLookupError):
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _busy(run_dir: Path, path: Path, owner: dict) -> TrainingError:
    return TrainingError(f"run folder {run_dir} is in use by {_describe(owner)}: another csebench train writes "
                         f"there; wait for it to end or stop it (if that process is gone, delete {path})")


def _acquire(run_dir: Path) -> tuple[int, Path]:
    path = run_dir / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(fd)
            os.close(fd)
            raise _busy(run_dir, path, owner) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                os.close(fd)
                raise
            owner = _owner(fd)  # a file system without flock: best effort, by pid
            if owner and _may_run(owner):
                os.close(fd)
                raise _busy(run_dir, path, owner) from None
        # the owner removes the file before it lets go: if we locked a removed file, try the new one
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd, path
        os.close(fd)


@contextlib.contextmanager
def run_lock(run_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold RUN_DIR's lock for the block; a second process gets a TrainingError naming the owner."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    fd, path = _acquire(run_dir)
    try:
        stale = _owner(fd)
        if stale:
            log.warning("run folder %s: taking over the stale lock of %s, which has ended", run_dir, _describe(stale))
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (dumps_json({"pid": os.getpid(), "host": socket.gethostname(), "since": round(time.time())}, indent=None)
                      + "\n").encode())
        yield path
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)

"""Atomic output writing: a file or directory appears under its final name only when complete.

Inside ``staged_outputs()`` the renames wait until the block ends, so a set of outputs (a report, a
paper item, a run's results) appears together or not at all."""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

from csebench.core.errors import DataError

log = logging.getLogger(__name__)

_UMASK = os.umask(0)
os.umask(_UMASK)
# (temporary, final, is_dir) of the atomic writes of the open staged_outputs() block, None outside one
_STAGED: list[tuple[Path, Path, bool]] | None = None
_IN_FLIGHT: set[Path] = set()  # temporaries of atomic_path blocks being written


def _tmp_sibling(path: Path, is_dir: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        return Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(name)


def check_writable(path: str | os.PathLike, is_dir: bool = False) -> None:
    """Before any work: the folder an output goes to (``path`` itself with ``is_dir``, else its parent; the
    nearest one that exists) takes a file. A read-only file system or folder is found now, not after minutes
    of computing; nothing is created."""
    folder = Path(path).absolute()
    folder = folder if is_dir else folder.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        fd, name = tempfile.mkstemp(prefix=".csebench-write-check.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise DataError(f"cannot write {path}: {folder} is not writable ({exc.strerror}); nothing was done") from None
    os.close(fd)
    os.unlink(name)


def open_temporaries() -> list[Path]:
    """The temporaries of the atomic writes in flight (the interrupt handler removes them before a hard exit)."""
    return [*_IN_FLIGHT, *(tmp for tmp, _, _ in _STAGED or [])]


def _follow_umask(tmp: Path, is_dir: bool) -> None:
    """mkstemp/mkdtemp create 0600/0700, and so do some writers inside a folder (safetensors writes
    model.safetensors 0600): give every output the usual permissions, umask applied."""
    os.chmod(tmp, (0o777 if is_dir else 0o666) & ~_UMASK)
    if is_dir:
        for root, dirs, files in os.walk(tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o777 & ~_UMASK)
            for f in files:
                os.chmod(os.path.join(root, f), 0o666 & ~_UMASK)


def remove_path(path: Path) -> None:
    """Delete a file or folder; a symbolic link is unlinked, never deleted through."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _commit(tmp: Path, final: Path, is_dir: bool) -> None:
    if is_dir:
        if final.exists() or final.is_symlink():
            old = final.with_name(f".{final.name}.old")
            remove_path(old)  # a link is unlinked, never deleted through
            final.rename(old)
            tmp.rename(final)
            remove_path(old)
        else:
            tmp.rename(final)
    else:
        os.replace(tmp, final)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling path; on success rename it to ``path``, on error delete it."""
    final = Path(path)
    tmp = _tmp_sibling(final, is_dir)
    _IN_FLIGHT.add(tmp)
    try:
        yield tmp
        _follow_umask(tmp, is_dir)
        if not is_dir:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        if _STAGED is not None:
            _STAGED.append((tmp, final, is_dir))
        else:
            _commit(tmp, final, is_dir)
    except BaseException as exc:
        remove_path(tmp)
        failed = os_error_of(exc, str(final))
        if failed is not None and failed is not exc:  # safetensors' own error for a full disk: an OSError naming the output
            raise failed from None
        raise
    finally:
        _IN_FLIGHT.discard(tmp)


def os_error_of(exc: BaseException, filename: str | None = None) -> OSError | None:
    """The operating system's error behind ``exc``: itself when it is an OSError; for safetensors' writer, which
    reports a failed write (a full disk, a read-only folder) as a SafetensorError whose text ends in
    "(os error 28)", an OSError with that errno naming ``filename``; None for anything else."""
    if isinstance(exc, OSError):
        return exc
    if type(exc).__name__ == "SafetensorError":  # by name: safetensors is imported only where tensors are
        found = re.search(r"\(os error (\d+)\)", str(exc))
        if found:
            code = int(found.group(1))
            return OSError(code, os.strerror(code), filename)
    return None


def replace_dir(src: str | os.PathLike, final: str | os.PathLike) -> None:
    """Move the finished folder ``src`` into place as ``final`` (an existing one is swapped out), as atomic_path does."""
    with atomic_path(final, is_dir=True) as tmp:
        tmp.rmdir()
        Path(src).rename(tmp)


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C is ignored while a set of outputs is renamed into place: the set is never left half old, half new."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def staged_outputs(marker: str | os.PathLike | None = None) -> Iterator[None]:
    """Every atomic write in the block stays under its temporary name until the block has succeeded;
    then all are renamed into place at once, in the order written. On an error or Ctrl-C none is, and
    the temporaries are removed: the previous outputs stay as they were. ``marker`` is the output that
    says the set is complete (train.json): the old one is removed before anything is replaced."""
    global _STAGED
    outer, _STAGED = _STAGED, []
    try:
        yield
        pending = _STAGED
    except BaseException:
        for tmp, _, _ in _STAGED:
            remove_path(tmp)
        raise
    finally:
        _STAGED = outer
    if outer is not None:  # nested: the outer block renames
        outer.extend(pending)
        return
    try:
        with _uninterrupted():
            if marker is not None:
                Path(marker).unlink(missing_ok=True)
            while pending:
                _commit(*pending.pop(0))
    finally:
        for tmp, _, _ in pending:  # what a failed rename left
            remove_path(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def not_a_regular_file(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it is no regular file to read (None when it is one): missing, a dangling link, a
    folder, a device (/dev/zero would be read forever), a named pipe (read once, then gone), a socket. Said so,
    since "not found" misleads about a path that exists."""
    import stat

    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return f"a symbolic link to {os.readlink(p)}, which does not exist" if p.is_symlink() else "not found"
    except OSError as exc:
        return f"not readable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))
    return next((f"{kind}, not a regular file" for test, kind in kinds if test(mode)), "not a regular file")


def read_utf8(path: Path, what: str = "") -> str:
    """A text file that must be UTF-8, its byte-order mark dropped; else one line naming ``what`` (e.g.
    "corpus "), the file and the line of the first bad byte."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{what}{path} is not UTF-8: invalid byte at line {line} (byte offset {exc.start}); "
                        "re-encode it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def non_finite_keys(obj: Any, where: str = "") -> list[str]:
    """Dotted paths of the NaN and infinite floats in ``obj`` (nested dicts, lists, tuples)."""
    if isinstance(obj, float):
        return [] if math.isfinite(obj) else [where or "(top level)"]
    if isinstance(obj, dict):
        return [k for key, v in obj.items() for k in non_finite_keys(v, f"{where}.{key}" if where else str(key))]
    if isinstance(obj, (list, tuple)):
        return [k for i, v in enumerate(obj) for k in non_finite_keys(v, f"{where}.{i}" if where else str(i))]
    return []


def nulled(obj: Any) -> Any:
    """``obj`` with every NaN and infinite float as None: how write_json(undefined_ok=True) writes it."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: nulled(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nulled(v) for v in obj]
    return obj


def dumps_json(obj: Any, indent: int | None = 2, **kwargs) -> str:
    """JSON text, strict: NaN and Infinity are not JSON (bare ``NaN`` breaks strict parsers and hides
    a failed computation), so a non-finite number raises ValueError naming where it is."""
    try:
        return json.dumps(obj, indent=indent, allow_nan=False, **kwargs)
    except ValueError:
        raise ValueError(f"non-finite number at {', '.join(non_finite_keys(obj)) or '?'}: not valid JSON") from None


def write_json(path: str | os.PathLike, obj: Any, undefined_ok: bool = False) -> None:
    """Every JSON file csebench writes goes through here (strict, see dumps_json). ``undefined_ok``: a
    result whose statistics can be legitimately undefined (a Spearman correlation of constant
    embeddings, a dev score never finite) writes those as null, with a warning naming each."""
    if undefined_ok:
        for key in non_finite_keys(obj):
            log.warning("%s: %s is undefined (not a finite number): written as null", path, key)
        obj = nulled(obj)
    write_text(path, dumps_json(obj) + "\n")


def load_npz(path: str | os.PathLike, what: str, remedy: str) -> dict:
    """Every array of an .npz file, read now, so that a truncated or foreign file fails here with one
    line (``what``: "an embeddings table"; ``remedy``: how to make it again), not with a zipfile or
    pickle traceback later."""
    import zipfile
    import zlib

    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, KeyError, TypeError, zipfile.BadZipFile, zlib.error):
        # TypeError: a plain .npy (an array, no context manager); ValueError: not numpy at all
        raise DataError(f"{path} is damaged or not {what}: {remedy}") from None


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_csv(path: str | os.PathLike, header: list[str], rows: list[list[Any]]) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)


def stderr_is_tty() -> bool:
    """Whether someone watches standard error: a progress bar is drawn only then (a file or a pipe, a Snakemake or
    cluster log, gets plain log lines instead)."""
    import sys

    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def save_png(fig, path: str | os.PathLike, dpi: int = 130, footer: str = "", caveat: str = "") -> None:
    """Write a matplotlib figure atomically as PNG and close it; ``footer`` (the provenance line) goes
    under the figure in small grey text (bbox_inches="tight" keeps it in the image), and above it ``caveat``
    (numbers scored on capped evaluation sets: csebench.results.runs.caveat_line), larger and dark red."""
    import textwrap

    import matplotlib.pyplot as plt

    y = 0.0
    if caveat:
        lines = textwrap.wrap(caveat, 120)
        fig.text(0.0, y, "\n".join(lines), fontsize=7, color="#8b0000", ha="left", va="top")
        y -= (len(lines) * 7 * 1.3 + 3) / 72 / fig.get_figheight()  # the caveat's height (points) as a figure fraction
    if footer:
        fig.text(0.0, y, "\n".join(textwrap.wrap(footer, 170)), fontsize=5, color="0.4", ha="left", va="top")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)

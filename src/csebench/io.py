"""Atomic output writing: a file or directory appears under its final name only when complete."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


_UMASK = os.umask(0)
os.umask(_UMASK)


def _tmp_sibling(path: Path, is_dir: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        return Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(name)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling path; on success rename it to ``path``, on error delete it."""
    final = Path(path)
    tmp = _tmp_sibling(final, is_dir)
    try:
        yield tmp
        # mkstemp/mkdtemp create 0600/0700; give the output the usual permissions (umask applied)
        os.chmod(tmp, (0o777 if is_dir else 0o666) & ~_UMASK)
        if is_dir:
            if final.exists():
                old = final.with_name(f".{final.name}.old")
                shutil.rmtree(old, ignore_errors=True)
                final.rename(old)
                tmp.rename(final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(final)
        else:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_csv(path: str | os.PathLike, header: list[str], rows: list[list[Any]]) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)

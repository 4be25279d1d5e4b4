"""Nothing from outside the repository goes into DVC's cache (docs/dvc.md, "Sharing results").

DVC follows symbolic links in the folders it tracks: ``dvc commit`` of a folder holding a link to
``/etc/hostname`` copies that file into ``.dvc/cache``, and ``dvc push`` then uploads it to the team's
remote. csebench itself makes links only inside ``results`` (a suite's views into the run store), so a
link out of the repository in a tracked folder was planted, by hand or by something else, and is refused
by name before DVC reads the folder:

  - ``csebench dvc-commit [TARGET ...]`` (default ``runs.dvc``: the run store, which no stage owns) checks
    the outputs of each ``.dvc`` file or dvc.yaml stage named, then runs ``dvc commit --force`` on them;
  - the Snakefile's first step and its ``onsuccess`` check the folders of the suites it builds and the run
    store, so a ``dvc repro`` stage (whose command is Snakemake) stops before DVC commits its outputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Iterator

from csebench.core.errors import ConfigError, DataError


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def outside_links(folder: str | os.PathLike, *roots: str | os.PathLike) -> Iterator[tuple[Path, str]]:
    """(link, its target as written) for every symbolic link at or under ``folder`` that resolves outside
    every one of ``roots``; links are not followed while walking."""
    folder, real_roots = Path(folder), [os.path.realpath(r) for r in roots]

    def leaves(p: Path) -> bool:
        real = os.path.realpath(p)
        return not any(_within(real, root) for root in real_roots)

    if folder.is_symlink():
        if leaves(folder):
            yield folder, os.readlink(folder)
        return
    if not folder.is_dir():
        return
    for here, dirs, names in os.walk(folder):
        for name in sorted([*dirs, *names]):
            p = Path(here) / name
            if p.is_symlink() and leaves(p):
                yield p, os.readlink(p)
        dirs[:] = sorted(d for d in dirs if not (Path(here) / d).is_symlink())


def refuse_outside_links(paths: Iterable[str | os.PathLike], root: str | os.PathLike,
                         also: str | os.PathLike | None = None) -> None:
    """The first link under any of ``paths`` out of the repository ``root`` (and out of ``also``, a results
    folder that params.yaml put elsewhere, which a view links into), as one line."""
    for path in paths:
        for link, target in outside_links(path, root, *([also] if also is not None else [])):
            raise DataError(f"{link} is a symbolic link to {target}, outside the repository {os.path.abspath(root)}: DVC "
                            "would copy what it points to into .dvc/cache and `dvc push` would upload it; csebench makes "
                            "no such link: remove it")


def repository_root(start: str | os.PathLike = ".") -> Path:
    """The DVC repository the command runs in: the nearest folder holding ``.dvc/`` (else ``start``)."""
    here = Path(start).absolute()
    for folder in (here, *here.parents):
        if (folder / ".dvc").is_dir():
            return folder
    return here


def _outs(entries, base: Path, where: str) -> list[Path]:
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: outs: expected a list, got {entries!r}")
    paths = []
    for out in entries:
        path = out.get("path") if isinstance(out, dict) and "path" in out else \
            next(iter(out)) if isinstance(out, dict) and len(out) == 1 else out
        if not isinstance(path, str):
            raise ConfigError(f"{where}: outs: an entry without a path: {out!r}")
        paths.append(base / path)
    return paths


def tracked_outputs(target: str, root: Path) -> list[Path]:
    """The outputs DVC commits for ``target``: a ``.dvc`` file's outs, or a dvc.yaml stage's."""
    from csebench.core.schema import read_yaml

    if target.endswith(".dvc"):
        f = Path(target)
        if not f.is_file():
            raise ConfigError(f"{target} not found: name a .dvc file (runs.dvc) or a stage of dvc.yaml")
        return _outs((read_yaml(f) or {}).get("outs"), f.parent, target)
    stages = (read_yaml(root / "dvc.yaml") or {}).get("stages") or {} if (root / "dvc.yaml").is_file() else {}
    if target not in stages:
        raise ConfigError(f"{target} is neither a .dvc file nor a stage of {root / 'dvc.yaml'}: name a .dvc file "
                          "(runs.dvc) or a stage (`dvc stage list` lists them)")
    return _outs(stages[target].get("outs") or [], root, f"dvc.yaml: stages.{target}")


def dvc_commit(targets: list[str]) -> int:
    """Check every output of ``targets`` for links out of the repository, then ``dvc commit --force`` them."""
    root = repository_root()
    refuse_outside_links((p for t in targets for p in tracked_outputs(t, root)), root)
    try:
        return subprocess.call([sys.executable, "-m", "dvc", "commit", "--force", *targets])
    except KeyboardInterrupt:
        return 130

"""The build's modification times, kept with the results so a DVC checkout counts as built (docs/dvc.md).

Snakemake decides what to rerun by comparing modification times: a job runs again when one of its
inputs is newer than its oldest output. DVC (``dvc pull``, ``dvc checkout``, a queued experiment's
temporary copy) and ``cp -r`` write every file anew, at the time of the checkout and in no set
order, so after a pull some view, table or evaluation looked older than what it was made from, and
Snakemake planned it again, with everything upstream of it whose inputs (``data/``, not shared) were
missing: whether a pulled suite was planned again, training included, depended on the order in which
DVC happened to write its files.

So every Snakemake run records, per tree that DVC tracks as one output (``paths.tracked_trees``: each
suite's folder, the run store, each paper item's files, the front page), each file's modification
time and size, in a record inside or beside the tree that DVC tracks and restores with it
(``record_times``: the Snakefile's first step and its ``onsuccess``/``onerror``). A record is rewritten
only when its tree changed, so an unchanged tree keeps its DVC hash. The record file's own
modification time is set to the stamp written in it.

Before a Snakemake run plans anything (``restore_times``), a record whose file no longer carries its
stamp was written by a checkout or a copy. Every such tree gets its recorded times back, all shifted by
one offset that makes the newest of them now: the order of the build is kept within and across the
trees restored, and they are newer than anything of this checkout they did not come with (a prepared
``data/`` corpus, a paper table rendered from the results the pull replaced, which Snakemake then
renders again). The links a suite's view had into the run store (``model``), which DVC does not store,
are made again, and a link that ``dvc repro``/``dvc commit`` replaced by a copy of its target gets the
link's time. A record that still carries its stamp is left alone, so a file edited by hand after a
build stays newer than what reads it and Snakemake reruns what depends on it, as without records.
Only modification times and those links change; no file's content does.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

from .paths import TIMES_RECORD, tracked_trees


def _staging(name: str) -> bool:
    """A write in progress (csebench.io's ``.<name>.<random>.tmp``): not a result."""
    return name.startswith(".") and name.endswith(".tmp")


def _scan(tree: Path, record: Path) -> tuple[dict[str, list[int]], dict[str, list]]:
    """Every file of a folder tree: rel -> [mtime_ns, size]; every link: rel -> [target, the link's
    own mtime_ns (what Snakemake compares), the size of the file it points to, None for a folder]."""
    files: dict[str, list[int]] = {}
    links: dict[str, list] = {}
    for root, dirs, names in os.walk(tree):
        rootp = Path(root)
        for name in [*names, *dirs]:
            p = rootp / name
            rel = p.relative_to(tree).as_posix()
            if p.is_symlink():
                target = p.resolve()
                links[rel] = [os.readlink(p), p.lstat().st_mtime_ns, target.stat().st_size if target.is_file() else None]
            elif name in names and p != record and not _staging(name):
                st = p.stat()
                files[rel] = [st.st_mtime_ns, st.st_size]
        dirs[:] = [d for d in dirs if not (rootp / d).is_symlink()]
    return files, links


def _group_files(tree: Path, record: Path) -> dict[str, list[int]]:
    """A group of single files one stage writes (a paper item's md/csv/tex, the front page)."""
    files = {}
    for p in sorted(tree.glob(f"{_stem(record)}.*")):
        if p.is_file() and not p.is_symlink() and p != record:
            st = p.stat()
            files[p.name] = [st.st_mtime_ns, st.st_size]
    return files


def _stem(record: Path) -> str:
    return record.name[1:].removesuffix(f".{TIMES_RECORD}")


def _is_folder_record(record: Path) -> bool:
    return record.name == f".{TIMES_RECORD}"


def _read(record: Path) -> dict | None:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("stamp"), int) and isinstance(data.get("files"), dict)
    return data if ok else None


def _deltas(old: dict, files: dict, links: dict) -> set[int] | None:
    """The offsets between a tree's times and its record's; None if a file is new or has another size
    (a file that is gone, such as a model card DVC does not pull, changes nothing Snakemake compares).
    A link that DVC replaced by a copy of its target is the same entry."""
    deltas = set()
    old_links = old.get("links", {})
    for rel, (mtime, size) in files.items():
        if rel in old["files"] and old["files"][rel][1] == size:
            deltas.add(mtime - old["files"][rel][0])
        elif rel in old_links and old_links[rel][2] == size:
            deltas.add(mtime - old_links[rel][1])
        else:
            return None
    for rel, (target, mtime, size) in links.items():
        if rel not in old_links or old_links[rel][0] != target:
            return None
        deltas.add(mtime - old_links[rel][1])
    return deltas


def record_times(results: str | Path) -> list[str]:
    """Write the record of every tracked tree under ``results`` that changed since its record (a tree
    restored by ``restore_times`` is unchanged: its times differ from the record by one offset).
    Returns the records written."""
    from .io import dumps_json, write_text

    written = []
    for tree, record in tracked_trees(results):
        if _is_folder_record(record):
            files, links = _scan(tree, record)
        else:
            files, links = _group_files(tree, record), {}
        if not files and not links:
            continue
        old = _read(record) if record.is_file() else None
        if old and record.stat().st_mtime_ns == old["stamp"] and len(_deltas(old, files, links) or ()) == 1:
            continue
        stamp = max([time.time_ns(), *(m for m, _ in files.values())])
        text = dumps_json({"stamp": stamp, "files": files, "links": links}, indent=None, sort_keys=True, separators=(",", ":"))
        write_text(record, text + "\n")
        os.utime(record, ns=(stamp, stamp))
        written.append(str(record))
    return written


def restore_times(results: str | Path) -> list[tuple[str, int]]:
    """Give every tree under ``results`` that a checkout or a copy wrote anew its recorded build times
    (see the module's docstring). Returns (what, files changed) for each tree where anything changed."""
    trees = []
    for tree, record in tracked_trees(results):
        data = _read(record) if record.is_file() else None
        if data is not None:
            trees.append((tree, record, data, record.stat().st_mtime_ns != data["stamp"]))
    stamps = [data["stamp"] for _, _, data, checked_out in trees if checked_out]
    offset = time.time_ns() - max(stamps) if stamps else 0
    restored = []
    for tree, record, data, checked_out in trees:
        base = record.parent
        shift = offset if checked_out else _current_offset(base, data["files"])
        n = 0
        if checked_out:
            for rel, (mtime, size) in data["files"].items():
                n += _set_time(base / rel, mtime + shift, size)
        for rel, (target, mtime, size) in data.get("links", {}).items():
            p = base / rel
            if p.is_symlink():
                if checked_out:  # a copy of the tree kept its links (cp -a): their own times too
                    os.utime(p, ns=(mtime + shift, mtime + shift), follow_symlinks=False)
            elif p.exists():  # `dvc repro`/`dvc commit` replaced the link by a copy of its target, written then
                n += _set_time(p, mtime + shift, size) if size is not None else 0
            elif (p.parent / target).exists():  # DVC stores no link to a folder
                p.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, p)
                os.utime(p, ns=(mtime + shift, mtime + shift), follow_symlinks=False)
                n += 1
        if checked_out:
            os.utime(record, ns=(data["stamp"], data["stamp"]))
        if n:
            restored.append((_label(tree, record), n))
    return restored


def _current_offset(base: Path, files: dict) -> int:
    """The offset a tree's files carry now (restored earlier with one), 0 for a tree as built."""
    deltas = Counter()
    for rel, (mtime, size) in files.items():
        try:
            st = (base / rel).lstat()
        except FileNotFoundError:
            continue
        if st.st_size == size:
            deltas[st.st_mtime_ns - mtime] += 1
    return deltas.most_common(1)[0][0] if deltas else 0


def _set_time(p: Path, mtime: int, size: int) -> int:
    try:
        st = p.lstat()
    except FileNotFoundError:
        return 0  # not pulled (a model card DVC ignores), or removed since: Snakemake decides
    if p.is_symlink() or not p.is_file() or st.st_size != size or st.st_mtime_ns == mtime:
        return 0  # not the file the build wrote, or already right
    os.utime(p, ns=(st.st_atime_ns, mtime))
    return 1


def _label(tree: Path, record: Path) -> str:
    """What a record covers, for messages: its folder, or its group of files (``papers/x/table-1.*``)."""
    return str(tree) if _is_folder_record(record) else f"{tree}/{_stem(record)}.*"

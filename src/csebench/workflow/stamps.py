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
modification time is set to the stamp written in it. A link whose target lies outside ``results`` is
not recorded (the rehearsal's links to the shared data): no record of csebench's names one.

Before a Snakemake run plans anything (``restore_times``), a record whose file no longer carries its
stamp was written by a checkout or a copy. Every such tree gets its recorded times back, all shifted by
one offset that makes the newest of them now: the order of the build is kept within and across the
trees restored, and they are newer than anything of this checkout they did not come with (a prepared
``data/`` corpus, a paper table rendered from the results the pull replaced, which Snakemake then
renders again). A link that ``dvc repro``/``dvc commit`` replaced by a copy of its target gets the
link's time. A record that still carries its stamp is left alone, so a file edited by hand after a
build stays newer than what reads it and Snakemake reruns what depends on it, as without records.

A record comes from wherever the results were pulled from (a DVC remote that anyone with write access
fills), so it is data about the files of its own tree, never a list of places to write. Restoring
changes only the modification times of files and links that are already there, inside the record's
tree, reached without passing through a link, and of the size recorded; it creates no file, folder or
link from a record. An entry that leaves its tree (``..``, an absolute path, a path through a link), a
link entry whose recorded target leaves ``results``, and a malformed entry or record are ignored, with
one warning naming the record; a record with such entries is rewritten from the files on disk by the
next ``record_times``.

The one thing made anew is the ``model`` link of a suite's view (``results/<suite>/runs/<run>/seed<N>/
model``), which DVC does not store (it stores no link to a folder) and which no rule writes again
(``model`` is no rule's output, so Snakemake would not notice it missing). Its target is never read from
the record: the caller passes ``view_model``, which computes the run's model folder from params.yaml
(the run's identity, csebench.study.jobs.Runs) for a suite, run and seed that params.yaml lists; the link is
made only where the view's folder exists (pulled) and the target is a folder inside ``results``. The
record supplies only the link's time.

Snakemake takes its lock only after building the DAG, which needs these times, so restoring cannot
run under it; the Snakefile restores only while no other Snakemake run holds a lock in the project
(csebench.workflow.steps.restore_times), whose jobs would be reading and writing these trees.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from csebench.core.paths import TIMES_RECORD, tracked_trees

_TIME_MAX = 1 << 62  # nanoseconds: year 2116; a larger "time" is no file's and os.utime would overflow on it
_VIEW_MODEL = re.compile(r"runs/([A-Za-z0-9][A-Za-z0-9_.+-]*)/seed([0-9]+)/model")


def _staging(name: str) -> bool:
    """A write in progress (csebench.core.io's ``.<name>.<random>.tmp``): not a result."""
    return name.startswith(".") and name.endswith(".tmp")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _link_target_inside(link: Path, target: str, results: Path) -> bool:
    """A link at ``link`` to ``target`` (as os.readlink gives it) stays inside ``results``, read as written
    and as the file system resolves it now."""
    if not target or "\0" in target or os.path.isabs(target):
        return False
    root = os.path.abspath(results)
    written = os.path.normpath(os.path.join(os.path.abspath(link.parent), target))
    return _within(written, root) and _within(os.path.realpath(written), os.path.realpath(root))


def _scan(tree: Path, record: Path, results: Path) -> tuple[dict[str, list[int]], dict[str, list]]:
    """Every file of a folder tree: rel -> [mtime_ns, size]; every link that stays inside ``results``:
    rel -> [target, the link's own mtime_ns (what Snakemake compares), the size of the file it points to,
    None for a folder]."""
    files: dict[str, list[int]] = {}
    links: dict[str, list] = {}
    for root, dirs, names in os.walk(tree):
        rootp = Path(root)
        for name in [*names, *dirs]:
            p = rootp / name
            rel = p.relative_to(tree).as_posix()
            if p.is_symlink():
                target = os.readlink(p)
                if _link_target_inside(p, target, results):
                    resolved = p.resolve()
                    links[rel] = [target, p.lstat().st_mtime_ns, resolved.stat().st_size if resolved.is_file() else None]
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


def _is_time(v) -> bool:
    return type(v) is int and 0 <= v < _TIME_MAX


def _is_size(v) -> bool:
    return type(v) is int and 0 <= v < _TIME_MAX


def _relative_inside(rel) -> bool:
    """A path relative to its tree that names something in it: no absolute path, no ``..``, ``.`` or
    empty part (what _scan writes: Path.as_posix of a path below the tree)."""
    return (isinstance(rel, str) and bool(rel) and "\0" not in rel and not rel.startswith("/")
            and all(part not in ("", ".", "..") for part in rel.split("/")))


def _read(record: Path, tree: Path, results: Path) -> tuple[dict | None, int | str]:
    """The record's stamp and its well-formed entries, and what was ignored: how many entries, or why the
    whole record. Every entry names a file of the record's own tree: a folder record's any path below it,
    a group record's ``<stem>.*`` beside it; a link entry's target stays inside ``results``."""
    if record.is_symlink():
        return None, "a symbolic link, not a record: ignored"
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, 0
    except (OSError, ValueError):
        data = None
    links = data.get("links", {}) if isinstance(data, dict) else None
    if not (isinstance(data, dict) and _is_time(data.get("stamp")) and isinstance(data.get("files"), dict)
            and isinstance(links, dict)):
        return None, "not a record of build times (JSON: stamp, files, links): ignored"
    folder = _is_folder_record(record)
    stem = None if folder else _stem(record)

    def names_its_own(rel) -> bool:
        return _relative_inside(rel) and rel != record.name and (folder or ("/" not in rel and rel.startswith(f"{stem}.")))

    def before_stamp(t) -> bool:  # record_times stamps a record no earlier than its newest file: restored times stay <= now
        return _is_time(t) and t <= data["stamp"]

    files = {rel: v for rel, v in data["files"].items()
             if names_its_own(rel) and isinstance(v, list) and len(v) == 2 and before_stamp(v[0]) and _is_size(v[1])}
    good_links = {rel: v for rel, v in links.items()
                  if folder and names_its_own(rel) and isinstance(v, list) and len(v) == 3 and isinstance(v[0], str)
                  and before_stamp(v[1]) and (v[2] is None or _is_size(v[2])) and _link_target_inside(tree / rel, v[0], results)}
    ignored = len(data["files"]) - len(files) + len(links) - len(good_links)
    return {"stamp": data["stamp"], "files": files, "links": good_links}, ignored


def _ignored(record: Path, tree: Path, results: Path, what: int | str) -> str:
    """The one warning naming a record and what of it was ignored."""
    if isinstance(what, int):
        what = (f"{what} {'entry' if what == 1 else 'entries'} ignored (a path out of {tree}, a link out of {results}, "
                "or malformed)")
    return f"{record}: {what}; a record of build times only dates files already in its folder, it never creates any"


def _deltas(old: dict, files: dict, links: dict) -> set[int] | None:
    """The offsets between a tree's times and its record's; None if a file is new or has another size
    (a file that is gone, such as a model card DVC does not pull, changes nothing Snakemake compares).
    A link that DVC replaced by a copy of its target is the same entry."""
    deltas = set()
    old_links = old["links"]
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
    restored by ``restore_times`` is unchanged: its times differ from the record by one offset), or whose
    record is not one csebench wrote (entries ``restore_times`` ignored). Returns the records written."""
    from csebench.core.io import dumps_json, write_text

    results = Path(results)
    written = []
    for tree, record in tracked_trees(results):
        if _is_folder_record(record):
            files, links = _scan(tree, record, results)
        else:
            files, links = _group_files(tree, record), {}
        if not files and not links:
            continue
        old, ignored = _read(record, tree, results)
        if old and not ignored and record.lstat().st_mtime_ns == old["stamp"] and len(_deltas(old, files, links) or ()) == 1:
            continue
        stamp = max([time.time_ns(), *(m for m, _ in files.values())])
        text = dumps_json({"stamp": stamp, "files": files, "links": links}, indent=None, sort_keys=True, separators=(",", ":"))
        write_text(record, text + "\n")  # atomic: a record that was a link is replaced, what it pointed to untouched
        os.utime(record, ns=(stamp, stamp), follow_symlinks=False)
        written.append(str(record))
    return written


def checked_out(results: str | Path) -> list[str]:
    """The records a checkout or a copy wrote anew (their file no longer carries their stamp): the trees
    ``restore_times`` would give times back. Reads only."""
    results = Path(results)
    found = []
    for tree, record in tracked_trees(results):
        data, _ = _read(record, tree, results)
        if data is not None and record.lstat().st_mtime_ns != data["stamp"]:
            found.append(str(record))
    return found


def _warn(message: str) -> None:
    print(f"csebench: warning: {message}", file=sys.stderr)


def restore_times(results: str | Path, view_model: Callable[[str, str, int], str | None] | None = None,
                  warn: Callable[[str], None] = _warn) -> list[tuple[str, int]]:
    """Give every tree under ``results`` that a checkout or a copy wrote anew its recorded build times
    (see the module's docstring). ``view_model(suite, run, seed)``: the run's model folder that suite's
    view links to, computed from params.yaml (None: params.yaml lists no such view). Each record with
    something ignored is named once through ``warn``. Returns (what, files changed) for each tree where
    anything changed."""
    results = Path(results)
    trees = []
    for tree, record in tracked_trees(results):
        data, ignored = _read(record, tree, results)
        if data is not None:
            real_tree = os.path.realpath(tree)  # an entry reached through a link is not the tree's
            through = [rel for rel in [*data["files"], *data["links"]] if _in_tree(tree, rel, real_tree) is None]
            for rel in through:
                data["files"].pop(rel, None)
                data["links"].pop(rel, None)
            ignored += len(through)
            trees.append((tree, record, data, record.lstat().st_mtime_ns != data["stamp"]))
        if ignored:
            warn(_ignored(record, tree, results, ignored))
    stamps = [data["stamp"] for _, _, data, checked in trees if checked]
    offset = time.time_ns() - max(stamps) if stamps else 0
    restored = []
    for tree, record, data, checked in trees:
        shift = offset if checked else _current_offset(tree, data["files"])
        n = 0
        if checked:
            for rel, (mtime, size) in data["files"].items():
                n += _set_time(tree / rel, mtime + shift, size)
        for rel, (_, mtime, size) in data["links"].items():
            p = tree / rel
            if p.is_symlink():
                if checked:  # a copy of the tree kept its links (cp -a): their own times too
                    _set_link_time(p, mtime + shift)
            elif p.exists():  # `dvc repro`/`dvc commit` replaced the link by a copy of its target, written then
                n += _set_time(p, mtime + shift, size) if size is not None else 0
            elif view_model is not None and _make_view_model_link(results, tree, rel, view_model):
                _set_link_time(p, mtime + shift)  # DVC stores no link to a folder: made from params.yaml
                n += 1
        if checked:
            os.utime(record, ns=(data["stamp"], data["stamp"]), follow_symlinks=False)
        if n:
            restored.append((_label(tree, record), n))
    return restored


def _in_tree(tree: Path, rel: str, real_tree: str) -> Path | None:
    """``tree/rel`` if its folder is inside the tree as the file system resolves it (no link on the way)."""
    p = tree / rel
    return p if _within(os.path.realpath(p.parent), real_tree) else None


def _make_view_model_link(results: Path, tree: Path, rel: str, view_model: Callable[[str, str, int], str | None]) -> bool:
    """The ``model`` link of a suite's view that a checkout did not bring, to the folder ``view_model``
    computes; only into an existing view folder, only to a folder inside ``results``."""
    m = _VIEW_MODEL.fullmatch(rel)
    if not m:
        return False
    target = view_model(tree.name, m[1], int(m[2]))
    link = tree / rel
    if not target or not link.parent.is_dir() or not Path(target).is_dir():
        return False
    if not _within(os.path.realpath(target), os.path.realpath(results)):
        return False
    try:
        os.symlink(os.path.relpath(os.path.abspath(target), os.path.abspath(link.parent)), link)
    except OSError:  # made meanwhile: leave it
        return False
    return True


def _current_offset(tree: Path, files: dict) -> int:
    """The offset a tree's files carry now (restored earlier with one), 0 for a tree as built."""
    deltas = Counter()
    for rel, (mtime, size) in files.items():
        try:
            st = (tree / rel).lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if st.st_size == size:
            deltas[st.st_mtime_ns - mtime] += 1
    return deltas.most_common(1)[0][0] if deltas else 0


def _set_link_time(p: Path, mtime: int) -> None:
    try:
        os.utime(p, ns=(mtime, mtime), follow_symlinks=False)
    except (OSError, OverflowError):
        pass


def _set_time(p: Path, mtime: int, size: int) -> int:
    try:
        st = p.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return 0  # not pulled (a model card DVC ignores), or removed since: Snakemake decides
    if p.is_symlink() or not p.is_file() or st.st_size != size or st.st_mtime_ns == mtime:
        return 0  # not the file the build wrote, or already right
    try:
        os.utime(p, ns=(st.st_atime_ns, mtime), follow_symlinks=False)  # never through a link put there since
    except (OSError, OverflowError):
        return 0
    return 1


def _label(tree: Path, record: Path) -> str:
    """What a record covers, for messages: its folder, or its group of files (``papers/x/table-1.*``)."""
    return str(tree) if _is_folder_record(record) else f"{tree}/{_stem(record)}.*"

"""Where a run's files live: the one run-path function, read by the Snakemake rules (through
csebench.workflow) and by the result readers (csebench.results). A leaf module."""

from __future__ import annotations


def results_root(params: dict | None) -> str:
    return ((params or {}).get("paths") or {}).get("results", "results")


def key_dir(results: str, key: str, seed) -> str:
    """``{results}/runs/{key}/seed{seed}``: where one distinct run is trained and evaluated, whichever
    suites list it (csebench.workflow.Runs; Snakemake's RUN pattern passes wildcards)."""
    return f"{results}/runs/{key}/seed{seed}"


def run_dir(params: dict | None, suite: str, run: str, seed: int, results: str | None = None) -> str:
    """``{results}/{suite}/runs/{run}/seed{seed}``; ``results`` defaults to params' paths.results."""
    return f"{results or results_root(params)}/{suite}/runs/{run}/seed{seed}"


# The build's modification times, kept in each tree that DVC tracks (csebench.stamps, docs/dvc.md).
TIMES_RECORD = "csebench-times.json"
FRONT_PAGE = "README.md"


def times_record(tree, group: str | None = None):
    """The record of a tracked folder (``<tree>/.csebench-times.json``) or of a group of single files
    in it that one DVC stage writes (a paper item's md/csv/tex, the front page: ``<tree>/.<stem>.csebench-times.json``)."""
    from pathlib import Path

    return Path(tree) / (f".{TIMES_RECORD}" if group is None else f".{group}.{TIMES_RECORD}")


def tracked_trees(results):
    """(tree, record) of everything under ``results`` that DVC tracks as one output: each suite's
    folder and the run store (a record inside), each paper item's files and the front page (a record
    beside them, also an output of their stage: csebench.dvcgen)."""
    from pathlib import Path

    root = Path(results)
    if not root.is_dir():
        return
    for d in sorted(root.iterdir()):
        if d.is_dir() and not d.is_symlink() and d.name != "papers":
            yield d, times_record(d)
    yield from _groups(root, only="README")
    if (root / "papers").is_dir():
        for paper in sorted(p for p in (root / "papers").iterdir() if p.is_dir() and p.name != "logs"):
            yield from _groups(paper)


def _groups(folder, only: str | None = None):
    """(folder, record) of each group of single files in a folder: the files named <stem>.*"""
    if not folder.is_dir():
        return
    stems = {f.name.split(".")[0] for f in folder.iterdir() if f.is_file() and not f.name.startswith(".")}
    stems |= {f.name[1:].removesuffix(f".{TIMES_RECORD}") for f in folder.glob(f".*.{TIMES_RECORD}")}
    for stem in sorted(stems):
        if only is None or stem == only:
            yield folder, times_record(folder, stem)

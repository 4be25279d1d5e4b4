"""A suite's view of a run that is trained once for every suite listing it (docs/runs.md).

A run lives in results/runs/{key}/seed{seed} (csebench.study.jobs.Runs). What a suite reads, and a
reader browses, stays where it was: results/{suite}/runs/{run}/seed{seed} and
results/{suite}/analysis/{run}/seed{seed}. ``write_view`` fills such a folder from the run's folder:

  - a JSON result that names its run (train.json, sts.json, transfer.json, probing.json, a per-run
    analysis) is copied with this suite's names in it (run_info, label, suite/run/method/backbone),
    so reports and figures show ``ablation-iscse-buffer/buffer-1024`` and not the first suite's name,
    plus ``run_folder`` (where the run is) and ``same_run_as`` (the first suite/run listing it, or
    null when this is that one);
  - a per-run analysis Markdown table is copied with the label in its title replaced the same way;
  - anything else (model/, curves, sts_pairs.npz, embeddings.npz) is a relative symlink into the run's
    folder: `rsync -a` of results/ keeps them, `rsync -a --copy-unsafe-links results/SUITE` copies
    the files of one suite.

Each entry is replaced atomically (a temporary name renamed over it): a view is never half written.
"""

from __future__ import annotations

import os
from pathlib import Path

from csebench.core.errors import DataError
from csebench.core.io import read_json, write_json, write_text


def _relabel(data: dict, info: dict, extra: dict) -> dict | None:
    """The JSON result with this suite's names (``info``: config.run_info), or None when it names no
    run (then it is linked)."""
    out = dict(data)
    if isinstance(data.get("run_info"), dict):  # sts.json, transfer.json, probing.json
        out["run_info"] = {**data["run_info"], **info}
    elif "analysis" in data and "label" in data:  # a per-run analysis
        out["label"] = label_of(info)
    elif {"run", "suite", "method", "backbone"} <= set(data):  # train.json
        out.update(run=f"{info['name']}/seed{info['seed']}", suite=info["suite"], method=info["method"],
                   backbone=info["backbone"])
    else:
        return None
    return {**out, **extra}


def label_of(info: dict) -> str:
    return f"{info['name']} s{info['seed']}"


def _link(src: Path, dst: Path) -> None:
    if dst.is_dir() and not dst.is_symlink():
        raise DataError(f"{dst} is a folder, not a link into the run's folder {src.parent}: a run trained there by a "
                        "csebench before runs were shared (docs/runs.md, \"Upgrading\"); move it away or delete it")
    tmp = dst.with_name(f".{dst.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(src, dst.parent), tmp)
    os.replace(tmp, dst)


def _run_folder(source: Path, seed: int) -> str:
    """The run's folder (results/runs/KEY/seedN) that ``source`` is or lies in."""
    for folder in (source, *source.parents):
        if folder.name == f"seed{seed}":
            return folder.as_posix()
    raise DataError(f"{source} is not in a run's folder (results/runs/KEY/seed{seed}[/...])")


EVALUATIONS = {"sts.json": "sts", "transfer.json": "transfer", "probing.json": "probing"}


def _read_checked(src: Path):
    """A run's JSON result as the tables read it (csebench.results.runs.read_result, check_scores): a truncated or
    hand-edited one is one line naming it here, not a traceback, nor a view that passes it on."""
    from csebench.results.runs import check_scores, read_result

    data = read_result(src)
    if src.name in EVALUATIONS:
        check_scores(src, data, EVALUATIONS[src.name])
    return data


def write_view(info: dict, first: str, source: str | os.PathLike, out: str | os.PathLike, names: list[str]) -> None:
    """Make ``out``/NAME for each NAME in ``source`` (a run's folder, or its evaluation or analysis
    folder): a relabelled copy or a relative link, as the module docstring says. ``info`` names the
    suite's run (config.run_info), ``first`` is 'suite/run' of the first suite and run listing it."""
    source, out = Path(source), Path(out)
    this = f"{info['suite']}/{info['name']}"
    extra = {"run_folder": _run_folder(source, info["seed"]), "same_run_as": None if first == this else first}
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        src = source / name
        if not src.exists():
            raise DataError(f"{src} not found: the run's {name} is made by its own job first (Snakemake does)")
        if name.endswith(".json") and isinstance(data := _read_checked(src), dict) and \
                (copy := _relabel(data, info, extra)) is not None:
            write_json(out / name, copy, undefined_ok=True)
        elif name.endswith(".md") and src.with_suffix(".json").is_file() and \
                (theirs := read_json(src.with_suffix(".json")).get("label")):
            text = src.read_text(encoding="utf-8")
            write_text(out / name, text.replace(f"({theirs})", f"({label_of(info)})", 1))
        else:
            _link(src, out / name)

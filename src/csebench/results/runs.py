"""The result files of a run, read once: one RunResult per evaluation file (sts.json, transfer.json,
probing.json), the run path, training curves, and the mean ± std over seeds that every table prints.

A run is named ``suite/run`` (RunRef); its files live in ``csebench.study.params.run_dir`` (the one run path,
shared with the Snakemake rules).
"""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from csebench.evaluation import PRINTED, STS_TASKS, TRANSFER_TASKS
from csebench.core.paths import view_dir


@dataclass(frozen=True)
class Kind:
    """A kind of evaluation file and the table it makes."""
    name: str                 # "sts" | "transfer" | "probing"
    tasks: list[str]          # the keys of its "tasks" whose mean is the average ([] = no fixed set)
    columns: list[str]        # printed column names of the suite table, without the average
    title: str
    unit: str


KINDS = {
    "sts": Kind("sts", STS_TASKS, [PRINTED.get(t, t) for t in STS_TASKS], "STS test sets",
                "Spearman correlation x 100, \"all\" setting"),
    "transfer": Kind("transfer", TRANSFER_TASKS, TRANSFER_TASKS, "SentEval transfer tasks", "classification accuracy (%)"),
    "probing": Kind("probing", [], [], "SentEval probing tasks", "accuracy (%)"),
}


def task_key(kind: str, name: str) -> str:
    """A task as the result file names it, from its printed name (STS-B -> STSBenchmark, SST -> SST2)."""
    keys = {PRINTED.get(t, t): t for t in KINDS[kind].tasks}
    return keys.get(name, name)


@dataclass(frozen=True)
class RunRef:
    suite: str
    run: str

    def __str__(self) -> str:
        return f"{self.suite}/{self.run}"


def parse_run(ref: str, default_suite: str) -> RunRef:
    """``suite/run``, or a bare run name of ``default_suite``."""
    if "/" in ref:
        suite, run = ref.split("/", 1)
        return RunRef(suite, run)
    return RunRef(default_suite, ref)


def run_path(results: str, ref: RunRef, seed: int) -> str:
    """The suite's view of the run (results/SUITE/runs/RUN/seedN)."""
    return view_dir(results, ref.suite, ref.run, seed)


# --------------------------------------------------------------------------------------- reading

REMAKE = "make it again (delete it and rerun the job that writes it; Snakemake rebuilds a missing file)"


@lru_cache(maxsize=4096)
def _json(path: str, stamp: tuple[int, int]):
    return read_result(path)


def read_json_cached(path: str | os.PathLike):
    """A result JSON, read once per version (renderers ask for the same file many times) and checked as read_result
    checks it; None if absent."""
    if not os.path.isfile(path):
        return None
    st = os.stat(path)
    return _json(str(path), (st.st_mtime_ns, st.st_size))


def read_result(path: str | os.PathLike):
    """A result JSON as csebench wrote it, else one line naming the file: not UTF-8 or not JSON (a truncated file),
    or a NaN or Infinity in it (csebench writes an undefined number as null: one there was written by hand). A
    result whose scores differ from the digest its provenance recorded when it was written (csebench.core.provenance.
    written_as_recorded) is read, its provenance block marked, so that every footer drawn from it says so, and a
    warning names it."""
    import json
    import logging

    from csebench.core.errors import DataError
    from csebench.core.io import non_finite_keys
    from csebench.core.provenance import CHANGED, written_as_recorded

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text (byte offset {exc.start}): not a result csebench wrote; {REMAKE}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON ({exc.msg}: line {exc.lineno}, column {exc.colno}): truncated or "
                        f"damaged; {REMAKE}") from None
    bad = non_finite_keys(data)
    if bad:
        shown = dig(data, bad[0])
        raise DataError(f"{path}: {bad[0]} is {'NaN or Infinity' if shown is None else shown}, which csebench never "
                        f"writes (an undefined number is written as null): the file was changed after it was written; "
                        f"{REMAKE}")
    if written_as_recorded(data) is False:
        data["provenance"] = {**data["provenance"], CHANGED: str(path)}
        logging.getLogger("csebench").warning("%s: its scores differ from those its provenance recorded when csebench "
                                              "wrote it (changed by hand?); tables drawn from it say so", path)
    return data


# the range of a score of each kind: Spearman x 100 (STS, your own STS sets), accuracy in % (transfer, probing)
SCORE_RANGE = {"sts": (-100.0, 100.0), "transfer": (0.0, 100.0), "probing": (0.0, 100.0)}


def check_scores(path: str | os.PathLike, res, kind: str) -> None:
    """An evaluation file (sts.json, transfer.json, probing.json) as its command writes it, else one line naming the
    file: a mapping of tasks, each score null (undefined) or a number in the kind's range, your own STS sets' too,
    and an average (``avg``: the mean of all the kind's tasks; ``avg_subset``: of ``avg_tasks``) that is the mean
    of its tasks. A number typed into the file by hand fails here rather than in a table."""
    from csebench.core.errors import DataError
    from csebench.core.schema import brief

    low, high = SCORE_RANGE[kind]

    def fail(what: str):
        raise DataError(f"{path}: {what}: not a {kind} result as `csebench eval-{kind}` writes it (changed after it was "
                        f"written?); {REMAKE}")

    def score(where: str, value, lo: float = low, hi: float = high) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(f"{where} is {brief(value)}, not a number")
        if not lo <= value <= hi:
            fail(f"{where} is {value}, outside [{lo:g}, {hi:g}]")
        return float(value)

    if not isinstance(res, dict):
        fail(f"a {type(res).__name__}, not a mapping")
    tasks = res.get("tasks", {})
    if not isinstance(tasks, dict):
        fail(f"tasks is {brief(tasks)}, not a mapping of task to score")
    values = {t: score(t, v) for t, v in tasks.items()}
    for name, entry in (res.get("extra_sets") or {}).items() if isinstance(res.get("extra_sets"), dict) else ():
        score(f"extra_sets.{name}.spearman", entry.get("spearman") if isinstance(entry, dict) else entry, -100.0, 100.0)
    every = KINDS[kind].tasks
    # avg: the mean of all the kind's tasks; in an older file that scored some only, of those (never shown as Avg.)
    whole = every if all(t in values for t in every) else [t for t in every if t in values]
    for key, over in (("avg", whole), ("avg_subset", res.get("avg_tasks"))):
        avg = score(key, res.get(key))
        if avg is None:
            continue
        if not (isinstance(over, list) and all(isinstance(t, str) for t in over)):
            fail(f"{key} is {avg} but its tasks are {brief(over)}, not a list of task names")
        missing = [t for t in over if values.get(t) is None]
        if not over or missing:
            fail(f"{key} is {avg} but {', '.join(map(str, missing)) or 'no task'} has no score to average")
        mean = float(np.mean([values[t] for t in over]))
        if abs(avg - mean) > 1e-6 * max(1.0, abs(mean)):
            fail(f"{key} is {avg}, but the mean of its {len(over)} tasks is {mean:.6f}")


def dig(obj, path: str):
    """``a.b.0.c`` into nested dicts/lists; None where absent."""
    for part in path.split(".") if path else []:
        if isinstance(obj, list):
            try:
                obj = obj[int(part)]
            except (ValueError, IndexError):
                return None
        elif isinstance(obj, dict):
            if part not in obj:
                return None
            obj = obj[part]
        else:
            return None
    return obj


def number(x) -> float | None:
    """A finite-or-infinite float, None for anything else (null, NaN, true/false, text)."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


@dataclass
class RunResult:
    """One evaluation file of one run and seed: its scores, the run's identity and its provenance."""
    path: Path
    kind: str
    tasks: dict
    avg: float | None          # the average over all the kind's tasks only, never a subset's
    info: dict                 # suite, name, seed, method, backbone (+ labels), from run_info then train.json
    protocol: str = "full"
    warning: str | None = None
    provenance: list = field(default_factory=list)  # the blocks of this file and of the run's train.json
    same_run_as: str | None = None  # "suite/run" where a suite's view shows another suite's run (docs/runs.md)

    @classmethod
    def from_disk(cls, path: str | os.PathLike, kind: str) -> RunResult | None:
        from csebench.core.provenance import blocks_of

        path = Path(path)
        res = read_json_cached(path)
        if res is None:
            return None
        check_scores(path, res, kind)
        train = read_json_cached(path.parent / "train.json") or {}
        info = dict(res.get("run_info", {}))
        for key in ("method", "backbone", "seed", "suite", "name"):
            if info.get(key) is None and train.get(key) is not None:
                info[key] = train[key]
        tasks = res.get("tasks") or {}
        wanted = KINDS[kind].tasks
        complete = all(t in tasks for t in wanted)
        avg = res.get("avg") if complete else None
        if avg is None and complete and wanted and all(number(tasks[t]) is not None for t in wanted):
            avg = float(np.mean([tasks[t] for t in wanted]))
        return cls(path, kind, tasks, number(avg), info, res.get("protocol", "full"), res.get("warning"),
                   blocks_of(res) + (blocks_of(train) if train else []), res.get("same_run_as"))

    def score(self, task: str) -> float | None:
        """A task by its key or printed name ("Avg" = the average)."""
        if task == "Avg":
            return self.avg
        return number(self.tasks.get(task_key(self.kind, task)))

    @property
    def pairs_path(self) -> str | None:
        """The per-pair similarities beside an STS result (`eval-sts --pairs-out`), for the paired bootstrap."""
        pairs = self.path.with_name("sts_pairs.npz")
        return str(pairs) if self.kind == "sts" and pairs.is_file() else None


def _counts(values) -> str:
    """'200' for one count, '198-200' for several."""
    values = sorted({int(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return "" if not values else str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def _capped_parts(result: dict) -> list[str]:
    """What one capped result file was scored on, with its numbers of pairs or items: an STS or analysis result
    (max_sts_pairs, its pairs a task), a transfer or probing result (the classifiers' caps), a train.json (the STS-B
    or own dev pairs during training); its own warning where it records no numbers; nothing for a full protocol."""
    parts = []
    if result.get("protocol") == "capped":
        if result.get("max_sts_pairs"):
            counts = _counts((result.get("n_pairs") or {}).values())
            parts.append(f"STS tasks each scored on a seeded subset of about {result['max_sts_pairs']} pairs"
                         + (f" ({counts} pairs a task)" if counts else ""))
        elif result.get("max_train_sentences") or result.get("max_test_sentences"):
            train, test = result.get("max_train_sentences"), result.get("max_test_sentences")
            caps = ([f"classifiers trained on at most {train} sentences a task"] if train else []) + \
                   ([f"scored on at most {test} held-out items a split"] if test else [])
            what = "probing" if result.get("probing_root") else "SentEval transfer"
            parts.append(f"{what} {' and '.join(caps)}")
        elif result.get("warning"):
            parts.append(str(result["warning"]))
    if result.get("stsb_dev_protocol") == "capped":
        parts.append(f"STS-B dev during training on {result.get('stsb_dev_pairs', 'a subset of the')} pairs"
                     + (f" (SICK-R dev {result['sickr_dev_pairs']})" if result.get("sickr_dev_pairs") else ""))
    if result.get("dev_protocol") == "capped":
        parts.append(f"the dev set {result.get('dev_set', '')} during training on {result.get('dev_pairs', 'a subset of its')} pairs")
    return parts


CAVEAT = "Capped evaluation, not comparable with published numbers"


def caveat_line(results) -> str:
    """The caveat every rendering of numbers scored off the papers' protocol carries (a table's Markdown, LaTeX caption
    and CSV column, a figure's caption): what was capped and to how many pairs or items, from the result files
    (dicts) behind it; "" when none was capped. E.g. "Capped evaluation, not comparable with published numbers:
    STS tasks each scored on a seeded subset of about 200 pairs (200 pairs a task)."."""
    parts = list(dict.fromkeys(p for r in results if isinstance(r, dict) for p in _capped_parts(r)))
    return f"{CAVEAT}: {'; '.join(parts)}." if parts else ""


def same_run_text(by_seed: dict[int, str | None], seeds: list[int]) -> str:
    """The note of a row whose run is another suite's (``by_seed``: seed -> "suite/run" or None, from
    the views' ``same_run_as``): "same run as S/R", with the seeds named where only some are; "" for none."""
    groups: dict[str, list[int]] = {}
    for s in seeds:
        if by_seed.get(s):
            groups.setdefault(by_seed[s], []).append(s)
    if len(groups) == 1 and len(next(iter(groups.values()))) == len(seeds):
        return f"same run as {next(iter(groups))}"
    return "; ".join(f"seed{'s' if len(v) > 1 else ''} {', '.join(map(str, v))}: same run as {k}" for k, v in groups.items())


def seed_of_folder(path: Path) -> int | None:
    m = re.fullmatch(r"seed(\d+)", path.name)
    return int(m.group(1)) if m else None


def read_curve(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A training or dev curve CSV as columns (unparseable cells NaN)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {}
    header, data = rows[0], rows[1:]
    cols: dict[str, np.ndarray] = {}
    for i, name in enumerate(header):
        vals = []
        for r in data:
            try:
                vals.append(float(r[i]))
            except (ValueError, IndexError):
                vals.append(float("nan"))
        cols[name] = np.asarray(vals)
    return cols


def mean_std(values):
    """Mean and sample standard deviation (ddof 1) over seeds: of a list (floats; std None with fewer
    than 2 values, both None with none) or of a seeds x columns array with NaN where missing (per
    column; std None with fewer than 2 seeds)."""
    a = np.asarray(values, dtype=float)
    if a.ndim == 1:
        if not len(a):
            return None, None
        return float(np.mean(a)), (float(np.std(a, ddof=1)) if len(a) > 1 else None)
    with np.errstate(all="ignore"):
        mean = np.nanmean(a, axis=0) if len(a) else np.array([])
        return mean, (np.nanstd(a, axis=0, ddof=1) if len(a) > 1 else None)

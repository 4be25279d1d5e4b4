"""The numbers of the combinations study (suite `combinations`; docs/methods.md, "Combining terms").

For each evaluated run of a suite: its objective terms (from the resolved config, so a run is placed in
the grid by what it trains with, not by its name), its STS scores over seeds (7 tasks and Avg., mean
and sample std), the gain over SimCSE (the run without terms) with a paired test, and for a run of two
or more terms the gain over the better of its single-term runs ("does the pair add up?"), also tested.
``pairwise_gains`` arranges the gains over SimCSE as a term x term matrix (the diagonal: the terms
alone). Registry-independent: the table and figure renderers only format these numbers.

Paired tests as in the suite reports: a paired t-test over the seeds both runs have (2 or more),
else a paired bootstrap over the STS pairs of one seed (`sts_pairs.npz`), else none.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from csebench.core.errors import DataError
from csebench.evaluation import PRINTED, STS_TASKS as TEST_TASKS
from csebench.core.stats import TestResult, paired_bootstrap_sts, paired_ttest
from csebench.study.typed import Suite

COLUMNS = [PRINTED.get(t, t) for t in TEST_TASKS] + ["Avg."]


@dataclass
class CombinationRow:
    run: str
    label: str
    terms: tuple[str, ...]  # objective term keys, in term_order(); () = SimCSE
    seeds: list[int]
    scores: np.ndarray  # (seeds, 8): the 7 STS tasks and Avg., Spearman x100
    pairs: dict[int, str] = field(default_factory=dict)  # seed -> its sts_pairs.npz, where written
    vs_simcse: TestResult | None = None
    best_single: str | None = None  # the single-term run with the higher mean Avg. among this run's terms
    vs_best_single: TestResult | None = None

    @property
    def mean(self) -> np.ndarray:
        return self.scores.mean(axis=0)

    @property
    def std(self) -> np.ndarray | None:
        return self.scores.std(axis=0, ddof=1) if len(self.seeds) > 1 else None

    def avg_by_seed(self) -> dict[int, float]:
        return {s: float(v) for s, v in zip(self.seeds, self.scores[:, -1])}

    def to_dict(self) -> dict:
        std = self.std
        return {"run": self.run, "label": self.label, "terms": list(self.terms), "seeds": self.seeds,
                "mean": dict(zip(COLUMNS, self.mean.tolist())),
                "std": dict(zip(COLUMNS, std.tolist())) if std is not None else None,
                "vs_simcse": self.vs_simcse.to_dict() if self.vs_simcse else None,
                "best_single": self.best_single,
                "vs_best_single": self.vs_best_single.to_dict() if self.vs_best_single else None}


# the study's order of terms (its rows, its matrix): the four papers' terms as the project lists the papers,
# then any other term by name
PAPER_TERMS = ("gaussian_negatives", "instance_smoothing", "layer_negatives", "distillation")


def term_order() -> list[str]:
    from csebench.objectives import TERMS  # here: the package imports torch, which planning a build never needs

    return [*PAPER_TERMS, *sorted(t for t in TERMS if t not in PAPER_TERMS)]


def run_terms(suite: Suite) -> dict[str, tuple[str, ...]]:
    """Each trained, evaluated run of ``suite`` -> its objective terms (teachers and `train: false` runs left out)."""
    out: dict[str, tuple[str, ...]] = {}
    order = term_order()
    for run, seed in suite.evaluated_jobs():
        if run not in out and suite.trains(run):
            keys = suite.resolve(run, seed).objectives
            out[run] = tuple(t for t in order if t in keys)
    return out


def read_scores(path: str | os.PathLike) -> np.ndarray:
    """The 7 STS test tasks and their average from one sts.json (`csebench eval-sts`)."""
    from csebench.results.runs import check_scores, read_json_cached

    if not Path(path).is_file():
        raise DataError(f"STS result not found: {path} (evaluate the run first, e.g. snakemake {path})")
    res = read_json_cached(path)
    check_scores(path, res, "sts")
    tasks = res.get("tasks") or {}
    missing = [t for t in TEST_TASKS if not isinstance(tasks.get(t), (int, float))]
    if missing:
        raise DataError(f"{path} has no score for {', '.join(missing)}: not a 7-task STS result (`csebench eval-sts`)")
    scores = [float(tasks[t]) for t in TEST_TASKS]
    return np.array(scores + [float(np.mean(scores))])


def paired_test(row: CombinationRow, base: CombinationRow, n_boot: int = 1000) -> TestResult:
    """``row`` against ``base`` on Avg.: t-test over common seeds, else a bootstrap of one seed's STS pairs."""
    from csebench.evaluation.sts import load_pairs

    a, b = row.avg_by_seed(), base.avg_by_seed()
    common = sorted(set(a) & set(b))
    if len(common) >= 2:
        return paired_ttest(a, b)
    seed_a, seed_b = (common[0], common[0]) if common else (row.seeds[0], base.seeds[0])
    if seed_a not in row.pairs or seed_b not in base.pairs:
        return TestResult("none", None, None, 0, {"reason": "fewer than 2 common seeds and no per-pair similarities"})
    res = paired_bootstrap_sts(load_pairs(row.pairs[seed_a]), load_pairs(base.pairs[seed_b]), TEST_TASKS, n_boot=n_boot)
    res.detail.update({"seed_method": seed_a, "seed_baseline": seed_b})
    return res


def combination_grid(suite: Suite, results: str | os.PathLike | None = None,
                     n_boot: int = 1000, missing_ok: bool = False) -> list[CombinationRow]:
    """Every trained, evaluated run of ``suite`` with its scores, gains and tests (SimCSE first, then by
    number of terms). ``results``: the results root (default: params' paths.results). ``missing_ok``
    (a report drawn before every run is evaluated): the seeds without an sts.json are left out, and
    no row at all while SimCSE has none (nothing to compare with)."""
    rows = []
    jobs = suite.evaluated_jobs()
    for run, terms in run_terms(suite).items():
        seeds = [s for r, s in jobs if r == run]
        dirs = [Path(suite.run_dir(run, s, results)) for s in seeds]
        if missing_ok:  # the seeds evaluated so far
            kept = [(s, d) for s, d in zip(seeds, dirs) if (d / "sts.json").is_file()]
            if not kept:
                continue
            seeds, dirs = [s for s, _ in kept], [d for _, d in kept]
        rows.append(CombinationRow(run, suite.label(run), terms, seeds,
                                   np.stack([read_scores(d / "sts.json") for d in dirs]),
                                   {s: str(d / "sts_pairs.npz") for s, d in zip(seeds, dirs) if (d / "sts_pairs.npz").is_file()}))
    baselines = [r for r in rows if not r.terms]
    if missing_ok and not baselines:
        return []
    if len(baselines) != 1:
        found = ", ".join(r.run for r in baselines) or "none"
        raise DataError(f"suite {suite.name}: the combination grid needs exactly one trained run without objective terms "
                        f"(SimCSE) to compare with, found {found}")
    simcse = baselines[0]
    singles = {r.terms[0]: r for r in rows if len(r.terms) == 1}
    for row in rows:
        if row is not simcse:
            row.vs_simcse = paired_test(row, simcse, n_boot)
        alone = [singles[t] for t in row.terms if t in singles]
        if len(row.terms) > 1 and alone:
            best = max(alone, key=lambda r: r.mean[-1])
            row.best_single, row.vs_best_single = best.run, paired_test(row, best, n_boot)
    order = term_order()
    return sorted(rows, key=lambda r: (len(r.terms), [order.index(t) for t in r.terms]))


def pairwise_gains(rows: list[CombinationRow]) -> tuple[list[str], np.ndarray]:
    """(terms, matrix): matrix[a, b] = mean Avg. of the run with exactly terms {a, b} minus SimCSE's, the
    diagonal the single terms'; NaN where the suite has no such run. Symmetric."""
    base = next(r for r in rows if not r.terms)
    terms = [t for t in term_order() if any(t in r.terms for r in rows)]
    gain = {frozenset(r.terms): r.mean[-1] - base.mean[-1] for r in rows if 1 <= len(r.terms) <= 2}
    m = np.full((len(terms), len(terms)), math.nan)
    for (i, a), (j, b) in itertools.product(enumerate(terms), repeat=2):
        m[i, j] = gain.get(frozenset({a, b}), math.nan)
    return terms, m

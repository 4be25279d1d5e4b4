"""Paired significance tests of one method against a baseline (SimCSE on the same backbone).

* ``paired_ttest``: per-seed scores of both systems, paired by seed (two-sided paired t-test).
* ``paired_bootstrap_sts``: one model of each system, the sentence pairs of the STS test sets
  resampled with replacement (the same indices for both systems, stratified by task); the statistic
  is the difference of the 7-task average Spearman x100, recomputed on every resample. Two-sided
  p-value: twice the smaller tail of the bootstrap differences around 0, with the +1 correction
  (p = 1 for identical predictions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TestResult:
    test: str                  # "paired t-test (n seeds)", "paired bootstrap (B resamples)", or "none"
    p_value: float | None
    diff: float | None         # mean difference (method - baseline) of the statistic
    n: int = 0                 # seeds (t-test) or resamples (bootstrap)
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"test": self.test, "p_value": self.p_value, "diff": self.diff, "n": self.n, **self.detail}


def paired_ttest(method: dict[int, float], baseline: dict[int, float]) -> TestResult:
    """Two-sided paired t-test over the seeds both systems have (``{seed: score}``)."""
    seeds = sorted(set(method) & set(baseline))
    if len(seeds) < 2:
        return TestResult("none", None, None, len(seeds), {"reason": "fewer than 2 common seeds"})
    a = np.array([method[s] for s in seeds], dtype=float)
    b = np.array([baseline[s] for s in seeds], dtype=float)
    d = a - b
    if np.allclose(d, d[0], rtol=0, atol=1e-12):
        # zero variance of the differences: t is 0 (identical) or infinite (constant shift)
        p = 1.0 if abs(d[0]) < 1e-12 else 0.0
    else:
        from scipy import stats as sps  # here: scipy.stats takes a second to import, most callers never test

        p = float(sps.ttest_rel(a, b).pvalue)
    return TestResult(f"paired t-test ({len(seeds)} seeds)", p, float(d.mean()), len(seeds), {"seeds": seeds})


def _resample_ranks(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of every original item inside each bootstrap resample.

    ``counts[b, i]`` is how often item i was drawn in resample b. Items are grouped by equal value in
    sorted order; a group's rank is the number of drawn items below it plus (its draws + 1) / 2. This is
    exactly the rank ``scipy.stats.rankdata`` gives each copy on the expanded resample, without sorting it.
    """
    values, group = np.unique(x, return_inverse=True)
    order = np.argsort(group, kind="stable")
    if len(values) == len(x):  # no ties: every item is its own group
        per_item = counts[:, order]
        ranks = np.empty(counts.shape, dtype=float)
        ranks[:, order] = np.cumsum(per_item, axis=1) - per_item + (per_item + 1) / 2.0
        return ranks
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    per_group = np.add.reduceat(counts[:, order], starts, axis=1)            # (B, n_groups)
    below = np.cumsum(per_group, axis=1) - per_group
    return (below + (per_group + 1) / 2.0)[:, group]                          # (B, n)


def _centred_ranks(x: np.ndarray, counts: np.ndarray, w: np.ndarray) -> np.ndarray:
    r = _resample_ranks(x, counts)
    return r - (w * r).sum(1, keepdims=True) / w.sum(1, keepdims=True)


def bootstrap_counts(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """(n_resamples, n) draw counts of n items drawn with replacement n times."""
    idx = rng.integers(0, n, size=(n_resamples, n)) + np.arange(n_resamples)[:, None] * n
    return np.bincount(idx.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


def bootstrap_spearman(x: np.ndarray, y: np.ndarray, counts: np.ndarray, ry: np.ndarray | None = None) -> np.ndarray:
    """Spearman correlation of (x, y) on each bootstrap resample given as draw counts (B, n).

    ``ry``: the centred resample ranks of ``y`` (``_centred_ranks``), to reuse across systems.
    """
    w = counts.astype(float)
    rx = _centred_ranks(x, counts, w)
    ry = _centred_ranks(y, counts, w) if ry is None else ry
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w * rx * ry).sum(1) / np.sqrt((w * rx * rx).sum(1) * (w * ry * ry).sum(1))


def paired_bootstrap_sts(method: dict[str, tuple[np.ndarray, np.ndarray]],
                         baseline: dict[str, tuple[np.ndarray, np.ndarray]],
                         tasks: list[str], n_boot: int = 1000, seed: int = 0, chunk: int = 100) -> TestResult:
    """Paired bootstrap over sentence pairs of the average Spearman x100 across ``tasks``.

    ``method`` / ``baseline`` map task -> (predicted similarity per pair, gold score per pair), as
    written by ``csebench eval-sts --pairs-out``. Both must hold the same pairs in the same order.
    """
    missing = [t for t in tasks if t not in method or t not in baseline]
    if missing:
        return TestResult("none", None, None, 0, {"reason": f"no per-pair similarities for {', '.join(missing)}"})
    for t in tasks:
        if len(method[t][1]) != len(baseline[t][1]) or not np.allclose(method[t][1], baseline[t][1]):
            raise ValueError(f"{t}: the two systems were not evaluated on the same sentence pairs")
    from scipy import stats as sps

    rng = np.random.default_rng(seed)
    diffs = np.zeros(n_boot)
    observed = 0.0
    for t in tasks:
        sa, gold = np.asarray(method[t][0], float), np.asarray(method[t][1], float)
        sb = np.asarray(baseline[t][0], float)
        n = len(gold)
        observed += (sps.spearmanr(sa, gold)[0] - sps.spearmanr(sb, gold)[0]) * 100 / len(tasks)
        for start in range(0, n_boot, chunk):
            counts = bootstrap_counts(rng, n, min(chunk, n_boot - start))  # the same draws for both systems
            rg = _centred_ranks(gold, counts, counts.astype(float))
            diffs[start:start + len(counts)] += (bootstrap_spearman(sa, gold, counts, rg)
                                                 - bootstrap_spearman(sb, gold, counts, rg)) * 100 / len(tasks)
    diffs = np.nan_to_num(diffs)
    lo = (np.sum(diffs <= 0) + 1) / (n_boot + 1)
    hi = (np.sum(diffs >= 0) + 1) / (n_boot + 1)
    p = float(min(1.0, 2 * min(lo, hi)))
    return TestResult(f"paired bootstrap ({n_boot} resamples of STS pairs)", p, float(observed), n_boot,
                      {"ci95": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))]})

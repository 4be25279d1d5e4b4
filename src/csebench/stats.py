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
from scipy import stats as sps


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
        p = float(sps.ttest_rel(a, b).pvalue)
    return TestResult(f"paired t-test ({len(seeds)} seeds)", p, float(d.mean()), len(seeds), {"seeds": seeds})


def _rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``x`` with the same row of ``y`` (average ranks for ties)."""
    rx = sps.rankdata(x, axis=1)
    ry = sps.rankdata(y, axis=1)
    rx -= rx.mean(1, keepdims=True)
    ry -= ry.mean(1, keepdims=True)
    den = np.sqrt((rx * rx).sum(1) * (ry * ry).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(1) / den


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
    rng = np.random.default_rng(seed)
    diffs = np.zeros(n_boot)
    observed = 0.0
    for t in tasks:
        sa, gold = np.asarray(method[t][0], float), np.asarray(method[t][1], float)
        sb = np.asarray(baseline[t][0], float)
        n = len(gold)
        observed += (sps.spearmanr(sa, gold)[0] - sps.spearmanr(sb, gold)[0]) * 100 / len(tasks)
        for start in range(0, n_boot, chunk):
            idx = rng.integers(0, n, size=(min(chunk, n_boot - start), n))
            g = gold[idx]
            diffs[start:start + len(idx)] += (_rowwise_spearman(sa[idx], g) - _rowwise_spearman(sb[idx], g)) * 100 / len(tasks)
    diffs = np.nan_to_num(diffs)
    lo = (np.sum(diffs <= 0) + 1) / (n_boot + 1)
    hi = (np.sum(diffs >= 0) + 1) / (n_boot + 1)
    p = float(min(1.0, 2 * min(lo, hi)))
    return TestResult(f"paired bootstrap ({n_boot} resamples of STS pairs)", p, float(observed), n_boot,
                      {"ci95": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))]})

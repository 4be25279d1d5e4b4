"""A suite's tidy metrics file, results/metrics/<suite>.json: the only DVC metrics (dvc.yaml), and
its STS-B dev curves, results/plots/<suite>/<run>-seed<N>.csv: DVC's plots.

run -> seed -> a few numbers, plus "mean" over the seeds, so `dvc metrics show`, `dvc metrics diff`
and `dvc exp show` print one readable column per run and metric instead of every key of every
result file. The curves have the same two columns whatever set selects the checkpoints (step, dev),
so one plot definition draws every run's.
"""

from __future__ import annotations

from ..workflow import evaluated_jobs, jobs
from .metrics import value
from .runs import RunRef, mean_std

# name in metrics.json -> csebench.results.metrics name; a run without a file simply lacks the key
METRICS = {"stsb_dev": "stsb_dev", "sts_avg": "sts:Avg", "transfer_avg": "transfer:Avg"}


def suite_metrics(params: dict, suite: str, results: str = "results") -> dict:
    evaluated = set(evaluated_jobs(params, suite))
    out: dict[str, dict] = {}
    for run, seed in jobs(params, suite):
        names = METRICS if (run, seed) in evaluated else {"stsb_dev": "stsb_dev"}  # training only: its dev score
        row = {k: value(m, results, RunRef(suite, run), seed, params) for k, m in names.items()}
        out.setdefault(run, {})[f"seed{seed}"] = {k: round(v, 4) for k, v in row.items() if v is not None}
    for run, seeds in out.items():
        keys = dict.fromkeys(k for s in seeds.values() for k in s)
        if len(seeds) > 1:  # one seed: its numbers are the run's
            seeds["mean"] = {k: round(mean_std([s[k] for s in seeds.values() if k in s])[0], 4) for k in keys}
    return out


def suite_plots(params: dict, suite: str, out: str, results: str = "results") -> list[str]:
    """Write each run's dev curve (the view's dev_curve.csv: step, then the dev set's score) as
    OUT/<run>-seed<N>.csv with the columns step, dev; a staged folder, complete or absent."""
    import csv
    from pathlib import Path

    from ..io import atomic_path
    from ..paths import run_dir

    written = []
    with atomic_path(out, is_dir=True) as tmp:
        for run, seed in jobs(params, suite):
            src = Path(run_dir(params, suite, run, seed, results)) / "dev_curve.csv"
            with open(src, newline="", encoding="utf-8") as fh:
                rows = list(csv.reader(fh))
            name = f"{run}-seed{seed}.csv"
            with open(Path(tmp) / name, "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(["step", "dev"])
                w.writerows(r[:2] for r in rows[1:] if len(r) >= 2 and r[1] != "")
            written.append(name)
    return written

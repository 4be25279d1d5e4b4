"""A suite's tidy metrics file, results/<suite>/metrics.json: the only DVC metrics (dvc.yaml).

run -> seed -> a few numbers, plus "mean" over the seeds, so `dvc metrics show`, `dvc metrics diff`
and `dvc exp show` print one readable column per run and metric instead of every key of every
result file. Curves stay `dvc plots` (dvc.yaml's plots:).
"""

from __future__ import annotations

from csebench.results.metrics import value
from csebench.results.runs import RunRef, mean_std
from csebench.study.typed import Suite

# name in metrics.json -> csebench.results.metrics name; a run without a file simply lacks the key
METRICS = {"stsb_dev": "stsb_dev", "sts_avg": "sts:Avg", "transfer_avg": "transfer:Avg"}


def suite_metrics(suite: Suite, results: str = "results") -> dict:
    evaluated = set(suite.evaluated_jobs())
    out: dict[str, dict] = {}
    for run, seed in suite.jobs():
        names = METRICS if (run, seed) in evaluated else {"stsb_dev": "stsb_dev"}  # training only: its dev score
        row = {k: value(m, results, RunRef(suite.name, run), seed, suite.params) for k, m in names.items()}
        out.setdefault(run, {})[f"seed{seed}"] = {k: round(v, 4) for k, v in row.items() if v is not None}
    for run, seeds in out.items():
        keys = dict.fromkeys(k for s in seeds.values() for k in s)
        if len(seeds) > 1:  # one seed: its numbers are the run's
            seeds["mean"] = {k: round(mean_std([s[k] for s in seeds.values() if k in s])[0], 4) for k in keys}
    return out

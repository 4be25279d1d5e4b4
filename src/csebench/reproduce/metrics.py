"""Metrics of a run, read from its output files, and the files each metric needs (Snakemake inputs).

Metric names (Spearman and accuracies x 100, as the papers print them):
  stsb_dev                      best STS-B dev score during training (train.json)
  sickr_dev / avg_sts_dev       SICK-R dev of that checkpoint and the mean of the two (SimCSE's eval_avg_sts)
  sts:<task> / sts:Avg          STS test: STS12..STS16, STS-B, SICK-R, Avg (sts.json)
  transfer:<task> / transfer:Avg  SentEval transfer accuracy (transfer.json; Avg only over all 7)
  probing:<task>                SentEval probing accuracy (probing.json)
  analysis:<name>:<path>        a value of the run's analysis JSON (dotted path, list indices allowed)
  run_analysis:<name>:<path>    a value of an analysis over all seeds of a run (ensemble_sts)
  suite_analysis:<name>:<path>  a value of the suite-level analysis JSON (topk_negatives, teacher_logits)
  config:<path>                 the run's resolved hyperparameter (training.batch_size, objectives....)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ConfigError

STS_KEYS = {"STS12": "STS12", "STS13": "STS13", "STS14": "STS14", "STS15": "STS15", "STS16": "STS16",
            "STS-B": "STSBenchmark", "SICK-R": "SICKRelatedness"}
TRANSFER_KEYS = {"MR": "MR", "CR": "CR", "SUBJ": "SUBJ", "MPQA": "MPQA", "SST": "SST2", "SST2": "SST2", "TREC": "TREC",
                 "MRPC": "MRPC"}
DEV_KEYS = {"stsb_dev": "stsb_dev_best", "sickr_dev": "sickr_dev", "avg_sts_dev": "avg_sts_dev"}  # train.json keys
RUN_FILES = {**{k: "train.json" for k in DEV_KEYS}, "sts": "sts.json", "transfer": "transfer.json", "probing": "probing.json",
             "curve": "dev_curve.csv"}


@dataclass(frozen=True)
class RunRef:
    suite: str
    run: str

    def __str__(self) -> str:
        return f"{self.suite}/{self.run}"


def parse_run(ref: str, default_suite: str) -> RunRef:
    if "/" in ref:
        suite, run = ref.split("/", 1)
        return RunRef(suite, run)
    return RunRef(default_suite, ref)


def kind_of(metric: str) -> str:
    kind = metric.split(":", 1)[0]
    if kind not in (*DEV_KEYS, "sts", "transfer", "probing", "analysis", "run_analysis", "suite_analysis", "config"):
        raise ConfigError(f"unknown metric '{metric}' (see csebench.reproduce.metrics)")
    return kind


def files_for(metric: str, results: str, ref: RunRef, seed: int) -> list[str]:
    """Output files a metric of one run/seed reads (what Snakemake must build first)."""
    kind = kind_of(metric)
    run_dir = f"{results}/{ref.suite}/runs/{ref.run}/seed{seed}"
    if kind in RUN_FILES:
        return [f"{run_dir}/{RUN_FILES[kind]}"]
    if kind == "analysis":
        name = metric.split(":")[1]
        ext = "md" if name == "neighbours_md" else "json"
        return [f"{results}/{ref.suite}/analysis/{ref.run}/seed{seed}/{name.removesuffix('_md')}.{ext}"]
    if kind == "run_analysis":
        return [f"{results}/{ref.suite}/analysis/{ref.run}/{metric.split(':')[1]}.json"]
    if kind == "suite_analysis":
        return [f"{results}/{ref.suite}/analysis/{metric.split(':')[1]}.json"]
    return []  # config: params.yaml


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


@lru_cache(maxsize=4096)
def _json(path: str, mtime: float):
    from ..io import read_json

    return read_json(path)


def read_json_cached(path: str):
    return _json(path, os.path.getmtime(path)) if os.path.isfile(path) else None


def _number(x) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def value(metric: str, results: str, ref: RunRef, seed: int, params: dict | None = None) -> float | None:
    """The metric of one run/seed, or None when its file is missing (not yet run) or lacks it."""
    kind = kind_of(metric)
    if kind == "config":
        return config_value(metric.split(":", 1)[1], params, ref, seed)
    files = files_for(metric, results, ref, seed)
    data = read_json_cached(files[0])
    if data is None:
        return None
    if kind in DEV_KEYS:
        return _number(data.get(DEV_KEYS[kind]))
    if kind in ("sts", "transfer", "probing"):
        task = metric.split(":", 1)[1]
        if task == "Avg":
            return _number(data.get("avg"))  # the full-set average only (never a subset average)
        key = (STS_KEYS if kind == "sts" else TRANSFER_KEYS if kind == "transfer" else {}).get(task, task)
        return _number((data.get("tasks") or {}).get(key))
    path = metric.split(":", 2)[2] if metric.count(":") >= 2 else ""
    return _number(dig(data, path))


def config_value(path: str, params: dict | None, ref: RunRef, seed: int):
    from ..config import resolve_run

    if params is None:
        raise ConfigError(f"metric config:{path} needs params.yaml")
    cfg = resolve_run(params, ref.suite, ref.run, seed)
    top, _, rest = path.partition(".")
    obj = {"training": cfg.training.__dict__, "objectives": cfg.objectives}.get(top)
    if obj is None:
        raise ConfigError(f"metric config:{path}: use config:training.<key> or config:objectives.<term>.<key>")
    out = dig(obj, rest)
    if hasattr(out, "__dict__"):
        out = out.__dict__
    return out


def seeds_of(params: dict, ref: RunRef) -> list[int]:
    from ..config import suite_seeds

    return suite_seeds(params, ref.suite, ref.run)


def exists(path: str | os.PathLike) -> bool:
    return Path(path).is_file()

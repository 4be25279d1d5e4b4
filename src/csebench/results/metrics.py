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

from csebench.core.errors import ConfigError
from csebench.core.paths import analysis_file
from csebench.results.runs import RunRef, RunResult, dig, number, read_json_cached, run_path
from csebench.study.typed import Params

DEV_KEYS = {"stsb_dev": "stsb_dev_best", "sickr_dev": "sickr_dev", "avg_sts_dev": "avg_sts_dev"}  # train.json keys
RUN_FILES = {**{k: "train.json" for k in DEV_KEYS}, "sts": "sts.json", "transfer": "transfer.json", "probing": "probing.json"}
KINDS = (*RUN_FILES, "analysis", "run_analysis", "suite_analysis", "config")


def kind_of(metric: str) -> str:
    kind = metric.split(":", 1)[0]
    if kind not in KINDS:
        raise ConfigError(f"unknown metric '{metric}' (see csebench.results.metrics)")
    return kind


def files_for(metric: str, results: str, ref: RunRef, seed: int, params: Params | None = None) -> list[str]:
    """Output files a metric of one run/seed reads (what Snakemake must build first)."""
    kind = kind_of(metric)
    if kind in RUN_FILES:
        return [f"{run_path(results, ref, seed)}/{RUN_FILES[kind]}"]
    if kind == "analysis":
        name = metric.split(":")[1]
        ext = "md" if name == "neighbours_md" else "json"
        return [analysis_file(results, ref.suite, name.removesuffix("_md"), ref.run, seed, ext)]
    if kind == "run_analysis":
        return [analysis_file(results, ref.suite, metric.split(":")[1], ref.run)]
    if kind == "suite_analysis":
        return [analysis_file(results, ref.suite, metric.split(":")[1])]
    return []  # config: params.yaml


def value(metric: str, results: str, ref: RunRef, seed: int, params: Params | None = None) -> float | None:
    """The metric of one run/seed, or None when its file is missing (not yet run) or lacks it."""
    kind = kind_of(metric)
    if kind == "config":
        return config_value(metric.split(":", 1)[1], params, ref, seed)
    path = files_for(metric, results, ref, seed, params)[0]
    if kind in ("sts", "transfer", "probing"):
        res = RunResult.from_disk(path, kind)
        return None if res is None else res.score(metric.split(":", 1)[1])
    data = read_json_cached(path)
    if data is None:
        return None
    if kind in DEV_KEYS:
        return number(data.get(DEV_KEYS[kind]))
    return number(dig(data, metric.split(":", 2)[2] if metric.count(":") >= 2 else ""))


def config_value(path: str, params: Params | None, ref: RunRef, seed: int):
    if params is None:
        raise ConfigError(f"metric config:{path} needs params.yaml")
    cfg = Params.of(params).suite(ref.suite).resolve(ref.run, seed)
    top, _, rest = path.partition(".")
    obj = {"training": cfg.training.__dict__, "objectives": cfg.objectives}.get(top)
    if obj is None:
        raise ConfigError(f"metric config:{path}: use config:training.<key> or config:objectives.<term>.<key>")
    out = dig(obj, rest)
    if hasattr(out, "__dict__"):
        out = out.__dict__
    return out


def seeds_of(params: Params, ref: RunRef) -> list[int]:
    return Params.of(params).suite(ref.suite).seeds(ref.run)

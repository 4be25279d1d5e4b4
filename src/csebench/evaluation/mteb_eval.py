"""MTEB beside SentEval: a saved model scored on MTEB tasks with the `mteb` package (optional extra,
``pip install -e '.[mteb]'``; ``make setup`` installs it).

The model encodes exactly as for SentEval (csebench's saved evaluation pooler and precision); mteb runs
its own evaluation loop (``mteb.evaluate``) and protocol: each task's own evaluation splits and main
score (cosine Spearman for STS, accuracy of MTEB's logistic-regression protocol for classification,
nDCG@10 for retrieval). STS is scored per task split as MTEB defines it, not as SentEval's "all"
setting, so these numbers are labelled "MTEB protocol" and never mixed with SentEval's.

Output folder (``--out``): one MTEB result file per task, ``<TaskName>.json`` (mteb's TaskResult layout,
written by ``TaskResult.to_disk`` and made strict JSON), ``model_meta.json`` (mteb's ModelMeta) and
``mteb.json``, csebench's summary (tasks, main scores x100, run, encoding, provenance). The folder
appears whole or not at all.

MTEB's datasets come from the Hugging Face hub. Offline (the pipeline's default) they must already be
in the datasets cache: every task's data is loaded before the model is, and a missing one stops the
command with one line naming the dataset and how to get it (``--download-only`` with network).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from csebench.core.errors import ConfigError, DataError
from csebench.core.choices import MTEB_DEFAULT_TASKS, MTEB_STS_TASKS
from csebench.study.typed import Suite

log = logging.getLogger(__name__)

# The tasks of MTEB(eng, v2) are taken as that benchmark defines them (STS17: its en-en subset,
# STS22.v2: en, test splits only); other names as mteb registers them.
BENCHMARK = "MTEB(eng, v2)"
STS_TASKS = MTEB_STS_TASKS
DEFAULT_TASKS = MTEB_DEFAULT_TASKS
SUMMARY = "mteb.json"
PROTOCOL = "MTEB protocol"


def require_mteb():
    try:
        import mteb
    except ImportError:
        raise ConfigError("MTEB evaluation needs the mteb package: pip install -e '.[mteb]' (make setup installs it)") from None
    return mteb


def resolve_tasks(names: list[str]) -> list:
    """mteb task objects for ``names``: as MTEB(eng, v2) defines them where it has them."""
    mteb = require_mteb()
    benchmark = {t.metadata.name: t for t in mteb.get_benchmark(BENCHMARK).tasks}
    tasks = []
    for name in names:
        if name in benchmark:
            tasks.append(benchmark[name])
            continue
        try:
            tasks.append(mteb.get_task(name))
        except KeyError as exc:
            close = re.search(r"Did you mean: '([^']+)'", str(exc))
            hint = f" (did you mean '{close.group(1)}'?)" if close else " (mteb.get_tasks() lists them)"
            raise ConfigError(f"unknown MTEB task '{name}'{hint}") from None
    return tasks


def load_task_data(task) -> None:
    """Load one task's data (from the local cache when offline); a missing dataset is one clear line."""
    if task.data_loaded:
        return
    try:
        task.load_data()
    except OSError as exc:  # ConnectionError offline, DatasetNotFoundError, missing local files
        import datasets

        ds = task.metadata.dataset
        name = task.metadata.name
        raise DataError(
            f"MTEB task {name} needs the dataset {ds['path']} (revision {str(ds.get('revision'))[:12]}), which is not in "
            f"the Hugging Face datasets cache {datasets.config.HF_DATASETS_CACHE} and cannot be downloaded "
            f"({type(exc).__name__}): fetch it once with network (HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 csebench "
            f"eval-mteb --download-only --tasks {name}), or point HF_DATASETS_CACHE (or HF_HOME) at a cache that holds it"
        ) from None


def mteb_encoder(encode: Callable[[list[str]], Any], name: str, revision: str, dim: int | None):
    """An mteb encoder (``AbsEncoder``) around a csebench encode function; cosine similarity."""
    require_mteb()
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    class CsebenchEncoder(AbsEncoder):
        def __init__(self):
            self.model = None  # similarity() then uses the meta's cosine, not a model's own
            self.mteb_model_meta = ModelMeta.create_empty(overwrites={
                "name": name, "revision": revision, "embed_dim": dim, "framework": ["PyTorch"],
                "similarity_fn_name": ScoringFunction.COSINE, "use_instructions": False, "open_weights": True})

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            # no prompts: SimCSE-style encoders embed queries, documents and sentences alike
            sentences = [text for batch in inputs for text in batch["text"]]
            return _as_numpy(encode(sentences))

    return CsebenchEncoder()


def _as_numpy(emb) -> np.ndarray:
    return emb.float().cpu().numpy() if hasattr(emb, "cpu") else np.asarray(emb, dtype=np.float32)


def _strict(path: Path) -> None:
    """Rewrite a JSON file mteb wrote (its writer allows NaN) through csebench's strict writer."""
    from csebench.core.io import write_json

    write_json(path, json.loads(path.read_text(encoding="utf-8")), undefined_ok=True)


def task_summary(task, result) -> dict:
    md = task.metadata
    return {"type": md.type, "main_score": md.main_score, "score": 100 * float(result.get_score()),
            "splits": list(result.scores), "subsets": sorted(result.hf_subsets),
            "dataset": {"path": md.dataset.get("path"), "revision": md.dataset.get("revision")}}


def evaluate_mteb(encode: Callable[[list[str]], Any], tasks: list, out: str | os.PathLike, *, name: str,
                  revision: str, dim: int | None = None, batch_size: int = 64, extra: dict | None = None) -> dict:
    """Run mteb's evaluation loop on ``tasks`` (mteb task objects; their data loaded first) with the
    ``encode`` function; write the folder ``out`` (see the module doc) and return the summary."""
    mteb = require_mteb()
    from csebench.core.io import atomic_path, dumps_json, write_json

    for task in tasks:  # every dataset present before anything is encoded
        load_task_data(task)
    t0 = time.perf_counter()
    model = mteb_encoder(encode, name, revision, dim)
    # no result cache: a rerun must score this model, never reuse another run's cached results
    results = mteb.evaluate(model, tasks, cache=None, overwrite_strategy="always", co2_tracker=False,
                            encode_kwargs={"batch_size": batch_size, "show_progress_bar": False}, show_progress_bar=False)
    by_name = {t.metadata.name: t for t in tasks}
    summary = {"protocol": PROTOCOL, "mteb": mteb.__version__, "benchmark": BENCHMARK,
               "tasks": {r.task_name: task_summary(by_name[r.task_name], r) for r in results.task_results},
               "eval_seconds": round(time.perf_counter() - t0, 2), **(extra or {})}
    with atomic_path(out, is_dir=True) as tmp:
        for result in results.task_results:
            result.to_disk(tmp / f"{result.task_name}.json")
            _strict(tmp / f"{result.task_name}.json")
        # mteb's own model_meta.json (ModelMeta.to_dict(); sets and dates as text, as mteb's cache writes them)
        write_json(tmp / "model_meta.json", json.loads(dumps_json(model.mteb_model_meta.to_dict(), default=str)))
        write_json(tmp / SUMMARY, summary, undefined_ok=True)
    return summary


# ----------------------------------------------------------------------------- reading results


def read_task_result(path: str | os.PathLike) -> float:
    """A task's main score x100 from its MTEB result file: the mean of ``main_score`` over its splits
    and subsets (what mteb's ``TaskResult.get_score()`` gives), without importing mteb."""
    from csebench.core.io import read_json

    scores = [entry["main_score"] for entries in read_json(path)["scores"].values() for entry in entries]
    if not scores or any(s is None for s in scores):
        raise DataError(f"{path}: no main score (an MTEB result file written by `csebench eval-mteb`?)")
    return 100 * float(np.mean(scores))


def mteb_rows(suite: Suite, results: str | os.PathLike | None = None, missing_ok: bool = False) -> list[dict]:
    """One row per (run, seed, task) of a suite's MTEB results: run, label, seed, task, type, metric
    and score (the task's main score x100), for the per-suite "MTEB protocol" table. Reads the
    result files only (no mteb install needed); ``results``: the results root (default paths.results);
    ``missing_ok``: a run and seed not yet evaluated on MTEB is left out instead of refused."""
    from csebench.core.io import read_json

    if suite.mteb_tasks is None:
        raise ConfigError(f"suites.{suite.name} has no mteb: section (add mteb: {{tasks: [...]}} to evaluate it on MTEB)")
    rows = []
    for run, seed in suite.evaluated_jobs():
        folder = Path(suite.run_dir(run, seed, results)) / "mteb"
        if not (folder / SUMMARY).is_file():
            if missing_ok:
                continue
            raise DataError(f"MTEB result not found: {folder / SUMMARY} (run `snakemake {folder / SUMMARY}`)")
        label = suite.label(run)
        for task, info in read_json(folder / SUMMARY)["tasks"].items():
            rows.append({"run": run, "label": label, "seed": seed, "task": task, "type": info["type"],
                         "metric": info["main_score"], "score": read_task_result(folder / f"{task}.json")})
    return rows

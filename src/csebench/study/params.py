"""params.yaml: the single source of hyperparameters, read by the CLI, Snakemake and DVC.

Layout (see params.yaml for the annotated file):

    paths:     where shared inputs, prepared data and results live
    data:      named corpus + evaluation-data sources
    backbones: named encoders (HF id, packaged model or random tiny config) and pooler
    training:  defaults of every training hyperparameter (the SimCSE defaults)
    methods:   named objective compositions (SimCSE, GS-InfoNCE, IS-CSE, SSCL, DistillCSE, ...)
    suites:    named sets of runs; each run = backbone x method (+ overrides) x seeds

A run's configuration merges, later wins: training defaults < backbone.training <
method.training < suite.training < run.training; objective settings merge the same way.
Unknown keys anywhere are rejected with the closest valid key suggested.

This module loads and checks the file (load_params) and reads its parts (backbone and data-source
settings, shared paths); csebench.study.resolve turns a run of a suite into its RunConfig.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from csebench.core.errors import ConfigError
from csebench.core.paths import check_name, check_path_setting, view_dir
from csebench.core.schema import _suggest, check_keys, read_yaml
from csebench.core.choices import COMPILE_MODES, DEV_METRICS, EVAL_PRECISIONS, POOLERS, PRECISIONS, PROJECTION_HEADS

SHARED_ENV = "CSEBENCH_SHARED"


def deep_merge(base: dict, override: dict | None) -> dict:
    """A new dict: ``base`` with ``override`` merged in, key by key into nested dicts; neither is changed, nothing of
    either is shared with the result (base is copied once, then merged into in place: resolving every run of
    params.yaml, which each Snakemake start does, copied each nested level again)."""
    out = copy.deepcopy(base)
    merge_into(out, override)
    return out


def merge_into(out: dict, override: dict | None) -> None:
    """deep_merge into ``out`` itself (a dict of the caller's own): override's values copied in."""
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            merge_into(out[key], value)
        else:
            out[key] = copy.deepcopy(value)


@dataclass
class TrainingConfig:
    """Defaults are unsup-SimCSE's (Gao et al. 2021, run_unsup_example.sh and HF Trainer defaults)."""

    temperature: float = 0.05
    max_seq_length: int = 32
    batch_size: int = 64
    learning_rate: float = 3e-5
    epochs: int = 1
    max_steps: int | None = None  # stops early when set
    eval_steps: int = 125
    weight_decay: float = 0.0
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-8
    precision: str = "auto"  # auto: bf16 on GPUs with native bf16 (compute capability 8+), else fp16; fp32 on CPU
    log_steps: int = 10
    checkpoint_steps: int = 250  # resumable checkpoint cadence
    eval_batch_size: int = 128
    eval_precision: str = "auto"  # STS-B dev encoding: auto (bf16 on bf16 GPUs, fp32 on CPU), fp32, bf16, fast
    compile: bool | str = False  # torch.compile the encoder's forward: true (inductor's default mode) | reduce-overhead (CUDA graphs too)
    num_workers: int = 0
    dropout: float | None = None  # None: SimCSE's p = 0.1 on the model type's dropout names (csebench.model.model_types)
    projection_dim: int | None = None  # SSCL Table 5: trained linear head to this size, kept at evaluation
    projection_head: str = "linear"  # linear (SSCL Table 5's "simply linear projection head") | linear_tanh (released code) | batchnorm (DiffCSE's training head of the cls pooler)
    num_layers: int | None = None  # SSCL Table 1 "SimCSE (10)": keep only the first N transformer layers (None: all)
    dev_max_pairs: int | None = None  # CPU demo only: STS-B dev scored on a seeded subset of about N pairs (None: all 1500)
    dev_set: str | None = None  # checkpoint selection on your own STS data (data.<source>.sts_pairs NAME); None: STS-B dev
    dev_metric: str | None = None  # checkpoint selection on: stsb (None: the same) | avg_sts (mean of STS-B and SICK-R dev)
    prefix: str | None = None  # a text before every sentence in training and evaluation, kept with the model (E5: "query: "); None: the model's own default prompt, else none

    def validate(self, where: str) -> None:
        positive = ["temperature", "learning_rate", "epochs", "eval_steps", "log_steps",
                    "checkpoint_steps", "eval_batch_size", "max_seq_length"]
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{where}.{name} must be > 0, got {getattr(self, name)}")
        if self.batch_size < 2:
            raise ConfigError(f"{where}.batch_size must be >= 2: in-batch negatives need at least two sentences, got {self.batch_size}")
        if self.max_steps is not None and self.max_steps <= 0:
            raise ConfigError(f"{where}.max_steps must be > 0 or null, got {self.max_steps}")
        if self.weight_decay < 0 or self.warmup_steps < 0 or self.max_grad_norm < 0:
            raise ConfigError(f"{where}: weight_decay, warmup_steps and max_grad_norm must be >= 0")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"{where}.precision: unknown '{self.precision}'{_suggest(self.precision, list(PRECISIONS))}")
        if self.eval_precision not in EVAL_PRECISIONS:
            raise ConfigError(f"{where}.eval_precision: unknown '{self.eval_precision}' (valid: {', '.join(EVAL_PRECISIONS)})")
        if not isinstance(self.compile, bool) and self.compile not in COMPILE_MODES:
            raise ConfigError(f"{where}.compile: unknown '{self.compile}' (valid: false, true, {', '.join(COMPILE_MODES)})")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout must be in [0, 1), got {self.dropout}")
        if self.projection_dim is not None and self.projection_dim <= 0:
            raise ConfigError(f"{where}.projection_dim must be > 0 or null, got {self.projection_dim}")
        if self.projection_head not in PROJECTION_HEADS:
            raise ConfigError(f"{where}.projection_head: unknown '{self.projection_head}' (valid: {', '.join(PROJECTION_HEADS)})")
        if self.projection_head == "batchnorm" and self.projection_dim is not None:
            raise ConfigError(f"{where}.projection_head: batchnorm is the cls pooler's training-only head (DiffCSE); "
                              f"it takes no projection_dim (got {self.projection_dim})")
        if self.num_layers is not None and self.num_layers < 1:
            raise ConfigError(f"{where}.num_layers must be >= 1 or null (all layers), got {self.num_layers}")
        if self.dev_max_pairs is not None and (isinstance(self.dev_max_pairs, bool) or not isinstance(self.dev_max_pairs, int)
                                               or self.dev_max_pairs < 2):
            raise ConfigError(f"{where}.dev_max_pairs must be a whole number >= 2 or null (all STS-B dev pairs), got {self.dev_max_pairs!r}")
        if self.dev_metric is not None and self.dev_metric not in DEV_METRICS:
            raise ConfigError(f"{where}.dev_metric: unknown '{self.dev_metric}' (valid: {', '.join(DEV_METRICS)})")
        if self.dev_metric == "avg_sts" and self.dev_set is not None:
            raise ConfigError(f"{where}.dev_metric avg_sts needs STS-B and SICK-R dev; with dev_set '{self.dev_set}' "
                              "checkpoints are selected on that set alone")
        if self.prefix is not None and not isinstance(self.prefix, str):
            raise ConfigError(f"{where}.prefix must be a text put before every sentence (e.g. 'query: ') or null, "
                              f"got {self.prefix!r}")


@dataclass
class BackboneConfig:
    model: str = ""  # HF hub id or local folder; "packaged:minilm" = the offline MiniLM; "random" = tiny random BERT
    pooler: str = "cls"
    label: str = ""  # row name in tables, e.g. "BERT-base"
    random_config: dict = field(default_factory=dict)  # BertConfig overrides for model "random"
    tokenizer: str | None = None  # defaults to model (for "random": the packaged MiniLM tokenizer)
    training: dict = field(default_factory=dict)  # backbone-specific training overrides

    def validate(self, where: str) -> None:
        if not self.model:
            raise ConfigError(f"{where}.model is required")
        if self.pooler not in POOLERS:
            raise ConfigError(f"{where}.pooler: unknown pooler '{self.pooler}'{_suggest(self.pooler, list(POOLERS))}")


@dataclass
class SourceConfig:
    """A file or folder: a local path, or a file in a Hugging Face hub dataset repo."""

    path: str | None = None
    hub_repo: str | None = None
    hub_file: str | None = None
    sample: int | None = None  # corpus only: keep N sentences drawn with sample_seed
    sample_seed: int = 0

    def validate(self, where: str) -> None:
        if bool(self.path) == bool(self.hub_repo):
            raise ConfigError(f"{where}: give exactly one of 'path' or 'hub_repo' (+ 'hub_file')")
        if self.hub_repo and not self.hub_file:
            raise ConfigError(f"{where}: 'hub_repo' needs 'hub_file'")
        if self.sample is not None and self.sample <= 0:
            raise ConfigError(f"{where}.sample must be > 0, got {self.sample}")


SENTEVAL_PROBING_URL = "https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing"


@dataclass
class ProbingSourceConfig:
    """SentEval's probing files: a local folder holding them, or a base URL (``URL/<file>``)."""

    path: str | None = None
    url: str | None = None

    def validate(self, where: str) -> None:
        if bool(self.path) == bool(self.url):
            raise ConfigError(f"{where}: give exactly one of 'path' (a folder with SentEval's probing files) "
                              f"or 'url' (e.g. {SENTEVAL_PROBING_URL})")


@dataclass
class DataConfig:
    corpus: SourceConfig
    senteval: SourceConfig


def digest(obj, length: int = 16) -> str:
    """Hex digest of JSON-able content (keys sorted): run keys, fingerprints, evaluation folder names."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:length]


# ----------------------------------------------------------------------------- params


def shared_dir(params: dict | None = None, base: str | os.PathLike | None = None) -> str:
    """The shared folder: $CSEBENCH_SHARED, else params' paths.shared (default ../shared). A relative
    paths.shared is read from the current folder (the commands run in the checkout), or from ``base`` when
    given (the Python API: the folder of the params.yaml it read, wherever the caller is)."""
    env = os.environ.get(SHARED_ENV)
    if env:
        return env
    value = str((params or {}).get("paths", {}).get("shared", "../shared"))
    if base is not None and not os.path.isabs(value):
        return os.path.normpath(os.path.join(base, value))
    if not os.path.isabs(value) and not os.path.exists(value):
        origin = experiment_origin()
        if origin is not None and (origin / value).exists():
            return str(origin / value)
    return value


def shared_senteval(params: dict | None, missing: str, other: str, base: str | os.PathLike | None = None,
                    params_file: str | os.PathLike | None = None) -> str:
    """The shared SentEval folder params.yaml names (paths.shared/senteval, $CSEBENCH_SHARED), for a command or
    call that was given none; where it is not there, a DataError that begins with ``missing`` and ends with
    ``other``, the caller's own way to name one. ``base``: as for shared_dir; ``params_file``: the file whose
    paths.shared the error names."""
    path = os.path.join(shared_dir(params, base), "senteval")
    if not os.path.isdir(path):
        from csebench.core.errors import DataError

        if os.environ.get(SHARED_ENV):
            where = f"${SHARED_ENV}/senteval"
        else:
            where = f"paths.shared/senteval of {params_file}" if params_file else "paths.shared/senteval"
        raise DataError(f"{missing} the shared SentEval data are not at {path} ({where}): put the shared folder "
                        f"beside the checkout (../shared), or set ${SHARED_ENV} or paths.shared, or {other}")
    return path


def installed_checkout() -> Path | None:
    """The checkout csebench is installed from, holding its params.yaml: found from the package's own files
    (an editable install, ``pip install -e .``, runs them in place, src/csebench/ of the checkout), else from
    pip's record of where a copy in site-packages came from (``pip install .``: the distribution's
    direct_url.json, PEP 610). None where neither is a folder with a params.yaml (a wheel built elsewhere)."""
    here = Path(__file__).resolve().parents[2]  # src/csebench/study/params.py -> src/
    if here.name == "src" and (here.parent / "params.yaml").is_file():
        return here.parent
    try:
        import json as _json
        from importlib.metadata import PackageNotFoundError, distribution
        from urllib.parse import unquote, urlparse

        record = distribution("csebench").read_text("direct_url.json")
        url = urlparse(_json.loads(record)["url"]) if record else None
    except (PackageNotFoundError, ValueError, KeyError, TypeError):
        return None
    if url is None or url.scheme != "file":
        return None
    folder = Path(unquote(url.path))
    return folder if (folder / "params.yaml").is_file() else None


def packaged_params_file() -> Path | None:
    """The params.yaml a wheel of csebench carries (csebench/resources/params.yaml, copied from the checkout's when
    the wheel was built: setup.py), None in a checkout or an editable install, which read the checkout's own."""
    import importlib.resources

    packaged = importlib.resources.files("csebench").joinpath("resources/params.yaml")
    return Path(str(packaged)) if packaged.is_file() else None


def may_name_backbone(model: str) -> bool:
    """Whether a model argument may be a backbone name of params.yaml (``minilm``), not a path that exists,
    a packaged model or an ORG/NAME hub id: only then are the params read for it (named_backbone_model)."""
    return not os.path.exists(model) and not model.startswith("packaged:") and "/" not in model


def named_backbone_model(params: dict | None, model: str) -> str | None:
    """The model of params.yaml's backbone called ``model`` (``minilm`` -> ``packaged:minilm``); None where
    ``model`` names none."""
    backbone = ((params or {}).get("backbones") or {}).get(model) if may_name_backbone(model) else None
    return backbone["model"] if backbone else None


def experiment_origin(cwd: str | os.PathLike | None = None) -> Path | None:
    """The checkout a DVC experiment was queued from, when this process runs in its temporary copy
    (``<checkout>/.dvc/tmp/exps/<tmp>/``, `dvc exp run --queue` / `--temp`), else None. Paths relative
    to the checkout, such as ``paths.shared: ../shared`` beside it, are read from there (docs/dvc.md)."""
    here = Path(cwd or os.getcwd()).resolve()
    for p in here.parents:
        if p.name == "exps" and p.parent.name == "tmp" and p.parent.parent.name == ".dvc":
            return p.parent.parent.parent
    return None


def expand_path(value: str | None, params: dict) -> str | None:
    if value is None:
        return None
    path = value.replace("{shared}", shared_dir(params))
    if not os.path.isabs(path) and not os.path.exists(path):  # a git-ignored input of the queuing checkout
        origin = experiment_origin()
        if origin is not None and (origin / path).exists():
            return str(origin / path)
    return path


def load_params(path: str | os.PathLike = "params.yaml", overrides: list[str | os.PathLike] | None = None) -> dict:
    from csebench.core.io import not_a_regular_file

    p = Path(path)
    what = not_a_regular_file(p)
    if what == "not found":
        raise ConfigError(f"params file not found: {p} (run from the project root or pass --params)")
    if what is not None:  # /dev/zero, /dev/stdin, a folder: said what it is (read_yaml's line)
        raise ConfigError(f"params file {p} is {what}: give params.yaml or another YAML file")
    params = _read_params_file(p)
    for extra in overrides or []:
        q = Path(extra)
        what = not_a_regular_file(q)
        if what == "not found":
            raise ConfigError(f"config override not found: {q}")
        if what is not None:
            raise ConfigError(f"config override {q} is {what}: give a YAML file of the settings it changes")
        params = deep_merge(params, _read_params_file(q))  # a mistake in an override file is named with that file
    return params


def _read_params_file(p: Path) -> dict:
    """One params or override file, checked on its own (before merging loses where a key came from):
    its structure against the JSON Schema every entry point and Snakemake share, then training keys."""
    from csebench.core.schema import validate

    data = _read_yaml(p)
    check_keys(str(p), data, TOP_KEYS)
    _check_finite(p, data)
    validate(data, "params", str(p))
    data = _expand_compact_forms(p, data)
    _check_names(p, data)
    _check_paths(p, data)
    _check_training_sections(p, data)
    return data


def _check_names(p: Path, data: dict) -> None:
    """Every name the file gives that becomes a path component (results/<suite>/runs/<run>, data/<source>,
    a run's name from its backbone and method), checked once, where the file is read."""
    for group, what in (("data", "data source"), ("backbones", "backbone"), ("methods", "method"), ("suites", "suite")):
        for name in data.get(group) or {}:
            check_name(f"{p}: {what}", name)
    for suite, spec in (data.get("suites") or {}).items():
        runs = spec.get("runs") if isinstance(spec, dict) else None
        for i, run in enumerate(runs if isinstance(runs, list) else []):
            if isinstance(run, dict) and "name" in run:
                check_name(f"{p}: suites.{suite}.runs[{i}].name", run["name"])


def _check_paths(p: Path, data: dict) -> None:
    """Every path the file gives, checked as a path once, where the file is read (csebench.core.paths.check_path_setting):
    paths.data, paths.results and paths.shared, and the files of each data source (corpus, senteval, probing and
    your own STS sets), which reach the rules' commands (--sts-pairs) or the folders they write."""
    for key, value in (data.get("paths") or {}).items():
        check_path_setting(f"{p}: paths.{key}", value, pattern=key in ("data", "results"))
    for source, spec in (data.get("data") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        entries = [(part, spec.get(part)) for part in ("corpus", "senteval", "probing")]
        entries += [(f"sts_pairs.{name}", entry) for name, entry in (spec.get("sts_pairs") or {}).items()]
        for where, entry in entries:
            if isinstance(entry, dict) and entry.get("path") is not None:
                check_path_setting(f"{p}: data.{source}.{where}.path", entry["path"])


SEED_RANGE = re.compile(r"(\d+)-(\d+)")


def _expand_compact_forms(p: Path, data: dict) -> dict:
    """params.yaml's compact forms, as the code reads them: a suite's ``runs`` keyed by run name
    becomes the list of runs with their names, and every ``seeds: A-B`` the list A..B. params.yaml
    writes them so that its lines stay within the 80 columns `dvc exp run -S` rewraps at
    (docs/dvc.md); each file is expanded on its own, so an override's ``runs`` still replaces the
    suite's whole list."""

    def expand(node, where: str):
        if isinstance(node, dict):
            inner = {k: f"{where}.{k}" if where else str(k) for k in node}
            return {k: seeds(v, inner[k]) if k == "seeds" else expand(v, inner[k]) for k, v in node.items()}
        if isinstance(node, list):
            return [expand(x, f"{where}[{i}]") for i, x in enumerate(node)]
        return node

    def seeds(value, where: str):
        if not isinstance(value, str):
            return expand(value, where)
        m = SEED_RANGE.fullmatch(value)
        if not m or int(m[1]) > int(m[2]):
            raise ConfigError(f"{p}: {where}: expected a list of seeds or a range first-last (e.g. 1-16), got {value!r}")
        return list(range(int(m[1]), int(m[2]) + 1))

    data = expand(data, "")
    for name, suite in (data.get("suites") or {}).items():
        runs = suite.get("runs") if isinstance(suite, dict) else None
        if isinstance(runs, dict):
            for run_name, run in runs.items():
                if "name" in run:
                    raise ConfigError(f"{p}: suites.{name}.runs.{run_name}: the key names the run; drop 'name'")
            suite["runs"] = [{"name": run_name, **run} for run_name, run in runs.items()]
    return data


TOP_KEYS = ["paths", "data", "backbones", "training", "methods", "suites", "dvc"]


def _check_finite(p: Path, node, where: str = "") -> None:
    """Every number in the file is finite, used or not: a NaN in a default that every suite overrides
    (training.learning_rate: .nan) was accepted, because only resolved values were checked."""
    import math

    if isinstance(node, dict):
        for key, value in node.items():
            _check_finite(p, value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_finite(p, value, f"{where}[{i}]")
    elif isinstance(node, float) and not math.isfinite(node):
        raise ConfigError(f"{p}: {where}: expected a finite number, got {node}")


def _check_training_sections(p: Path, params: dict) -> None:
    """Reject unknown training keys where they are written (file + key path), before merging
    loses where a key came from."""
    valid = [f.name for f in dataclasses.fields(TrainingConfig)]

    def check(where: str, section) -> None:
        if isinstance(section, dict):
            for key in section:
                if key not in valid:
                    raise ConfigError(f"{p}: {where}: unknown key '{key}'{_suggest(str(key), valid)}")

    check("training", params.get("training"))
    for group in ("backbones", "methods", "suites"):
        for name, spec in (params.get(group) or {}).items() if isinstance(params.get(group), dict) else []:
            if not isinstance(spec, dict):
                continue
            check(f"{group}.{name}.training", spec.get("training"))
            if group == "methods":
                for bb, sub in (spec.get("by_backbone") or {}).items() if isinstance(spec.get("by_backbone"), dict) else []:
                    if isinstance(sub, dict):
                        check(f"methods.{name}.by_backbone.{bb}.training", sub.get("training"))
            if group == "suites":
                for i, run in enumerate(spec.get("runs") or []) if isinstance(spec.get("runs"), list) else []:
                    if isinstance(run, dict):
                        check(f"suites.{name}.runs[{i}].training", run.get("training"))


def _read_yaml(p: Path) -> dict:
    data = read_yaml(p)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of sections (paths, data, training, ...), got {type(data).__name__}")
    return data


def named_entry(params: dict, name: str, key: str, what: str, where: str = "") -> dict:
    """Entry ``key`` of the section ``name`` (a backbone, a method, a suite), or an error naming the closest one."""
    table = params.get(name) or {}
    if key not in table:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}unknown {what} '{key}'{_suggest(str(key), list(table))}")
    return table[key] or {}


SUITE_KEYS = ["description", "data", "seeds", "training", "runs", "backbones", "methods", "dvc", "transfer", "evaluation",
              "mteb"]
# evaluate: false = a training-only run (curves, teacher), no embedding/STS/transfer/analysis jobs
# train: false = an evaluation-only run: its model is the untrained backbone (csebench.training.untrained_run)
RUN_KEYS = ["name", "backbone", "method", "label", "training", "objectives", "seeds", "evaluate", "train"]
METHOD_KEYS = ["label", "compose", "objectives", "training", "by_backbone"]


def list_suites(params: dict) -> list[str]:
    return list((params.get("suites") or {}).keys())


# where the params put prepared data and results (csebench.core.paths: the layout inside them)

def results_root(params: dict | None) -> str:
    return ((params or {}).get("paths") or {}).get("results", "results")


def data_root(params: dict | None) -> str:
    return ((params or {}).get("paths") or {}).get("data", "data")


def run_dir(params: dict | None, suite: str, run: str, seed: int, results: str | None = None) -> str:
    """``{results}/{suite}/runs/{run}/seed{seed}`` (csebench.core.paths.view_dir); ``results`` defaults to params'
    paths.results."""
    return view_dir(results or results_root(params), suite, run, seed)

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

from csebench.errors import ConfigError
from csebench.paths import check_name
from csebench.schema import _suggest, check_keys, from_dict, read_yaml

SHARED_ENV = "CSEBENCH_SHARED"
POOLERS = ("cls", "cls_before_pooler", "avg", "avg_first_last", "avg_top2")
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "fast")  # training autocast: trainer.autocast_dtype
EVAL_PRECISIONS = ("auto", "fp32", "bf16", "fast")  # encoding for evaluation: encoder.eval_autocast_dtype
PROJECTION_HEADS = ("linear", "linear_tanh", "batchnorm")  # training.projection_head (SSCL Table 5: paper, released code; DiffCSE's BatchNorm MLP)
# training.dev_metric: what selects the checkpoint. stsb: STS-B dev Spearman (SimCSE's metric_for_best_model
# stsb_spearman); avg_sts: the mean of STS-B dev and SICK-R dev (SimCSE's trainer's eval_avg_sts, which DCLR's
# run.sh selects on: --metric_for_best_model avg_sts)
DEV_METRICS = ("stsb", "avg_sts")


def deep_merge(base: dict, override: dict | None) -> dict:
    out = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


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
    compile: bool = False
    num_workers: int = 0
    dropout: float | None = None  # None: the backbone's own (0.1 for BERT/RoBERTa)
    projection_dim: int | None = None  # SSCL Table 5: trained linear head to this size, kept at evaluation
    projection_head: str = "linear"  # linear (SSCL Table 5's "simply linear projection head") | linear_tanh (released code) | batchnorm (DiffCSE's training head of the cls pooler)
    num_layers: int | None = None  # SSCL Table 1 "SimCSE (10)": keep only the first N transformer layers (None: all)
    dev_max_pairs: int | None = None  # CPU demo only: STS-B dev scored on a seeded subset of about N pairs (None: all 1500)
    dev_set: str | None = None  # checkpoint selection on your own STS data (data.<source>.sts_pairs NAME); None: STS-B dev
    dev_metric: str | None = None  # checkpoint selection on: stsb (None: the same) | avg_sts (mean of STS-B and SICK-R dev)

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


# What a run's key leaves out (docs/runs.md, "What goes into a key"): settings that change how a run
# is carried out but not its outputs (a resumed run ends with the same weights whatever the checkpoint
# cadence; the data loader's workers do not change the seeded order).
RESULT_NEUTRAL = ("checkpoint_steps", "num_workers")
# The training settings an evaluation-only run (`train: false`) reads: the model it writes (a projection
# head, the first N layers) and its STS-B dev scores. Nothing else of `training:` changes its outputs.
EVAL_ONLY_SETTINGS = ("projection_dim", "projection_head", "num_layers", "eval_batch_size", "eval_precision",
                      "dev_max_pairs", "dev_set")


@dataclass
class RunConfig:
    suite: str
    name: str
    seed: int
    method: str
    method_label: str
    backbone_name: str
    backbone: BackboneConfig
    data_name: str
    data: DataConfig
    training: TrainingConfig
    objectives: dict[str, dict]
    paths: dict[str, str]
    train: bool = True  # false: an evaluation-only run, its model the untrained backbone (csebench.untrained_run)
    teacher_keys: dict[str, str] = field(default_factory=dict)  # DistillCSE: teacher run name -> its key()
    dev_file: str | None = None  # the file of training.dev_set (data.<source>.sts_pairs), None without one

    @property
    def run_id(self) -> str:
        return f"{self.name}/seed{self.seed}"

    @property
    def run_dir(self) -> Path:
        from csebench.paths import run_dir

        return Path(run_dir(None, self.suite, self.name, self.seed, self.paths["results"]))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def identity(self, seed: bool = True) -> dict:
        """What the run computes, without what only names it: the suite, run, method, backbone and
        data names and the labels are left out (two suites listing the same run train it once,
        docs/runs.md); a data source is kept as params.yaml writes it ({shared} unexpanded, so the
        shared folder's place on this machine does not change the run); so is the file of your own dev
        set (training.dev_set), not the set's name; teachers are named by their own keys, not by their
        run names in the suite. seed=False: what the run's seeds share."""
        d = self.to_dict()
        for name in ("paths", "suite", "name", "method", "method_label", "backbone_name", "data_name", "teacher_keys",
                     "dev_file"):
            d.pop(name)
        d["backbone"].pop("label")
        for source in d["data"].values():
            if source.get("path"):
                source["path"] = self._as_written(source["path"])
        if self.training.dev_set is not None:  # your own dev set is its file, whatever the data source calls it
            d["training"]["dev_set"] = self._as_written(self.dev_file)
        if d["training"].get("dev_metric") == "stsb":  # the default, written out: the same selection, the same key
            d["training"]["dev_metric"] = None
        for later in ("num_layers", "dev_max_pairs", "dev_set", "dev_metric"):  # added later: unset, they leave keys as they were
            if d["training"].get(later) is None:
                d["training"].pop(later, None)
        if d["training"].get("projection_dim") is None and d["training"].get("projection_head") != "batchnorm":
            d["training"].pop("projection_head", None)  # no projection, no head to describe (DiffCSE's cls head: kept)
        for setting in RESULT_NEUTRAL:  # how the run is carried out, not what it computes
            d["training"].pop(setting, None)
        if d.get("train"):  # trained runs (all runs before the flag existed) keep their keys
            d.pop("train")
        else:  # evaluation-only: the untrained backbone, scored; no corpus, objective or training setting reaches it
            d["training"] = {k: v for k, v in d["training"].items() if k in EVAL_ONLY_SETTINGS}
            d["objectives"] = {}
            d["data"].pop("corpus", None)
        prompt = d["objectives"].get("prompt")
        if prompt and prompt.get("dev_denoise") is None and not prompt.get("denoise"):  # added later: where it
            prompt.pop("dev_denoise", None)  # resolves to no denoising (SNCSE's runs) the keys stay as they were
        layer = d["objectives"].get("layer_negatives")
        if layer and layer.get("positives") == "dropout":  # added later: the default leaves keys as they were
            layer.pop("positives")
        from csebench.teacherspec import parse_teachers, teacher_term

        found = teacher_term(d["objectives"])
        if found and self.teacher_keys:
            distill = found[1]
            distill["teachers"] = [{"run": self.teacher_keys[t["run"]], "seeds": t["seeds"]}
                                   for t in parse_teachers(distill["teachers"], f"objectives.{found[0]}")]
        if not seed:
            d.pop("seed")
        return d

    def _as_written(self, path: str) -> str:
        """A data file's path as params.yaml writes it: {shared} unexpanded, so the shared folder's place
        on this machine does not change the run."""
        shared = self.paths.get("shared")
        return "{shared}" + path[len(shared):] if shared and str(path).startswith(shared) else path

    def key(self) -> str:
        """The run's key: the hash of its identity without the seed. Its seeds train in
        RESULTS/runs/<key>/seed<N>, whichever suites list it."""
        return digest(self.identity(seed=False))

    def fingerprint(self, extra: dict | None = None) -> str:
        """Hash of the identity with the seed, plus ``extra``: what a rerun or a checkpoint must match."""
        return digest({**self.identity(), **(extra or {})})

    def record(self) -> dict:
        """model/training_config.json: the resolved configuration with its key and fingerprint (a
        DistillCSE student checks its teachers' caches by key)."""
        return {**self.to_dict(), "key": self.key(), "fingerprint": self.fingerprint()}


def digest(obj, length: int = 16) -> str:
    """Hex digest of JSON-able content (keys sorted): run keys, fingerprints, evaluation folder names."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:length]


# ----------------------------------------------------------------------------- params


def shared_dir(params: dict | None = None) -> str:
    env = os.environ.get(SHARED_ENV)
    if env:
        return env
    value = str((params or {}).get("paths", {}).get("shared", "../shared"))
    if not os.path.isabs(value) and not os.path.exists(value):
        origin = experiment_origin()
        if origin is not None and (origin / value).exists():
            return str(origin / value)
    return value


def shared_senteval(params: dict | None, missing: str, other: str) -> str:
    """The shared SentEval folder params.yaml names (paths.shared/senteval, $CSEBENCH_SHARED), for a command or
    call that was given none; where it is not there, a DataError that begins with ``missing`` and ends with
    ``other``, the caller's own way to name one."""
    path = os.path.join(shared_dir(params), "senteval")
    if not os.path.isdir(path):
        from csebench.errors import DataError

        raise DataError(f"{missing} the shared SentEval data are not at {path}: put the shared folder beside the "
                        f"checkout (../shared), or set $CSEBENCH_SHARED or paths.shared, or {other}")
    return path


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
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"params file not found: {p} (run from the project root or pass --params)")
    params = _read_params_file(p)
    for extra in overrides or []:
        q = Path(extra)
        if not q.is_file():
            raise ConfigError(f"config override not found: {q}")
        params = deep_merge(params, _read_params_file(q))  # a mistake in an override file is named with that file
    return params


def _read_params_file(p: Path) -> dict:
    """One params or override file, checked on its own (before merging loses where a key came from):
    its structure against the JSON Schema every entry point and Snakemake share, then training keys."""
    from csebench.schema import validate

    data = _read_yaml(p)
    check_keys(str(p), data, TOP_KEYS)
    _check_finite(p, data)
    validate(data, "params", str(p))
    data = _expand_compact_forms(p, data)
    _check_names(p, data)
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


def _section(params: dict, name: str, key: str, what: str, where: str = "") -> dict:
    table = params.get(name) or {}
    if key not in table:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}unknown {what} '{key}'{_suggest(str(key), list(table))}")
    return table[key] or {}


SUITE_KEYS = ["description", "data", "seeds", "training", "runs", "backbones", "methods", "dvc", "transfer", "evaluation",
              "mteb"]
# evaluate: false = a training-only run (curves, teacher), no embedding/STS/transfer/analysis jobs
# train: false = an evaluation-only run: its model is the untrained backbone (csebench.untrained_run)
RUN_KEYS = ["name", "backbone", "method", "label", "training", "objectives", "seeds", "evaluate", "train"]
METHOD_KEYS = ["label", "compose", "objectives", "training", "by_backbone"]


def suite_runs(params: dict, suite: str) -> list[dict]:
    """The suite's run entries, each with name/backbone/method. ``runs`` lists them, or the
    suite gives ``backbones`` x ``methods`` and every pair becomes a run named backbone-method."""
    spec = _section(params, "suites", suite, "suite")
    check_keys(f"suites.{suite}", spec, SUITE_KEYS)
    if suite == "runs":
        raise ConfigError("suites.runs: the name 'runs' is taken by the runs' own folders (results/runs/); rename the suite")
    runs = [dict(r) for r in spec.get("runs") or []]
    for backbone in spec.get("backbones") or []:
        for method in spec.get("methods") or []:
            runs.append({"name": f"{backbone}-{method}", "backbone": backbone, "method": method})
    seen = set()
    for i, run in enumerate(runs):
        check_keys(f"suites.{suite}.runs[{i}]", run, RUN_KEYS)
        for req in ("backbone", "method"):
            if req not in run:
                raise ConfigError(f"suites.{suite}.runs[{i}]: missing '{req}'")
        run.setdefault("name", f"{run['backbone']}-{run['method']}")
        for flag in ("evaluate", "train"):
            if not isinstance(run.setdefault(flag, True), bool):
                raise ConfigError(f"suites.{suite}.runs[{i}].{flag}: give true or false, got {run[flag]!r}")
        check_name(f"suites.{suite}.runs[{i}].name", run["name"])  # a backbone-method name too
        if run["name"] in seen:
            raise ConfigError(f"suites.{suite}: run name '{run['name']}' appears twice")
        seen.add(run["name"])
    if not runs:
        raise ConfigError(f"suites.{suite}: no runs (give 'runs' or 'backbones' and 'methods')")
    return runs


def suite_seeds(params: dict, suite: str, run_name: str | None = None) -> list[int]:
    spec = _section(params, "suites", suite, "suite")
    seeds = spec.get("seeds") or [42]
    if run_name is not None:
        run = find_run(params, suite, run_name)
        seeds = run.get("seeds") or seeds
    return [int(s) for s in seeds]


def find_run(params: dict, suite: str, run_name: str) -> dict:
    runs = {r["name"]: r for r in suite_runs(params, suite)}
    if run_name not in runs:
        raise ConfigError(f"suite '{suite}' has no run '{run_name}'{_suggest(run_name, list(runs))}")
    return runs[run_name]


DATA_KEYS = ["corpus", "senteval", "probing", "sts_pairs"]


def data_config(params: dict, data_name: str) -> DataConfig:
    spec = _section(params, "data", data_name, "data source")
    check_keys(f"data.{data_name}", spec, DATA_KEYS)
    corpus = from_dict(SourceConfig, spec.get("corpus"), f"data.{data_name}.corpus")
    senteval = from_dict(SourceConfig, spec.get("senteval"), f"data.{data_name}.senteval")
    corpus.path = expand_path(corpus.path, params)
    senteval.path = expand_path(senteval.path, params)
    return DataConfig(corpus=corpus, senteval=senteval)


def probing_source(params: dict, data_name: str) -> ProbingSourceConfig:
    """``data.<name>.probing`` (kept out of DataConfig, so run fingerprints do not depend on it)."""
    spec = _section(params, "data", data_name, "data source")
    check_keys(f"data.{data_name}", spec, DATA_KEYS)
    if not spec.get("probing"):
        raise ConfigError(f"data.{data_name} has no 'probing' source: add probing: {{url: {SENTEVAL_PROBING_URL}}} "
                          f"or probing: {{path: FOLDER}} (a folder with SentEval's data/probing files)")
    src = from_dict(ProbingSourceConfig, spec["probing"], f"data.{data_name}.probing")
    src.path = expand_path(src.path, params)
    return src


def sts_pairs_file(params: dict, data_name: str, name: str, where: str, expand: bool = True) -> str:
    """The file of ``data.<data_name>.sts_pairs.<name>``, your own STS set (a TSV or CSV of sentence1,
    sentence2, score and an optional split column; evaluation/sts.py reads it). Kept out of DataConfig,
    like the probing source: adding a set retrains nothing; a run that selects on one (training.dev_set)
    has that file's path in its key, not the set's name (RunConfig.identity); a suite that scores them
    has the files in its evaluation folder's name (suites.eval_name). ``where`` names the key that asked;
    expand=False: the path as params.yaml writes it ({shared} unexpanded)."""
    sets = _section(params, "data", data_name, "data source").get("sts_pairs") or {}
    if name not in sets:
        hint = _suggest(str(name), list(sets)) if sets else f" (it has none: add data.{data_name}.sts_pairs: {{{name}: {{path: FILE}}}})"
        raise ConfigError(f"{where}: data source '{data_name}' has no STS set '{name}' in data.{data_name}.sts_pairs{hint}")
    spec = sets[name] or {}
    check_keys(f"data.{data_name}.sts_pairs.{name}", spec, ["path"])
    if not spec.get("path"):
        raise ConfigError(f"data.{data_name}.sts_pairs.{name}: give 'path', a TSV or CSV file (sentence1, sentence2, score[, split])")
    return expand_path(str(spec["path"]), params) if expand else str(spec["path"])


def backbone_config(params: dict, name: str) -> BackboneConfig:
    return from_dict(BackboneConfig, _section(params, "backbones", name, "backbone"), f"backbones.{name}")


def method_settings(params: dict, name: str, backbone: str, chain: tuple[str, ...] = ()) -> tuple[dict, dict, dict]:
    """(training, objectives, clashes) of method ``name`` on ``backbone``, merged in this order: the
    methods it composes (``compose: [a, b]``: the combination of their objective terms, each term with
    its own method's settings), its own ``training``/``objectives``, its ``by_backbone`` entry.

    Composed methods must agree: a term two of them set differently is an error here; a training key they
    set differently is returned in ``clashes`` ({key: "a: x, b: y"}) unless this method sets it, and
    resolve_run refuses it unless the suite or run sets it. A key only some of them set counts as set
    differently when its value is not the default the others train with (params.yaml ``training`` and the
    backbone's): ``compose: [sscl_bert, gs_infonce]`` would otherwise train GS-InfoNCE with SSCL-BERT's
    dropout 0 (no dropout positives)."""
    method = _section(params, "methods", name, "method", f"methods.{chain[-1]}.compose" if chain else "")
    check_keys(f"methods.{name}", method, METHOD_KEYS)
    if name in chain:
        raise ConfigError(f"methods.{name}.compose: the method composes itself ({' -> '.join(chain + (name,))})")
    parts = method.get("compose") or []
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise ConfigError(f"methods.{name}.compose: expected a list of method names, got {parts!r}")
    if "compose" in method and not parts:  # it would train plain SimCSE under the composed method's name
        raise ConfigError(f"methods.{name}.compose: the list is empty; name the methods it combines, or drop compose: "
                          "and give the method its own objectives")
    training: dict = {}
    objectives: dict = {}
    clashes: dict[str, str] = {}
    set_by: dict[str, str] = {}  # training key or term -> the composed method that set it
    part_training: list[tuple[str, dict]] = []
    for part in parts:
        t, o, c = method_settings(params, part, backbone, chain + (name,))
        part_training.append((part, t))
        for term, settings in o.items():
            if term in objectives and objectives[term] != settings:
                raise ConfigError(f"methods.{name}.compose: {set_by['objectives.' + term]} and {part} both set the "
                                  f"objective {term}, differently ({objectives[term]} vs {settings}); compose methods "
                                  f"with different terms, or one method with that term's settings")
            objectives[term], set_by["objectives." + term] = settings, part
        clashes.update(c)
        for key, value in t.items():
            if key in training and training[key] != value:
                clashes[key] = f"{set_by[key]}: {training[key]!r}, {part}: {value!r}"
            training[key], set_by[key] = value, part
    if part_training:  # a key some parts leave unset: those train with the default
        default = deep_merge(params.get("training") or {}, backbone_config(params, backbone).training)
        for key in training:
            unset = [p for p, t in part_training if key not in t]
            values = [(p, t[key]) for p, t in part_training if key in t]
            if unset and key not in clashes and any(v != default.get(key) for _, v in values):
                clashes[key] = ", ".join([*(f"{p}: {v!r}" for p, v in values),
                                          *(f"{p}: not set, so {default.get(key)!r}" for p in unset)])
    by_backbone = (method.get("by_backbone") or {}).get(backbone, {})
    check_keys(f"methods.{name}.by_backbone.{backbone}", by_backbone, ["training", "objectives"])
    for layer in (method.get("training"), by_backbone.get("training")):
        training = deep_merge(training, layer)
        clashes = {k: v for k, v in clashes.items() if k not in (layer or {})}
    for layer in (method.get("objectives"), by_backbone.get("objectives")):
        objectives = deep_merge(objectives, layer)
    return training, objectives, clashes


def method_label(params: dict, name: str) -> str:
    """A method's label; a composed method without one is its parts' labels joined by " + "."""
    method = _section(params, "methods", name, "method")
    if method.get("label"):
        return method["label"]
    parts = method.get("compose") or []
    return " + ".join(method_label(params, p) for p in parts) if parts else name


def resolve_run(params: dict, suite: str, run_name: str, seed: int, _students: tuple[str, ...] = ()) -> RunConfig:
    from csebench.objectives import validate_objectives  # late import: objectives import torch

    suite_spec = _section(params, "suites", suite, "suite")
    run = find_run(params, suite, run_name)
    where = f"suites.{suite}, run '{run_name}'"
    _section(params, "backbones", run["backbone"], "backbone", f"{where}.backbone")
    backbone = backbone_config(params, run["backbone"])
    _section(params, "methods", run["method"], "method", f"{where}.method")
    method_training, method_objectives, clashes = method_settings(params, run["method"], run["backbone"])

    train_dict = deep_merge(params.get("training") or {}, backbone.training)
    later = (suite_spec.get("training"), run.get("training"))
    for layer in (method_training, *later):
        train_dict = deep_merge(train_dict, layer)
    for key, values in clashes.items():
        if not any(key in (layer or {}) for layer in later):
            raise ConfigError(f"methods.{run['method']}.compose: the composed methods set training.{key} differently "
                              f"({values}) on backbone {run['backbone']}; set it in methods.{run['method']}.training "
                              f"(or its by_backbone.{run['backbone']}), the suite's training or the run's to say "
                              "which applies")
    training = from_dict(TrainingConfig, train_dict, f"training (suite {suite}, run {run_name})")

    objectives = deep_merge(method_objectives, run.get("objectives"))
    objectives = validate_objectives(objectives, f"run {suite}/{run_name}", training)

    data_name = suite_spec.get("data")
    if not data_name:
        raise ConfigError(f"suites.{suite}: missing 'data'")
    dev_file = None  # a dev set that is not there fails now, not after the first training steps
    if training.dev_set is not None:
        dev_file = sts_pairs_file(params, data_name, training.dev_set, f"training (suite {suite}, run {run_name}).dev_set")
    paths = {"data": "data", "results": "results"}
    paths.update({k: v for k, v in (params.get("paths") or {}).items() if k in ("data", "results")})
    paths["shared"] = shared_dir(params)
    return RunConfig(
        suite=suite, name=run_name, seed=int(seed), method=run["method"],
        method_label=_method_label(params, run),
        backbone_name=run["backbone"], backbone=backbone, data_name=data_name,
        data=data_config(params, data_name), training=training, objectives=objectives, paths=paths,
        train=run["train"], teacher_keys=_teacher_keys(params, suite, run_name, int(seed), run, objectives, _students),
        dev_file=dev_file,
    )


def _method_label(params: dict, run: dict) -> str:
    return run.get("label") or method_label(params, run["method"])


def run_info(params: dict, suite: str, run_name: str, seed: int) -> dict:
    """How a result names its run (``run_info`` of sts.json, transfer.json, probing.json), read from
    params.yaml without resolving the run (fast: a suite's view of a shared run is relabelled with it)."""
    run = find_run(params, suite, run_name)
    _section(params, "methods", run["method"], "method", f"suites.{suite}, run '{run_name}'.method")
    backbone = _section(params, "backbones", run["backbone"], "backbone", f"suites.{suite}, run '{run_name}'.backbone")
    return {"suite": suite, "name": run_name, "seed": int(seed), "method": run["method"],
            "method_label": _method_label(params, run), "backbone": run["backbone"],
            "backbone_label": backbone.get("label") or run["backbone"]}


def _teacher_keys(params: dict, suite: str, run_name: str, seed: int, run: dict, objectives: dict,
                  students: tuple[str, ...]) -> dict:
    """A student's teachers (runs of its suite: DistillCSE's, DCLR's, RankCSE's) by key: the student is the
    same run wherever its teachers are, whatever a suite calls them. An evaluation-only run learns from
    nothing. A teacher that is the student at its own seed, or one that learns from its student, would make
    a job wait for itself (Snakemake's CyclicGraphException): refused here, naming the method."""
    from csebench.teacherspec import parse_teachers, teacher_term

    found = teacher_term(objectives) if run["train"] else None
    if not found:
        return {}
    where = f"objectives.{found[0]}.teachers"
    chain = (*students, run_name)
    keys = {}
    for teacher in parse_teachers(found[1].get("teachers"), f"run {suite}/{run_name}: objectives.{found[0]}"):
        name = teacher["run"]
        if name == run_name:  # its own other seeds (teacher caches given by hand): no key of its own to name
            if teacher["seeds"] is None or seed in teacher["seeds"]:
                which = (f"without seeds, i.e. at the student's own seed" if teacher["seeds"] is None
                         else f"at seeds {', '.join(map(str, teacher['seeds']))}, its own seed {seed} among them")
                raise ConfigError(f"suites.{suite}: run {run_name} (method {run['method']}) is its own teacher ({where} "
                                  f"names run {name} {which}); a teacher must be another run of the suite, or other "
                                  "seeds of this one")
            keys[name] = "self"
        elif name in chain:
            loop = " -> ".join((*chain[chain.index(name):], name))
            raise ConfigError(f"suites.{suite}: the teachers of method {run['method']} ({where}) go round in a circle "
                              f"({loop}); a teacher must be a run that does not learn from its student")
        else:
            keys[name] = resolve_run(params, suite, name, 0, chain).key()
    return keys


def list_suites(params: dict) -> list[str]:
    return list((params.get("suites") or {}).keys())

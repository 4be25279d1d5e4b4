"""A run of params.yaml resolved: its suite's run entry found, its backbone, method (composed methods
merged), data source and training settings layered (training defaults < backbone < method < suite < run),
its objectives checked by their terms, and the RunConfig whose key names its folder (results/runs/KEY).
The file itself is loaded and checked by csebench.study.params.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from csebench.core.lazy import LazyRegistry
from csebench.core.errors import ConfigError
from csebench.core.paths import check_name
from csebench.core.schema import _suggest, check_keys, from_dict
from csebench.study.params import (BackboneConfig, DataConfig, METHOD_KEYS, ProbingSourceConfig, RUN_KEYS,
                                   SENTEVAL_PROBING_URL, SUITE_KEYS, SourceConfig, TrainingConfig, named_entry,
                                   deep_merge, digest, expand_path, merge_into, named_backbone_model, shared_dir)

# A run's objectives are checked (and their defaults filled in) by the terms' own settings classes, which live
# in csebench.objectives, a layer above the study: the check is loaded by name on first use, as the terms
# themselves are (csebench.core.lazy), so resolving a run never imports the layers above it.
TERM_SETTINGS = LazyRegistry("objective settings check", {"check": "csebench.objectives:validate_objectives",
                                                           "reads_teachers": "csebench.objectives:reads_teachers"})


# What a run's key leaves out (docs/runs.md, "What goes into a key"): settings that change how a run
# is carried out but not its outputs (a resumed run ends with the same weights whatever the checkpoint
# cadence; the data loader's workers do not change the seeded order).
RESULT_NEUTRAL = ("checkpoint_steps", "num_workers")
# The training settings an evaluation-only run (`train: false`) reads: the model it writes (a projection
# head, the first N layers) and its STS-B dev scores. Nothing else of `training:` changes its outputs.
EVAL_ONLY_SETTINGS = ("projection_dim", "projection_head", "num_layers", "eval_batch_size", "eval_precision",
                      "dev_max_pairs", "dev_set", "prefix")


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
    train: bool = True  # false: an evaluation-only run, its model the untrained backbone (csebench.training.untrained_run)
    teacher_keys: dict[str, str] = field(default_factory=dict)  # DistillCSE: teacher run name -> its key()
    dev_file: str | None = None  # the file of training.dev_set (data.<source>.sts_pairs), None without one
    pooler_origin: str = ""  # why the run pools as it does: its backbone's pooler, or what its method needs instead

    @property
    def run_id(self) -> str:
        return f"{self.name}/seed{self.seed}"

    @property
    def run_dir(self) -> Path:
        from csebench.study.params import run_dir

        return Path(run_dir(None, self.suite, self.name, self.seed, self.paths["results"]))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def identity(self, seed: bool = True) -> dict:
        """What the run computes, without what only names it: the suite, run, method, backbone and
        data names and the labels are left out (two suites listing the same run train it once,
        docs/runs.md); a data source is kept as params.yaml writes it ({shared} unexpanded, so the
        shared folder's place on this machine does not change the run), but a corpus file of your own (a path
        outside the shared folder) is its sha256, so that two spellings of its path, or a copy, are one run
        (a file not there yet keeps its path until it is); so is the file of your own dev
        set (training.dev_set), not the set's name; teachers are named by their own keys, not by their
        run names in the suite. seed=False: what the run's seeds share."""
        d = self.to_dict()
        for name in ("paths", "suite", "name", "method", "method_label", "backbone_name", "data_name", "teacher_keys",
                     "dev_file", "pooler_origin"):
            d.pop(name)
        d["backbone"].pop("label")
        for source in d["data"].values():
            if source.get("path"):
                source["path"] = self._as_written(source["path"])
        corpus = d["data"].get("corpus") or {}
        if corpus.get("path") and not corpus["path"].startswith("{shared}") and os.path.isfile(self.data.corpus.path):
            # a corpus of your own is its content, however its path is spelled (my.txt, ../work/my.txt, a copy)
            from csebench.core.provenance import file_sha256

            corpus["path"] = None
            corpus["sha256"] = file_sha256(self.data.corpus.path)
        if self.training.dev_set is not None:  # your own dev set is its file, whatever the data source calls it
            d["training"]["dev_set"] = self._as_written(self.dev_file)
        if d["training"].get("dev_metric") == "stsb":  # the default, written out: the same selection, the same key
            d["training"]["dev_metric"] = None
        for later in ("num_layers", "dev_max_pairs", "dev_set", "dev_metric", "prefix"):  # added later: unset, they leave keys as they were
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
        debiased = d["objectives"].get("debiased_negatives")
        if debiased and debiased.get("attention") == "masked":  # added later: the default leaves keys as they were
            debiased.pop("attention")
        if debiased and debiased.get("teacher_representation") == "eval":  # added later: the default, likewise
            debiased.pop("teacher_representation")
        from csebench.study.teacherspec import parse_teachers, teacher_term

        found = teacher_term(d["objectives"])
        if found and self.teacher_keys:
            distill = found[1]
            distill["teachers"] = [{"run": self.teacher_keys[t["run"]], "seeds": t["seeds"]} if "run" in t else
                                   {"model": self.teacher_keys[MODEL_TEACHER + t["model"]]}
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


def suite_runs(params: dict, suite: str) -> list[dict]:
    """The suite's run entries, each with name/backbone/method. ``runs`` lists them, or the
    suite gives ``backbones`` x ``methods`` and every pair becomes a run named backbone-method."""
    spec = named_entry(params, "suites", suite, "suite")
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
    spec = named_entry(params, "suites", suite, "suite")
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
    spec = named_entry(params, "data", data_name, "data source")
    check_keys(f"data.{data_name}", spec, DATA_KEYS)
    corpus = from_dict(SourceConfig, spec.get("corpus"), f"data.{data_name}.corpus")
    senteval = from_dict(SourceConfig, spec.get("senteval"), f"data.{data_name}.senteval")
    corpus.path = expand_path(corpus.path, params)
    senteval.path = expand_path(senteval.path, params)
    return DataConfig(corpus=corpus, senteval=senteval)


def probing_source(params: dict, data_name: str) -> ProbingSourceConfig:
    """``data.<name>.probing`` (kept out of DataConfig, so run fingerprints do not depend on it)."""
    spec = named_entry(params, "data", data_name, "data source")
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
    sets = named_entry(params, "data", data_name, "data source").get("sts_pairs") or {}
    if name not in sets:
        hint = _suggest(str(name), list(sets)) if sets else f" (it has none: add data.{data_name}.sts_pairs: {{{name}: {{path: FILE}}}})"
        raise ConfigError(f"{where}: data source '{data_name}' has no STS set '{name}' in data.{data_name}.sts_pairs{hint}")
    spec = sets[name] or {}
    check_keys(f"data.{data_name}.sts_pairs.{name}", spec, ["path"])
    if not spec.get("path"):
        raise ConfigError(f"data.{data_name}.sts_pairs.{name}: give 'path', a TSV or CSV file (sentence1, sentence2, score[, split])")
    return expand_path(str(spec["path"]), params) if expand else str(spec["path"])


def backbone_config(params: dict, name: str) -> BackboneConfig:
    return from_dict(BackboneConfig, named_entry(params, "backbones", name, "backbone"), f"backbones.{name}")


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
    method = named_entry(params, "methods", name, "method", f"methods.{chain[-1]}.compose" if chain else "")
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
    method = named_entry(params, "methods", name, "method")
    if method.get("label"):
        return method["label"]
    parts = method.get("compose") or []
    return " + ".join(method_label(params, p) for p in parts) if parts else name


def resolve_run(params: dict, suite: str, run_name: str, seed: int, _students: tuple[str, ...] = ()) -> RunConfig:
    suite_spec = named_entry(params, "suites", suite, "suite")
    run = find_run(params, suite, run_name)
    where = f"suites.{suite}, run '{run_name}'"
    named_entry(params, "backbones", run["backbone"], "backbone", f"{where}.backbone")
    backbone = backbone_config(params, run["backbone"])
    named_entry(params, "methods", run["method"], "method", f"{where}.method")
    method_training, method_objectives, clashes = method_settings(params, run["method"], run["backbone"])

    train_dict = deep_merge(params.get("training") or {}, backbone.training)
    later = (suite_spec.get("training"), run.get("training"))
    for layer in (method_training, *later):
        merge_into(train_dict, layer)  # train_dict is this function's own copy
    for key, values in clashes.items():
        if not any(key in (layer or {}) for layer in later):
            raise ConfigError(f"methods.{run['method']}.compose: the composed methods set training.{key} differently "
                              f"({values}) on backbone {run['backbone']}; set it in methods.{run['method']}.training "
                              f"(or its by_backbone.{run['backbone']}), the suite's training or the run's to say "
                              "which applies")
    training = from_dict(TrainingConfig, train_dict, f"training (suite {suite}, run {run_name})")

    objectives = deep_merge(method_objectives, run.get("objectives"))
    objectives = TERM_SETTINGS.get("check")(objectives, f"run {suite}/{run_name}", training)
    objectives = _model_teachers_named(params, objectives)
    backbone, pooler_origin = method_pooler(backbone, run, training, objectives)

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
        method_label=run_label(params, run),
        backbone_name=run["backbone"], backbone=backbone, data_name=data_name,
        data=data_config(params, data_name), training=training, objectives=objectives, paths=paths,
        train=run["train"], teacher_keys=_teacher_keys(params, suite, run_name, int(seed), run, objectives, _students),
        dev_file=dev_file, pooler_origin=pooler_origin,
    )


def method_pooler(backbone: BackboneConfig, run: dict, training: TrainingConfig, objectives: dict
                  ) -> tuple[BackboneConfig, str]:
    """The backbone as the run pools it, and why. A run pools with its backbone's pooler (one pooler for training
    and evaluation: a sentence-transformers backbone's own, e.g. MiniLM's mean) unless its method needs another:
    DiffCSE's BatchNorm training head (projection_head batchnorm, its released --pooler_type cls --batchnorm) is the
    cls pooler's, so such a run pools with cls whatever its backbone's pooler; a template term (PromptBERT, SNCSE)
    represents a sentence by its template's [MASK] state, for which the pooler is not used."""
    name = f"backbones.{run['backbone']}.pooler"
    if training.projection_head == "batchnorm" and backbone.pooler != "cls":
        why = (f"cls, not {name} {backbone.pooler}: method {run['method']}'s training head (projection_head batchnorm, "
               "DiffCSE's BatchNorm MLP) is the cls pooler's")
        return dataclasses.replace(backbone, pooler="cls"), why
    if "prompt" in objectives:
        return backbone, (f"the [MASK] state of method {run['method']}'s template (objectives.prompt), in training and "
                          f"evaluation; {name} ({backbone.pooler}) is not used for it")
    return backbone, f"{name} ({backbone.pooler})"


def run_label(params: dict, run: dict) -> str:
    """How results label a run entry: its own `label`, else its method's."""
    return run.get("label") or method_label(params, run["method"])


def run_info(params: dict, suite: str, run_name: str, seed: int) -> dict:
    """How a result names its run (``run_info`` of sts.json, transfer.json, probing.json), read from
    params.yaml without resolving the run (fast: a suite's view of a shared run is relabelled with it)."""
    run = find_run(params, suite, run_name)
    named_entry(params, "methods", run["method"], "method", f"suites.{suite}, run '{run_name}'.method")
    backbone = named_entry(params, "backbones", run["backbone"], "backbone", f"suites.{suite}, run '{run_name}'.backbone")
    return {"suite": suite, "name": run_name, "seed": int(seed), "method": run["method"],
            "method_label": run_label(params, run), "backbone": run["backbone"],
            "backbone_label": backbone.get("label") or run["backbone"]}


MODEL_TEACHER = "model:"  # a model teacher's entry in RunConfig.teacher_keys: "model:" + the model -> its identity


def teacher_term_of_method(params: dict, method: str, backbone: str) -> str:
    """The key of method ``method``'s term that reads teachers (on ``backbone``), for a run of your own's --teacher; a
    one-line error naming the methods that have one where it has none."""
    terms = [k for k in method_settings(params, method, backbone)[1] if TERM_SETTINGS.get("reads_teachers")(k)]
    if terms:
        return terms[0]
    readers = [m for m in (params.get("methods") or {})
               if any(TERM_SETTINGS.get("reads_teachers")(k) for k in method_settings(params, m, backbone)[1])]
    raise ConfigError(f"--teacher: method {method} learns from no teacher (none of its objective terms reads "
                      f"teachers); the methods that do: {', '.join(readers) or 'none'}")


def _model_teachers_named(params: dict, objectives: dict) -> dict:
    """The run's teacher term with each model teacher as loaded: a backbone name of params.yaml (``minilm``) is its
    model (packaged:minilm), a run folder of `csebench train` its model/ folder (teacherspec.teacher_model_folder)."""
    from csebench.study.teacherspec import teacher_model_folder, teacher_term

    found = teacher_term(objectives)
    if not found or found[1].get("teachers") is None:
        return objectives
    def named(entry):
        if isinstance(entry, dict) and isinstance(entry.get("model"), str):
            return {**entry, "model": teacher_model_folder(named_backbone_model(params, entry["model"]) or entry["model"])}
        return entry
    teachers = found[1]["teachers"]
    found[1]["teachers"] = [named(e) for e in teachers] if isinstance(teachers, list) else named(teachers)
    return objectives


def _teacher_keys(params: dict, suite: str, run_name: str, seed: int, run: dict, objectives: dict,
                  students: tuple[str, ...]) -> dict:
    """A student's teachers (runs of its suite: DistillCSE's, DCLR's, RankCSE's) by key: the student is the
    same run wherever its teachers are, whatever a suite calls them. An evaluation-only run learns from
    nothing. A teacher that is the student at its own seed, or one that learns from its student, would make
    a job wait for itself (Snakemake's CyclicGraphException): refused here, naming the method."""
    from csebench.study.teacherspec import parse_teachers, teacher_term

    found = teacher_term(objectives) if run["train"] else None
    if not found:
        return {}
    where = f"objectives.{found[0]}.teachers"
    chain = (*students, run_name)
    keys = {}
    for teacher in parse_teachers(found[1].get("teachers"), f"run {suite}/{run_name}: objectives.{found[0]}"):
        if "model" in teacher:  # a model, not a run of the suite: named by the run it is, its folder or its id
            from csebench.study.teacherspec import teacher_model_identity

            keys[MODEL_TEACHER + teacher["model"]] = teacher_model_identity(teacher["model"])
            continue
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

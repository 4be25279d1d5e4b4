"""params.yaml as one typed object, loaded and checked once (``Params.load``), its parts named:

    params.paths          where prepared data, results and the shared inputs live (Paths)
    params.data_source(n) a data source's corpus and evaluation data (DataConfig); .probing_source(n)
    params.backbones      backbone name -> BackboneConfig
    params.methods        method name -> its label
    params.suites         suite name -> Suite (its description, data source, runs, jobs, runs resolved, folders)
    params.runs           every run by identity (csebench.study.jobs.Runs: keys and folders)
    params.suite(n)       one Suite: .jobs(), .evaluated_jobs(), .run(r), .resolve(r, s), .run_dir(r, s), ...

Code outside csebench.study holds a Params and asks for the part it needs: work on one suite takes that
Suite, not the whole params; it never digs keys out of the file's mapping nor calls the study's functions of
the whole params (tests/test_params_object.py checks both). The study's own functions (csebench.study.resolve,
.jobs) read that mapping, as params.yaml writes it: a Params is one, read-only (``params["suites"]``). A changed copy (the rehearsal's
params, a one-line run's suite, another results folder) is a new Params built from ``raw_copy()``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Iterator

from csebench.core.schema import _suggest
from csebench.core.errors import ConfigError
from csebench.core.paths import check_name
from csebench.study.jobs import (Runs, all_runs_with_teachers, correlation_groups, eval_name, evaluated_jobs, run_folder,
                                 runs_of, suite_evaluation, suite_jobs, suite_mteb_tasks, suite_params, teacher_jobs,
                                 teacher_representation, trains)
from csebench.study.params import (BackboneConfig, DataConfig, ProbingSourceConfig, data_root, digest, load_params,
                                   named_backbone_model, results_root, run_dir, shared_dir, shared_senteval)
from csebench.study.resolve import (RunConfig, backbone_config, data_config, find_run, method_label, probing_source,
                                    resolve_run, run_info, run_label, suite_runs, suite_seeds)


@dataclass(frozen=True)
class Paths:
    data: str
    results: str
    shared: str


@dataclass(frozen=True)
class Suite:
    """One suite of params.yaml, answering for itself: its jobs, its runs resolved, their folders. Code outside
    csebench.study that works on one suite takes a Suite (``params.suite(name)``), not the whole params."""
    name: str
    spec: Mapping  # the suite's entry of params.yaml
    params: "Params" = field(default=None, compare=False, repr=False)  # the params it belongs to

    @property
    def description(self) -> str:
        return self.spec.get("description") or ""

    @property
    def data(self) -> str | None:
        """The name of its data source."""
        return self.spec.get("data")

    def jobs(self) -> list[tuple[str, int]]:
        """Every (run name, seed) it lists."""
        return suite_jobs(self.params, self.name)

    def evaluated_jobs(self) -> list[tuple[str, int]]:
        """Its jobs but those of runs marked `evaluate: false`."""
        return evaluated_jobs(self.params, self.name)

    def jobs_with_teachers(self) -> list[tuple[str, int]]:
        """Its jobs and the teacher jobs they need."""
        return all_runs_with_teachers(self.params, self.name)

    def runs(self) -> list[dict]:
        """Its run entries (name, backbone, method, train, evaluate, ...)."""
        return suite_runs(self.params, self.name)

    def run(self, name: str) -> dict:
        """One run's entry (a clear error for a run it does not list)."""
        return find_run(self.params, self.name, name)

    def label(self, run: str) -> str:
        """How results label a run: its own `label`, else its method's."""
        return run_label(self.params, self.run(run))

    def seeds(self, run: str | None = None) -> list[int]:
        """Its seeds, or a run's own (a run may list its own seeds)."""
        return suite_seeds(self.params, self.name, run)

    def run_info(self, run: str, seed: int) -> dict:
        """How a result names the run (sts.json's run_info), read without resolving it."""
        return run_info(self.params, self.name, run, int(seed))

    def trains(self, run: str) -> bool:
        return trains(self.params, self.name, run)

    def resolve(self, run: str, seed: int) -> RunConfig:
        return resolve_run(self.params, self.name, run, int(seed))

    def run_dir(self, run: str, seed: int, results: str | os.PathLike | None = None) -> str:
        """The suite's folder of a run (a view of the run's own folder, results/runs/{key}/seed{seed}), under
        ``results`` when given, else under the params' results folder."""
        return run_dir(self.params, self.name, run, int(seed), None if results is None else str(results))

    def run_folder(self, run: str, seed: int) -> str:
        """The run's own folder, results/runs/{key}/seed{seed}."""
        return run_folder(self.params, self.name, run, int(seed))

    def teacher_jobs(self, run: str, seed: int) -> list[tuple[str, int]]:
        return teacher_jobs(self.params, self.name, run, int(seed))

    def teacher_representation(self, run: str, seed: int) -> str:
        """What the run reads of its teachers' caches: eval or training (DCLR's teacher_representation)."""
        return teacher_representation(self.params, self.name, run, int(seed))

    def correlation_groups(self, run: str, seed: int) -> dict[str, list[tuple[str, int]]]:
        return correlation_groups(self.params, self.name, run, int(seed))

    @property
    def evaluation(self) -> dict:
        """Its evaluation settings (csebench.study.jobs.suite_evaluation)."""
        return suite_evaluation(self.params, self.name)

    @property
    def eval_name(self) -> str:
        """The folder its evaluation settings give inside a run's folder (eval-fp32, ...)."""
        return eval_name(self.evaluation)

    @property
    def mteb_tasks(self) -> list[str] | None:
        """The MTEB tasks it opts into, None without an `mteb:` section."""
        return suite_mteb_tasks(self.params, self.name)

    def backbone(self, run: str) -> BackboneConfig:
        """The backbone a run of it names."""
        return backbone_config(self.params, self.run(run)["backbone"])

    def params_keys(self) -> list[str]:
        """The params.yaml keys its runs read (what a DVC stage of it declares)."""
        return suite_params(self.params, self.name)


class Params(Mapping):
    def __init__(self, raw: Mapping, file: str | os.PathLike | None = None):
        self._raw = dict(raw)
        self.file = None if file is None else os.path.abspath(file)  # the params.yaml it was read from, if any

    @classmethod
    def load(cls, path: str | os.PathLike = "params.yaml", overrides: list[str | os.PathLike] | None = None) -> "Params":
        return cls(load_params(path, overrides), path)

    @classmethod
    def of(cls, params: "Params | Mapping | None") -> "Params":
        """A Params as it is, or one made from a mapping of the file's layout (a test's own params)."""
        return params if isinstance(params, Params) else cls(params or {})

    # the file's mapping, for csebench.study's own functions
    def __getitem__(self, key: str):
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def raw_copy(self) -> dict:
        """A deep copy of the file's mapping, to change and make a new Params from."""
        return copy.deepcopy(self._raw)

    # the named parts
    @property
    def paths(self) -> Paths:
        return Paths(data=str(data_root(self._raw)), results=str(results_root(self._raw)), shared=shared_dir(self._raw))

    def with_shared_beside_file(self) -> "Params":
        """The same params with a relative ``paths.shared`` read from the folder of the params.yaml they were loaded
        from, not from the current folder (a command run outside the checkout reads ../shared beside the checkout, as
        the Python API does); itself where paths.shared is absolute or the params came from no file. $CSEBENCH_SHARED,
        when set, still comes first (shared_dir)."""
        shared = str((self._raw.get("paths") or {}).get("shared", "../shared"))
        if self.file is None or os.path.isabs(shared):
            return self
        raw = dict(self._raw)
        raw["paths"] = {**(self._raw.get("paths") or {}), "shared": os.path.normpath(os.path.join(os.path.dirname(self.file), shared))}
        return Params(raw, self.file)

    def with_results(self, results: str | os.PathLike | None) -> "Params":
        """The same params, their results read from (and written to) ``results``; itself when None."""
        if results is None:
            return self
        raw = dict(self._raw)
        raw["paths"] = {**(self._raw.get("paths") or {}), "results": str(results)}
        return Params(raw)

    def with_run_of_your_own(self, backbone: str, method: str, corpus: str, settings: dict, pooler: str | None,
                             seed: int, teachers: list[str] | None = None) -> tuple["Params", str, str]:
        """(these params with a suite ``cli`` listing the run, "cli", the run's name): the run a suite of
        params.yaml would list with that backbone (a name of params.yaml, a model folder or a hub id), method,
        corpus and settings (training / objectives), so that its key is the one the pipeline gives that run.
        ``teachers`` (--teacher): models the method's teacher term learns from, each ``{model: M}``."""
        raw = self.raw_copy()
        backbones, data = raw.setdefault("backbones", {}), raw.setdefault("data", {})
        name, named = backbone, backbone in backbones
        if not named:  # a folder or a hub id: a backbone of its own, pooled as --pooler says (cls: SimCSE's)
            name = "model-" + digest([backbone, pooler or "cls"], 8)
            backbones[name] = {"model": backbone, "pooler": pooler or "cls"}
        elif pooler and pooler != (backbones[name] or {}).get("pooler", "cls"):
            # params.yaml's backbone with another pooler: the same run as a suite's on a backbone entry of that model
            # and pooler (names and labels are not in a run's key)
            spec = {**(backbones[name] or {}), "pooler": pooler}
            name = f"{backbone}-{pooler}"
            if name in backbones and backbones[name] != spec:
                name = f"{backbone}-{pooler}-{digest(spec, 6)}"
            backbones[name] = spec
        if method not in (raw.get("methods") or {}):
            raise ConfigError(f"--method {method}: not a method of params.yaml{_suggest(method, list(raw.get('methods') or {}))}")
        if teachers:
            from csebench.study.resolve import teacher_term_of_method

            term = teacher_term_of_method(raw, method, name)
            own = settings.setdefault("objectives", {}).setdefault(term, {})
            if own.get("teachers") is not None:
                raise ConfigError(f"--teacher and --set objectives.{term}.teachers both name teachers: give them one way")
            own["teachers"] = [{"model": t} for t in teachers]
        source = "corpus-" + digest(corpus, 8)
        data[source] = {"corpus": {"path": corpus}, "senteval": {"path": "{shared}/senteval"}}
        run = f"{name if named else 'model'}-{method}"
        check_name("run", run)
        raw.setdefault("suites", {})["cli"] = {"data": source, "seeds": [seed],
                                               "runs": [{"name": run, "backbone": name, "method": method, **settings}]}
        return Params(raw), "cli", run

    def suite_of_your_own(self, base: "Params", name: str = "mine") -> tuple[str, dict]:
        """(the suite's name, a params override file's mapping) of a suite that lists the run of your own these params
        hold as suite ``cli`` (with_run_of_your_own of ``base``): its data source (the corpus by its absolute path: a
        run's key reads the file's content, so any spelling of it is the same run), the backbone entry made for a folder,
        hub id or pooler if any, and the suite, named ``name`` (``name-2``, ... where base has one so named). Merged over
        params.yaml (``params_overrides``), its run has the one-line run's key: a build of it trains nothing."""
        cli = copy.deepcopy(self._raw["suites"]["cli"])
        data = copy.deepcopy(self._raw["data"][cli["data"]])
        if data["corpus"].get("path"):
            data["corpus"]["path"] = os.path.abspath(data["corpus"]["path"])
        taken = set(base._raw.get("suites") or {}) | set(base._raw.get("data") or {})
        chosen, n = name, 1
        while chosen in taken:
            n += 1
            chosen = f"{name}-{n}"
        made = {r["backbone"] for r in cli["runs"]} - set(base._raw.get("backbones") or {})
        out = {"backbones": {b: self._raw["backbones"][b] for b in sorted(made)}} if made else {}
        out.update(data={chosen: data}, suites={chosen: {**cli, "data": chosen}})
        return chosen, out

    @property
    def suites(self) -> dict[str, Suite]:
        return {name: Suite(name, spec or {}, self) for name, spec in (self._raw.get("suites") or {}).items()}

    def suite(self, name: str) -> Suite:
        specs = self._raw.get("suites") or {}
        if name not in specs:
            raise ConfigError(f"unknown suite '{name}'{_suggest(str(name), list(specs))}")
        return Suite(name, specs[name] or {}, self)

    @property
    def methods(self) -> dict[str, str]:
        """Method name -> its label (a composed method's: its parts' labels joined by " + ")."""
        return {name: method_label(self._raw, name) for name in (self._raw.get("methods") or {})}

    @property
    def backbones(self) -> dict[str, BackboneConfig]:
        return {name: backbone_config(self._raw, name) for name in (self._raw.get("backbones") or {})}

    def check_model_name(self, model: str, what: str = "--model") -> None:
        """A misspelt backbone name given for a model (``minlm``) refused with the closest name (csebench.study.fetch)."""
        from csebench.study.fetch import check_model_name

        check_model_name(self._raw, model, what)

    def data_source(self, name: str) -> DataConfig:
        return data_config(self._raw, name)

    def backbone_model(self, name: str) -> str | None:
        """The model of the backbone called ``name`` (``minilm`` -> ``packaged:minilm``); None where it names none."""
        return named_backbone_model(self._raw, name)

    def shared_senteval(self, missing: str, other: str, beside_file: bool = False) -> str:
        """The shared SentEval folder ($CSEBENCH_SHARED/senteval, else paths.shared/senteval); where it is not
        there, a DataError that begins with ``missing`` and ends with ``other``, the caller's own way to name one.
        beside_file: a relative paths.shared is read from the folder of the params.yaml these were loaded from
        (the Python API, called from anywhere), not from the current folder (the commands, run in the checkout)."""
        base = os.path.dirname(self.file) if beside_file and self.file else None
        return shared_senteval(self._raw, missing, other, base, self.file)

    def probing_source(self, name: str) -> ProbingSourceConfig:
        """Where a data source's probing-task files come from (its `probing:` entry)."""
        return probing_source(self._raw, name)

    @property
    def runs(self) -> Runs:
        return runs_of(self._raw)

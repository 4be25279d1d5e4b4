"""params.yaml as one typed object, loaded and checked once (``Params.load``), its parts named:

    params.paths          where prepared data, results and the shared inputs live (Paths)
    params.data_source(n) a data source's corpus and evaluation data (DataConfig)
    params.backbones      backbone name -> BackboneConfig
    params.methods        method name -> its label
    params.suites         suite name -> Suite (its description, data source, seeds, runs' entries)
    params.runs           every run by identity (csebench.study.jobs.Runs: keys and folders)

Code outside csebench.study holds a Params and asks for the part it needs; it never digs keys out of the
file's mapping. The study's own functions (csebench.study.resolve, .jobs) read that mapping, as
params.yaml writes it: a Params is one, read-only (``params["suites"]``). A changed copy (the rehearsal's
params, a one-line run's suite, another results folder) is a new Params built from ``raw_copy()``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Iterator

from csebench.core.schema import _suggest
from csebench.core.errors import ConfigError
from csebench.core.paths import check_name
from csebench.study.jobs import Runs, runs_of
from csebench.study.params import (BackboneConfig, DataConfig, data_root, digest, load_params, results_root,
                                   shared_dir)
from csebench.study.resolve import backbone_config, data_config, method_label


@dataclass(frozen=True)
class Paths:
    data: str
    results: str
    shared: str


@dataclass(frozen=True)
class Suite:
    name: str
    spec: Mapping  # the suite's entry of params.yaml

    @property
    def description(self) -> str:
        return self.spec.get("description") or ""

    @property
    def data(self) -> str | None:
        """The name of its data source."""
        return self.spec.get("data")


class Params(Mapping):
    def __init__(self, raw: Mapping):
        self._raw = dict(raw)

    @classmethod
    def load(cls, path: str | os.PathLike = "params.yaml", overrides: list[str | os.PathLike] | None = None) -> "Params":
        return cls(load_params(path, overrides))

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

    def with_results(self, results: str | os.PathLike | None) -> "Params":
        """The same params, their results read from (and written to) ``results``; itself when None."""
        if results is None:
            return self
        raw = dict(self._raw)
        raw["paths"] = {**(self._raw.get("paths") or {}), "results": str(results)}
        return Params(raw)

    def with_run_of_your_own(self, backbone: str, method: str, corpus: str, settings: dict, pooler: str | None,
                             seed: int) -> tuple["Params", str, str]:
        """(these params with a suite ``cli`` listing the run, "cli", the run's name): the run a suite of
        params.yaml would list with that backbone (a name of params.yaml, a model folder or a hub id), method,
        corpus and settings (training / objectives), so that its key is the one the pipeline gives that run."""
        raw = self.raw_copy()
        backbones, data = raw.setdefault("backbones", {}), raw.setdefault("data", {})
        name = backbone
        if name not in backbones:  # a folder or a hub id: a backbone of its own, pooled as --pooler says (cls: SimCSE's)
            name = "model-" + digest([backbone, pooler or "cls"], 8)
            backbones[name] = {"model": backbone, "pooler": pooler or "cls"}
        elif pooler:
            raise ConfigError(f"--pooler is for a backbone given as a folder or hub id; {name} of params.yaml pools with "
                              f"{backbones[name].get('pooler')} (set it in params.yaml or a --config file)")
        if method not in (raw.get("methods") or {}):
            raise ConfigError(f"unknown method '{method}' (params.yaml methods: {', '.join(raw.get('methods') or {})})")
        source = "corpus-" + digest(corpus, 8)
        data[source] = {"corpus": {"path": corpus}, "senteval": {"path": "{shared}/senteval"}}
        run = f"{backbone if backbone == name else 'model'}-{method}"
        check_name("run", run)
        raw.setdefault("suites", {})["cli"] = {"data": source, "seeds": [seed],
                                               "runs": [{"name": run, "backbone": name, "method": method, **settings}]}
        return Params(raw), "cli", run

    @property
    def suites(self) -> dict[str, Suite]:
        return {name: Suite(name, spec or {}) for name, spec in (self._raw.get("suites") or {}).items()}

    def suite(self, name: str) -> Suite:
        suites = self.suites
        if name not in suites:
            raise ConfigError(f"unknown suite '{name}'{_suggest(str(name), list(suites))}")
        return suites[name]

    @property
    def methods(self) -> dict[str, str]:
        """Method name -> its label (a composed method's: its parts' labels joined by " + ")."""
        return {name: method_label(self._raw, name) for name in (self._raw.get("methods") or {})}

    @property
    def backbones(self) -> dict[str, BackboneConfig]:
        return {name: backbone_config(self._raw, name) for name in (self._raw.get("backbones") or {})}

    def data_source(self, name: str) -> DataConfig:
        return data_config(self._raw, name)

    @property
    def runs(self) -> Runs:
        return runs_of(self._raw)

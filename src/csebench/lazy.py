"""One small registry for every extension point: a name -> an object of some module, imported the
first time it is asked for, so that a broken or slow module never stands in the way of the others.

    TERMS = LazyRegistry("objective", {"gaussian_negatives": "csebench.objectives.gaussian:GaussianNegatives"})
    RENDERERS = LazyRegistry("renderer", {"sweep": "...figures:SWEEP"}, package="csebench.results.renderers", attr="RENDERER")
    ANALYSES = LazyRegistry("analysis", package="csebench.analysis.analyses", attr="ANALYSIS")

A name is either listed (``entries``: name -> "module:attribute") or a module of ``package`` whose
``attr`` is the object (adding one is adding that file). Listing the names imports none of the
modules (only the package: they are read from its folder); a module that listed entries point into (one file
holding several, e.g. renderers/figures.py) is not a name itself, nor is a module named ``_*``.
A leaf module (issue 34).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Iterator

from .errors import ConfigError


class LazyRegistry:
    def __init__(self, what: str, entries: dict[str, str] | None = None, *, package: str | None = None,
                 attr: str | None = None):
        if (package is None) != (attr is None):
            raise ValueError("give package and attr together")
        self.what = what
        self.entries = dict(entries or {})
        self.package, self.attr = package, attr
        self._loaded: dict[str, Any] = {}

    def _modules(self) -> list[str]:
        if self.package is None:
            return []
        path = importlib.import_module(self.package).__path__  # the package only, not its modules
        held = {target.split(":")[0] for target in self.entries.values()}
        return sorted(m.name for m in pkgutil.iter_modules(path)
                      if not m.name.startswith("_") and f"{self.package}.{m.name}" not in held)

    def names(self) -> list[str]:
        """Every name, listed entries first, then the package's modules (sorted); nothing is imported."""
        return list(dict.fromkeys([*self.entries, *self._modules()]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def unknown(self, name: str) -> str:
        """The end of an error line for a name that is not here: the closest name, else all of them."""
        from .schema import _suggest

        return f"unknown {self.what} '{name}'{_suggest(str(name), self.names())}"

    def target(self, name: str) -> str:
        """'module:attribute' of a name; a ConfigError for an unknown one."""
        if name in self.entries:
            return self.entries[name]
        if name in self.names():
            return f"{self.package}.{name}:{self.attr}"
        raise ConfigError(self.unknown(name))

    def get(self, name: str) -> Any:
        """The object of a name, its module imported on first use."""
        if name not in self._loaded:
            module, attr = self.target(name).split(":")
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def items(self) -> Iterator[tuple[str, Any]]:
        """(name, object) of every name: imports them all (building a CLI or a check, not a lookup)."""
        for name in self.names():
            yield name, self.get(name)

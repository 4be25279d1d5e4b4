"""One small registry for every extension point: a name -> an object of some module, imported the
first time it is asked for, so that a broken or slow module never stands in the way of the others.

    TERMS = LazyRegistry("objective", package="csebench.objectives", declared="key")
    RENDERERS = LazyRegistry("renderer", {"sweep": "...figures:SWEEP"}, package="csebench.results.renderers", attr="RENDERER")
    ANALYSES = LazyRegistry("analysis", package="csebench.analysis.analyses", attr="ANALYSIS")

A name is either listed (``entries``: name -> "module:attribute"), a module of ``package`` whose
``attr`` is the object, or (``declared``) a class of a ``package`` module that declares its own name
as a class attribute, e.g. ``key = "ranking_distillation"``; adding one is adding that file. ``requires``
names other string attributes such a class must declare beside its name (the objective terms: its paper,
``citation = "<paper>"``): a class without one is refused when the names are read, with a one-line error. Listing the
names imports none of the modules (only the package: they are read from its folder, declared names
parsed from the source with ``ast``); a module that listed entries point into (one file holding several,
e.g. renderers/figures.py) is not a name itself, nor is a module named ``_*``.

A leaf module: it imports only csebench.errors, so any package can hold a registry without an import cycle.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any, Iterator

from .errors import ConfigError


class LazyRegistry:
    def __init__(self, what: str, entries: dict[str, str] | None = None, *, package: str | None = None,
                 attr: str | None = None, declared: str | None = None, requires: tuple[str, ...] = ()):
        if (package is None) != (attr is None and declared is None) or (attr and declared):
            raise ValueError("give package with one of attr (a module per name) or declared (a class attribute)")
        if requires and not declared:
            raise ValueError("requires: attributes a declaring class must set, only with declared")
        self.what = what
        self.entries = dict(entries or {})
        self.package, self.attr, self.declared, self.requires = package, attr, declared, tuple(requires)
        self._loaded: dict[str, Any] = {}
        self._found: dict[str, str] | None = None
        self._values: dict[str, dict[str, str]] = {}  # name -> {required attribute: its declared string}

    def _package_modules(self) -> list[pkgutil.ModuleInfo]:
        """The package's modules but ``_*``, sorted by name; only the package is imported."""
        path = importlib.import_module(self.package).__path__
        return sorted((m for m in pkgutil.iter_modules(path) if not m.name.startswith("_")), key=lambda m: m.name)

    def _declarations(self) -> dict[str, str]:
        """name -> "module:Class" of every class of the package's modules whose body sets
        ``<declared> = "<name>"`` to a non-empty string, in module then source order; parsed, not imported.
        Such a class must also set each ``requires`` attribute to a non-empty string (kept: ``declared_value``)."""
        if self._found is None:
            found: dict[str, str] = {}
            values: dict[str, dict[str, str]] = {}
            for mod in (m for m in self._package_modules() if not m.ispkg):
                source = (Path(mod.module_finder.path) / f"{mod.name}.py").read_text(encoding="utf-8")
                for cls in (n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)):
                    for name in filter(None, (_declared_string(node, self.declared) for node in cls.body)):
                        where = f"{self.package}.{mod.name}:{cls.name}"
                        if name in found:
                            raise ConfigError(f"{self.what} '{name}' is declared twice: {found[name]} and {where}")
                        found[name] = where
                        values[name] = {}
                        for attr in self.requires:
                            value = next(filter(None, (_declared_string(node, attr) for node in cls.body)), None)
                            if not value:
                                raise ConfigError(f"{self.what} '{name}' ({where}) declares no {attr}: set "
                                                  f'{attr} = "..." in its class beside {self.declared} = "{name}"')
                            values[name][attr] = value
            self._found, self._values = found, values
        return self._found

    def declared_value(self, name: str, attr: str) -> str:
        """The string a declared name's class sets for a ``requires`` attribute (read from the source)."""
        if attr not in self.requires:
            raise ValueError(f"{attr} is not one of the attributes this registry requires: {self.requires}")
        if name not in self._declarations():
            raise ConfigError(self.unknown(name))
        return self._values[name][attr]

    def _modules(self) -> list[str]:
        if self.package is None or self.declared:
            return []
        held = {target.split(":")[0] for target in self.entries.values()}
        return [m.name for m in self._package_modules() if f"{self.package}.{m.name}" not in held]

    def names(self) -> list[str]:
        """Every name, listed entries first, then the package's modules (sorted); nothing is imported."""
        declared = list(self._declarations()) if self.declared else []
        return list(dict.fromkeys([*self.entries, *declared, *self._modules()]))

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
        if self.declared and name in self._declarations():
            return self._declarations()[name]
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


def _declared_string(node: ast.stmt, attr: str) -> str | None:
    """The string a class-body statement ``attr = "..."`` (or ``attr: T = "..."``) sets, else None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
    elif isinstance(node, ast.AnnAssign):
        target = node.target
    else:
        return None
    value = node.value
    if isinstance(target, ast.Name) and target.id == attr and isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return None

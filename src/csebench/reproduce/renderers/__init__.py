"""Renderers: one small function per kind of table or figure, registered by name.

A registry item names its renderer; a renderer has ``inputs(ctx)`` (the result files it reads, for
Snakemake) and ``render(ctx)`` (writes the item's files, returns their paths). The generic ones
(``grid`` tables, ``sweep`` and ``curves`` figures, ...) serve most items from layout data alone;
paper-specific ones live in the paper's module. Adding a table: a registry entry, and a renderer
only when no existing one draws its layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...errors import ConfigError


@dataclass(frozen=True)
class Renderer:
    name: str
    inputs: Callable
    render: Callable


RENDERERS: dict[str, Renderer] = {}


def renderer(name: str, inputs: Callable):
    def deco(fn: Callable) -> Callable:
        RENDERERS[name] = Renderer(name, inputs, fn)
        return fn
    return deco


def get(name: str | None) -> Renderer:
    _load()
    if name not in RENDERERS:
        raise ConfigError(f"unknown renderer '{name}' (known: {', '.join(sorted(RENDERERS))})")
    return RENDERERS[name]


def _load() -> None:
    from . import distillcse, figures, grid, iscse, sscl  # noqa: F401  (registration)

"""Objective terms are found, not registered: each ObjectiveTerm class declares its
params.yaml name (``key = "..."``) and csebench.objectives.TERMS reads the package's source for it, so a
method is its term file, its params.yaml entry, its registry item and its test."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from csebench.study.params import load_params
from csebench.core.errors import ConfigError
from csebench.core.lazy import LazyRegistry
from csebench.objectives import TERMS, term_class

ROOT = Path(__file__).resolve().parents[1]


def _term_classes_of_the_package() -> dict[str, type]:
    """key -> class of every ObjectiveTerm subclass with a key that a module of csebench/objectives/ defines,
    found by importing each module file (the registry reads their source instead)."""
    import importlib

    from csebench.objectives.base import ObjectiveTerm

    found = {}
    for f in sorted((ROOT / "src" / "csebench" / "objectives").glob("*.py")):
        if f.name.startswith("_"):
            continue
        module = importlib.import_module(f"csebench.objectives.{f.stem}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, ObjectiveTerm) and obj.__module__ == module.__name__ and obj.key:
                assert obj.key not in found, f"{obj.key} twice: {found[obj.key]} and {obj}"
                found[obj.key] = obj
    return found


def test_every_term_file_is_registered_and_every_registered_term_has_a_file_or_an_entry_point():
    files = _term_classes_of_the_package()
    assert files, "no term found in csebench/objectives/"
    assert {k: term_class(k) for k in files} == files  # every term file's class, under the key it declares
    plugins = TERMS.plugins()  # the terms of installed packages (entry points), if any is installed
    for name in TERMS:
        cls = term_class(name)
        assert cls.key == name
        if name in TERMS.builtin_names():
            assert name in files and cls is files[name], f"{name}: registered as built-in, but no term file defines it"
        else:
            assert name in plugins, f"{name}: neither a term file nor an entry point"
    used = {k for m in load_params(ROOT / "params.yaml")["methods"].values() for k in (m.get("objectives") or {})}
    assert used <= set(files)  # params.yaml's methods use the built-in terms only


def test_listing_the_terms_imports_none_of_them(monkeypatch):
    import csebench.core.lazy as lazy

    builtin = TERMS.builtin_names()
    imported = []
    real = lazy.importlib.import_module
    monkeypatch.setattr(lazy.importlib, "import_module", lambda name, *a: imported.append(name) or real(name, *a))
    # as TERMS is declared: the entry points of installed packages are read from their metadata, not imported
    fresh = LazyRegistry("objective", package="csebench.objectives", declared="key", group="csebench.objectives")
    assert fresh.names()[: len(builtin)] == builtin and "prompt" in fresh
    assert imported == ["csebench.objectives"]  # the package only
    assert fresh.get("prompt").__name__ == "PromptTemplates" and imported[-1] == "csebench.objectives.prompt"


def test_a_term_file_dropped_into_the_package_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / "zoo_terms_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "newterm.py").write_text(textwrap.dedent('''
        class Base:
            key: str = ""  # an empty key is no term


        class NewTerm(Base):
            key = "new_term"
    '''))
    (pkg / "_private.py").write_text('class Hidden:\n    key = "hidden"\n')
    (pkg / "broken.py").write_text('import not_a_module_anywhere\n\n\nclass Broken:\n    key = "broken_term"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = LazyRegistry("objective", package="zoo_terms_pkg", declared="key")
    assert reg.names() == ["broken_term", "new_term"]  # listed without importing: the broken module does not stop it
    assert reg.get("new_term").__name__ == "NewTerm"
    with pytest.raises(ModuleNotFoundError):
        reg.get("broken_term")
    with pytest.raises(ConfigError, match="unknown objective 'new_trm'.*did you mean 'new_term'"):
        reg.target("new_trm")
    (pkg / "again.py").write_text('class Again:\n    key = "new_term"\n')
    with pytest.raises(ConfigError, match="objective 'new_term' is declared twice: zoo_terms_pkg.again:Again and zoo_terms_pkg.newterm:NewTerm"):
        LazyRegistry("objective", package="zoo_terms_pkg", declared="key").names()
    with pytest.raises(ValueError):
        LazyRegistry("objective", package="zoo_terms_pkg", attr="X", declared="key")


def test_the_combinations_study_keeps_the_papers_order_of_terms():
    from csebench.results.combinations import PAPER_TERMS, term_order

    order = term_order()
    assert order[:4] == list(PAPER_TERMS) and sorted(order) == sorted(TERMS) and order[4:] == sorted(order[4:])

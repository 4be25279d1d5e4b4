"""Objective terms are found, not registered: each ObjectiveTerm class declares its
params.yaml name (``key = "..."``) and csebench.objectives.TERMS reads the package's source for it, so a
method is its term file, its params.yaml entry, its registry item and its test."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from csebench.config import load_params
from csebench.errors import ConfigError
from csebench.lazy import LazyRegistry
from csebench.objectives import TERMS, term_class

ROOT = Path(__file__).resolve().parents[1]


def test_every_term_is_found_under_the_key_its_class_declares():
    assert set(TERMS) == {"gaussian_negatives", "instance_smoothing", "layer_negatives", "distillation",
                          "momentum_negatives", "mixed_negatives", "debiased_negatives", "prompt",
                          "soft_negatives", "ranking_distillation", "replaced_token_detection"}
    for name, cls in TERMS.items():
        assert cls.key == name and term_class(name) is cls
    used = {k for m in load_params(ROOT / "params.yaml")["methods"].values() for k in (m.get("objectives") or {})}
    assert used <= set(TERMS)


def test_listing_the_terms_imports_none_of_them(monkeypatch):
    import csebench.lazy as lazy

    imported = []
    real = lazy.importlib.import_module
    monkeypatch.setattr(lazy.importlib, "import_module", lambda name, *a: imported.append(name) or real(name, *a))
    fresh = LazyRegistry("objective", package="csebench.objectives", declared="key")
    assert len(fresh.names()) == 11 and "prompt" in fresh and imported == ["csebench.objectives"]  # the package only
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
    from csebench.combinations import PAPER_TERMS, term_order

    order = term_order()
    assert order[:4] == list(PAPER_TERMS) and sorted(order) == sorted(TERMS) and order[4:] == sorted(order[4:])

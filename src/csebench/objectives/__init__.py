"""Objective terms, composed from config into one training objective.

params.yaml ``methods.<name>.objectives`` maps a term key to its settings, e.g.

    objectives:
      gaussian_negatives: {}            # GS-InfoNCE with paper defaults
      instance_smoothing: {alpha: 0.1}  # IS-CSE

Every key listed is switched on; an empty mapping means "paper defaults".

The package imports without torch (the term keys, their settings' check): planning a build, listing
the terms and most commands never load torch. ``csebench.objectives.compose.Objective`` (the terms
composed into one module) and the terms import it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from csebench.core.errors import ConfigError
from csebench.core.lazy import LazyRegistry, dist_name
from csebench.core.schema import from_dict

if TYPE_CHECKING:
    from csebench.objectives.base import ObjectiveTerm

# term key (its one spelling: params.yaml's, the logs') -> its ObjectiveTerm class: every class of this
# package that declares ``key = "<term>"`` (read from the source, imported on use, so one broken term cannot
# break the rest), then the terms other installed packages add through the entry-point group
# csebench.objectives (name -> "module:Class"; its class declares the same key). Adding a method: its
# ObjectiveTerm file, nothing to register; in your own package, its entry point (docs/methods.md). Each such
# class also declares its paper, ``citation = "<paper>"`` (a key of resources/citations.yaml's papers, which
# hold the BibTeX; another package's term may give its own ``bibtex``): a term without one is refused with a
# one-line error, so every model card cites it.
GROUP = "csebench.objectives"
TERMS = LazyRegistry("objective", package="csebench.objectives", declared="key", requires=("citation",), group=GROUP)

# the paper of the loss every method starts from: contrastive.py's InfoNCE with dropout positives and
# in-batch negatives (unsup-SimCSE); every trained run's card cites it beside its terms' papers
INFONCE_CITATION = "simcse"


def term_citation(key: str) -> str:
    """The paper a term declares (``citation``, read from its source: torch is not imported)."""
    return TERMS.declared_value(key, "citation")


def term_class(key: str) -> type[ObjectiveTerm]:
    cls = TERMS.get(key)  # its ``key``, written once (in its class), names it in teacher banks' messages and files
    if key not in TERMS.builtin_names():  # another package's: an ObjectiveTerm, or the loop cannot call it
        from csebench.objectives.base import ObjectiveTerm

        if not (isinstance(cls, type) and issubclass(cls, ObjectiveTerm)):
            ep = TERMS.plugins()[key]
            raise ConfigError(f"objective '{key}' of the installed package '{dist_name(ep)}' "
                              f"(entry point {GROUP}: {ep.value}) is not a subclass of csebench.objectives.base.ObjectiveTerm")
    return cls


def term_packages(keys) -> dict[str, str]:
    """Term key -> "<package> <version>" of each of ``keys`` that an installed package gives through the entry
    points (the built-in terms are csebench's own: none); a run's provenance records them."""
    out = {}
    for key in keys:
        if key not in TERMS.builtin_names() and key in TERMS.plugins():
            ep = TERMS.plugins()[key]
            out[key] = f"{dist_name(ep)} {getattr(ep.dist, 'version', None) or 'unknown version'}"
    return out


def validate_objectives(objectives: dict | None, where: str, training: Any = None) -> dict[str, dict]:
    """Check every term's settings (unknown keys, ranges); return them with defaults filled in."""
    out = {}
    for key, settings in (objectives or {}).items():
        if key not in TERMS:
            raise ConfigError(f"{where}: objectives: {TERMS.unknown(key)}")
        cls = term_class(key)
        obj = from_dict(cls.Settings, settings or {}, f"{where}: objectives.{key}")
        check = getattr(obj, "check_with_training", None)
        if check and training is not None:
            check(f"{where}: objectives.{key}", training)
        out[key] = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else dict(obj)
    return out


def added_tokens(objectives: dict[str, dict], tokenizer, max_seq_length: int) -> dict[str, tuple[int, str]]:
    """Term key -> (tokens it adds at most to a row of ``max_seq_length`` tokens, what they are), for the terms that
    lengthen what the encoder sees (PromptBERT's templates, ESimCSE's repetition)."""
    out = {}
    for key, settings in objectives.items():
        cls = term_class(key)
        n = cls.added_tokens(from_dict(cls.Settings, settings, f"objectives.{key}"), tokenizer, max_seq_length)
        if n:
            out[key] = (n, cls.adds)
    return out


def at_rehearsal_scale(objectives: dict[str, dict], batch_size: int, steps: int) -> dict[str, dict]:
    """Term key -> the settings it needs to act within ``steps`` steps of ``batch_size`` sentences (the rehearsal's
    scale; ObjectiveTerm.at_rehearsal_scale), for the terms that need any."""
    out = {}
    for key, settings in objectives.items():
        cls = term_class(key)
        if change := cls.at_rehearsal_scale(from_dict(cls.Settings, settings, f"objectives.{key}"), batch_size, steps):
            out[key] = change
    return out


def generators(objectives: dict | None) -> list[str]:
    """The second pretrained models the terms load besides the backbone (DiffCSE's masked-LM ``generator``), as
    the terms' settings name them: fetched like a backbone (csebench.study.fetch), costed by csebench.results.plan and built at
    their published architecture by a rehearsal (csebench.model.architectures.GENERATORS). Torch-free."""
    out = []
    for settings in (objectives or {}).values():
        gen = settings.get("generator") if isinstance(settings, dict) else None
        if isinstance(gen, str) and gen and gen not in out:
            out.append(gen)
    return out

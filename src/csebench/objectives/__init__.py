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

import copy
import dataclasses
import functools
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


def reads_teachers(key: str) -> bool:
    """Whether term ``key`` reads frozen teachers' cached embeddings: its settings have a ``teachers`` setting
    (DistillCSE's distillation, DCLR's debiased_negatives, RankCSE's ranking_distillation; a new term needs no
    list entry)."""
    settings = getattr(term_class(key), "Settings", None)
    return dataclasses.is_dataclass(settings) and any(f.name == "teachers" for f in dataclasses.fields(settings))


def validate_objectives(objectives: dict | None, where: str, training: Any = None) -> dict[str, dict]:
    """Check every term's settings (unknown keys, ranges); return them with defaults filled in. A built-in
    term's settings that passed before are read back from the checked-settings cache (below): planning a
    build checks every run of params.yaml, and a term's module imports torch (2 CPU-s a process)."""
    out = {}
    for key, settings in (objectives or {}).items():
        if key not in TERMS:
            raise ConfigError(f"{where}: objectives: {TERMS.unknown(key)}")
        cache = _checked_file(key, settings, training)
        if cache is not None and (known := _read_checked(cache)) is not None:
            out[key] = known
            continue
        cls = term_class(key)
        obj = from_dict(cls.Settings, settings or {}, f"{where}: objectives.{key}")
        check = getattr(obj, "check_with_training", None)
        if check and training is not None:
            check(f"{where}: objectives.{key}", training)
        out[key] = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else dict(obj)
        if cache is not None:
            _write_checked(cache, out[key])
    return out


# The checked-settings cache: a built-in term's settings as validate_objectives returned them, one small file per
# (term, its settings as given, the run's training settings, csebench's source), in the user cache
# (core.paths.user_cache_dir()/checked-settings). The source is all of csebench's modules by content, so an edit
# to any check is a miss; settings that fail are never stored (their error is raised each time). Stored as a
# Python literal (tuples stay tuples); a file that does not read back is a miss. CSEBENCH_NO_SETTINGS_CACHE=1: off.
_checked_memo: dict[str, dict] = {}


@functools.cache
def _source_digest() -> str:
    """All of csebench's modules by content (5 ms, once a process)."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # the csebench package
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _checked_file(key: str, settings, training):
    """The cache file of these settings, or None: a term of another package, the cache off, or settings that do
    not print as a literal (nothing to key them by)."""
    import hashlib
    import os

    if os.environ.get("CSEBENCH_NO_SETTINGS_CACHE", "").strip() not in ("", "0") or key not in TERMS.builtin_names():
        return None
    from csebench.core.paths import user_cache_dir

    given = repr(sorted((settings or {}).items()))
    trained = repr(sorted(vars(training).items())) if training is not None and hasattr(training, "__dict__") else repr(training)
    if " object at 0x" in given + trained:  # an object whose repr is its address says nothing about its value
        return None
    digest = hashlib.sha256("\0".join((key, given, trained, _source_digest())).encode()).hexdigest()
    return user_cache_dir() / "checked-settings" / f"{key}-{digest[:32]}.txt"


def _read_checked(path) -> dict | None:
    import ast

    if str(path) in _checked_memo:
        return copy.deepcopy(_checked_memo[str(path)])
    try:
        value = ast.literal_eval(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    _checked_memo[str(path)] = value
    return copy.deepcopy(value)


def _write_checked(path, value: dict) -> None:
    import ast

    text = repr(value)
    try:
        if ast.literal_eval(text) != value:  # e.g. nan, inf: not a literal; checked again next time
            return
    except (ValueError, SyntaxError):
        return
    try:
        from csebench.core.io import write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
        _checked_memo[str(path)] = copy.deepcopy(value)
    except OSError:  # a read-only or full cache: the settings were checked, only not remembered
        pass


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


def own_positives(objectives: dict[str, dict]) -> dict[str, str]:
    """Term key -> how it makes the positives other than by dropout (ObjectiveTerm.own_positives), for the terms that
    do; empty: the run's positives come from dropout alone."""
    out = {}
    for key, settings in objectives.items():
        cls = term_class(key)
        if how := cls.own_positives(from_dict(cls.Settings, settings, f"objectives.{key}")):
            out[key] = how
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

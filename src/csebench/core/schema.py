"""Checks of settings, each failure reported as one line naming the key: YAML read with duplicate keys
refused, JSON Schema checks of params files and of the Snakemake config, and dataclass settings built
from mappings (unknown keys, types). A leaf module: config and the objectives both build on it.

The schemas live in resources/ (params.schema.yaml, snakemake-config.schema.yaml); Snakemake's
``validate()`` reads the same files (workflow/rules/common.smk).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.resources
import math
import os
import re
from pathlib import Path
from typing import Any

import yaml

from csebench.core.errors import ConfigError

TYPE_NAMES = {"object": "a mapping", "array": "a list", "integer": "a whole number", "number": "a number",
              "string": "text", "boolean": "true or false"}


def schema_path(name: str) -> str:
    """The file of schema ``name`` ("params" or "snakemake-config")."""
    return str(importlib.resources.files("csebench").joinpath(f"resources/{name}.schema.yaml"))


@functools.cache
def _validator(name: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(read_yaml(schema_path(name)))


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def brief(value, limit: int = 100) -> str:
    """``repr(value)``, cut to ``limit`` characters: a value quoted in an error line (a mapping that a settings file's
    aliases made of millions of values printed a 5.8 MB line)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text):,} characters)"


def _message(error) -> str:
    kind, value, schema = error.validator, error.instance, error.schema
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        names = " or ".join(TYPE_NAMES.get(t, t) for t in wanted if t != "null")
        return f"expected {names}{' (or null)' if 'null' in wanted else ''}, got {brief(value)}"
    if kind == "additionalProperties":
        known = list(schema.get("properties") or {})
        key = next(str(k) for k in value if k not in known)
        return f"unknown key '{key}'{_suggest(key, known)}"
    if kind == "required":
        return f"missing '{next(k for k in error.validator_value if k not in value)}'"
    if kind == "enum":
        return f"{brief(value)} is not one of {', '.join(map(str, error.validator_value))}"
    if kind == "minimum":
        return f"must be at least {error.validator_value}, got {brief(value)}"
    if kind == "pattern" and "description" in schema:
        return f"expected {schema['description']}, got {brief(value)}"
    if kind == "minItems":
        return f"must list at least {error.validator_value}, got {brief(value)}"
    text = re.sub(r"\s+", " ", error.message)
    return text if len(text) <= 300 else f"{text[:299]}… ({len(text):,} characters)"


def validate(data: Any, name: str, where: str) -> None:
    """Raise a ConfigError naming ``where`` (a file), the key path and what is wrong with it."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(data))
    if error is not None:
        key = _where(error.absolute_path)
        raise ConfigError(f"{where}: {key + ': ' if key else ''}{_message(error)}")


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (valid: {', '.join(sorted(valid))})"


def check_keys(where: str, given: dict, valid: list[str] | tuple[str, ...]) -> None:
    if not isinstance(given, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(given).__name__}")
    for key in given:
        if key not in valid:
            raise ConfigError(f"{where}: unknown key '{key}'{_suggest(str(key), list(valid))}")


def from_dict(cls, data: dict | None, where: str):
    """Build dataclass ``cls`` from ``data``, rejecting unknown keys and coercing simple types."""
    data = data or {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    check_keys(where, data, list(fields))
    kwargs = {}
    for name, value in data.items():
        ftype = fields[name].type
        kwargs[name] = _coerce(value, ftype, f"{where}.{name}")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if validate:
        validate(where)
    return obj


def _coerce(value: Any, ftype: Any, where: str) -> Any:
    t = str(ftype)
    if value is None:
        return None
    kind = {"int": "a whole number", "float": "a finite number", "bool": "true or false",
            "bool | str": "true, false or a name"}.get(t if t == "bool | str" else t.split(" ")[0].rstrip("|"))
    try:
        # YAML's true/false are Python bools, which are ints: never a number here. YAML's .nan and
        # .inf are floats that pass every "> 0" check and then break training (or train silently).
        if t.startswith(("int", "float")) and isinstance(value, bool):
            raise ValueError
        if t.startswith("int"):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if t.startswith("float"):
            number = float(value)  # YAML reads 3e-5 as a string; accept it
            if not math.isfinite(number):
                raise ValueError
            return number
        if t == "bool | str":  # a switch with named settings beside true/false (validate checks the names)
            if not isinstance(value, (bool, str)):
                raise ValueError
            return value
        if t.startswith("bool"):
            if not isinstance(value, bool):
                raise ValueError
            return value
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: expected {kind}, got {brief(value)}") from None
    return value


# libyaml's parser where PyYAML was built with it: params.yaml parses in a tenth of the time, and every
# command (and every Snakemake start) reads it
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UniqueKeyLoader(_SAFE_LOADER):
    """yaml.safe_load's loader, except that a key given twice in one mapping is an error: PyYAML
    keeps the last silently (a second `temperature:` would win without a word)."""

    def construct_mapping(self, node, deep=False):
        first: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may override, by design
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in first:
                    raise DuplicateKeyError(line, f"duplicate key {key!r} (first at line {first[key]}); keep one")
                first[key] = line
            except TypeError:  # an unhashable key: the base loader says so
                break
        return super().construct_mapping(node, deep=deep)

    def get_single_node(self):
        """The document's node, its aliases counted before anything is built from it (_check_aliases)."""
        node = super().get_single_node()
        if node is not None:
            _check_aliases(node)
        return node


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line, self.message = line, message


class AliasError(yaml.YAMLError):
    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where, self.message = where, message


# what the aliases (*name) of one settings text may repeat in all: params.yaml uses none; a YAML "billion laughs" of
# 382 bytes repeats 387 million values, which every check that walks the settings then walks
MAX_ALIAS_VALUES = 100_000


def load_yaml_text(text: str, name: str):
    """Parse YAML text (params, config, resource files) with UniqueKeyLoader; errors name ``name``. The document's
    aliases are counted before anything is built from it (UniqueKeyLoader.get_single_node): repeating more than
    MAX_ALIAS_VALUES values (an alias bomb), or an alias inside what it names, is one line."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKeyError as exc:
        raise ConfigError(f"{name}:{exc.line}: {exc.message}") from None
    except AliasError as exc:
        raise ConfigError(f"{name}{exc.where}: {exc.message}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: not valid YAML{_yaml_problem(exc, text)}") from None


def _check_aliases(root) -> None:
    """How many values the document holds once every alias is expanded, counted without expanding (each node once,
    its size remembered; iterative: a deep document does not exhaust Python's stack)."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = [n for item in node.value for n in (item if isinstance(item, tuple) else (item,))] \
            if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) else []
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            continue
        if key in size:
            continue
        if key in open_:
            raise AliasError(f":{node.start_mark.line + 1}" if node.start_mark is not None else "",
                             "an alias refers to a value that holds it (a value inside itself): write the values out")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    repeated = size[id(root)] - len(size)
    if repeated > MAX_ALIAS_VALUES:
        raise AliasError("", f"its aliases (*name) repeat {repeated:,} values, more than the {MAX_ALIAS_VALUES:,} a "
                             "settings file may (a YAML alias bomb?): write the values out, or use fewer aliases")


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """The parser's complaint in one line, with its position: in a one-line text (a --set value) the column, in
    a file the line and column (PyYAML's own message spans 2-4 lines of "in <unicode string>, line ...")."""
    one_line = "\n" not in text.rstrip("\n")

    def at(mark) -> str:
        if mark is None:
            return ""
        if one_line:
            return "the end" if mark.index >= len(text.rstrip("\n")) else f"column {mark.column + 1}"
        return f"line {mark.line + 1}, column {mark.column + 1}"

    if not isinstance(exc, yaml.MarkedYAMLError) or not (exc.problem or exc.context):
        return ": " + " ".join(str(exc).replace('in "<unicode string>", ', "").split())
    problem, context = exc.problem or exc.context, exc.context if exc.problem else None
    where = at(exc.problem_mark or exc.context_mark)
    out = f" at {where}: {problem}" if where else f": {problem}"
    if context:
        start = at(exc.context_mark) if exc.context_mark is not None and exc.context_mark is not exc.problem_mark else ""
        out += f" ({context}{' that starts at ' + start if start and start != where else ''})"
    return out


MAX_YAML_BYTES = 16 << 20  # a settings or resource file: params.yaml is 64 KB


def read_yaml(path: str | os.PathLike):
    """A YAML file as load_yaml_text reads it; not a regular file (a folder, /dev/zero, a pipe: read forever or
    once), larger than MAX_YAML_BYTES or not UTF-8 is an error naming the file."""
    from csebench.core.io import not_a_regular_file

    p = Path(path)
    what = not_a_regular_file(p)
    if what is not None:
        raise ConfigError(f"{p}: {what}: a settings file is a YAML text file")
    if p.stat().st_size > MAX_YAML_BYTES:
        raise ConfigError(f"{p}: {p.stat().st_size:,} bytes, larger than a settings file may be "
                          f"({MAX_YAML_BYTES >> 20} MiB): is it the file you meant?")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte offset {exc.start})") from None
    return load_yaml_text(text, str(p))

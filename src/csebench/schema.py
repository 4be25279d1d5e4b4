"""JSON Schema checks of params files and of the Snakemake config, reported as one line naming the key.

The schemas live in resources/ (params.schema.yaml, snakemake-config.schema.yaml); Snakemake's
``validate()`` reads the same files (workflow/rules/common.smk).
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from typing import Any

from .errors import ConfigError

TYPE_NAMES = {"object": "a mapping", "array": "a list", "integer": "a whole number", "number": "a number",
              "string": "text", "boolean": "true or false"}


def schema_path(name: str) -> str:
    """The file of schema ``name`` ("params" or "snakemake-config")."""
    return str(importlib.resources.files("csebench").joinpath(f"resources/{name}.schema.yaml"))


@functools.cache
def _validator(name: str):
    from jsonschema import Draft202012Validator

    from .config import read_yaml

    return Draft202012Validator(read_yaml(schema_path(name)))


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(error) -> str:
    from .config import _suggest

    kind, value, schema = error.validator, error.instance, error.schema
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        names = " or ".join(TYPE_NAMES.get(t, t) for t in wanted if t != "null")
        return f"expected {names}{' (or null)' if 'null' in wanted else ''}, got {value!r}"
    if kind == "additionalProperties":
        known = list(schema.get("properties") or {})
        key = next(str(k) for k in value if k not in known)
        return f"unknown key '{key}'{_suggest(key, known)}"
    if kind == "required":
        return f"missing '{next(k for k in error.validator_value if k not in value)}'"
    if kind == "enum":
        return f"{value!r} is not one of {', '.join(map(str, error.validator_value))}"
    if kind == "minimum":
        return f"must be at least {error.validator_value}, got {value!r}"
    if kind == "minItems":
        return f"must list at least {error.validator_value}, got {value!r}"
    return re.sub(r"\s+", " ", error.message)


def validate(data: Any, name: str, where: str) -> None:
    """Raise a ConfigError naming ``where`` (a file), the key path and what is wrong with it."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(data))
    if error is not None:
        key = _where(error.absolute_path)
        raise ConfigError(f"{where}: {key + ': ' if key else ''}{_message(error)}")

"""argparse types shared by the command-line modules (csebench.cli and the subpackages' parsers):
a leaf module, so no parser module imports another."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """argparse type of counts: 0 or less would be ignored (a falsy value means "default") or fail late."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of at least 1, got {text!r}")
    return value

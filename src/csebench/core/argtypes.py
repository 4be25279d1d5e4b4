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


SEED_LIMIT = 2**32  # numpy's RandomState and scikit-learn's random_state take 0 .. 2**32 - 1


def seed_int(text: str) -> int:
    """argparse type of a seed handed to numpy and scikit-learn: a whole number 0 .. 2**32 - 1 (-1 or 2**33 were a
    ValueError traceback from inside the classifier's or the subset's generator)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"give a whole number from 0 to {SEED_LIMIT - 1} (2**32 - 1), got {text!r}")
    return value

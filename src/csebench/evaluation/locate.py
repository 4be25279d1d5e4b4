"""Where the evaluation data are: a folder that `csebench prepare-senteval` / `prepare-probing` prepared (a pointer,
ROOT, to the extracted data) or the data folder itself, as SentEval lays it out."""

from __future__ import annotations

import os
from pathlib import Path

from csebench.core.errors import DataError
from csebench.core.provenance import SOURCE_FILE, read_source


def _located(pointer_or_dir: str | os.PathLike, inner: str, what: str) -> Path:
    """The folder a prepared pointer (ROOT) names, else the folder's ``inner`` one where it has it, else the folder."""
    p = Path(pointer_or_dir)
    if (p / "ROOT").is_file():
        return Path((p / "ROOT").read_text(encoding="utf-8").strip())
    if (p / inner).is_dir():
        return p / inner
    if not p.is_dir():
        raise DataError(f"{what} folder not found: {p}")
    return p


def senteval_root(pointer_or_dir: str | os.PathLike) -> Path:
    """Accept a prepared pointer folder (with ROOT) or a SentEval folder directly."""
    p = Path(pointer_or_dir)
    if (p / "ROOT").is_file():
        read_source(p / SOURCE_FILE)  # extracted from the hub's senteval.tar: at which commit
    return _located(p, "downstream", "SentEval data")


def probing_root(pointer_or_dir: str | os.PathLike) -> Path:
    """Accept a prepared pointer folder (with ROOT), a folder of probing files or a SentEval checkout."""
    return _located(pointer_or_dir, "data/probing", "probing data")

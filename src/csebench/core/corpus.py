"""Reading a training corpus: a UTF-8 text file, one sentence per line ("\n"; a "\r" before it is
dropped); blank lines are dropped, a line of control characters only (a binary file, a wrong encoding) is
an error, as are an empty file and a missing one. Preparing a corpus (sampling, downloads):
csebench.training.data.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


from csebench.core.errors import DataError
from csebench.core.io import not_a_regular_file, read_utf8
from csebench.core.provenance import (record_corpus)


# a line of control characters (C0/C1, not whitespace), invisible format characters (zero-width, bidirectional
# controls, soft hyphen, BOM: Unicode's Cf) and whitespace only; ^ and $ see "\n" only
_C0_C1 = "\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"
_INVISIBLE = "\xad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
_CONTROL = _C0_C1 + _INVISIBLE
_CONTROL_LINE = re.compile(rf"^(?:[^\S\n]|[{_CONTROL}])*[{_CONTROL}](?:[^\S\n]|[{_CONTROL}])*$", re.M)


def check_corpus_file(path: str | os.PathLike) -> None:
    """The corpus is a regular file: else one line saying what it is (missing, a folder, a device, a pipe)."""
    kind = not_a_regular_file(path)
    if kind == "not found":
        raise DataError(f"corpus file not found: {path}")
    if kind:
        raise DataError(f"corpus {path} is {kind}: a corpus is a text file, one sentence per line; give that file "
                        "(a stream or a device: save it to a file first)")


def read_corpus(path: str | os.PathLike) -> list[str]:
    """Sentences of a corpus file: one per "\n"-separated line (str.splitlines would also split at
    U+2028, U+0085, form feeds...), stripped, blank lines dropped. Errors name the file."""
    p = Path(path)
    check_corpus_file(p)
    text = read_utf8(p, "corpus ")
    bad = _CONTROL_LINE.search(text)
    if bad:
        chars = sorted({c for c in bad.group() if not c.isspace()})
        kind = "invisible characters" if re.search(f"[{_INVISIBLE}]", "".join(chars)) else "control characters"
        raise DataError(f"corpus {p} line {text.count(chr(10), 0, bad.start()) + 1} holds only {kind} "
                        f"({', '.join(f'U+{ord(c):04X}' for c in chars)}): not text; remove the line, or check the file "
                        "is the UTF-8 corpus you meant")
    sentences = [s.strip() for s in text.split("\n")]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise DataError(f"corpus {p} has no sentences (empty or only blank lines)")
    record_corpus(p)
    return sentences

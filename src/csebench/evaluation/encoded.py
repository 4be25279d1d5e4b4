"""What an encode function hands the evaluators, checked once before anything is scored.

The evaluators take any function from a list of sentences to their embeddings: a csebench encoder's, a
sentence-transformers model's, a user's own. Whatever it returns must be a 2-D array of finite numbers with
one row per sentence given, in that order; anything else (None, a 1-D array, more or fewer rows, strings,
NaN or inf) would be scored wrongly or fail deep inside the scoring, so it stops here in one line saying
what came back and what was expected. A constant embedding (every row the same vector) is well formed but
ranks nothing: it is scored, and said in a warning.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from csebench.core.errors import DataError

log = logging.getLogger("csebench.evaluation")
NUMERIC_KINDS = "fiu"  # numpy's kinds of real numbers: float, signed and unsigned integers


def _described(out) -> str:
    """What came back, in words: its type, and its shape and dtype where it has them."""
    if out is None:
        return "None"
    kind = type(out)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape is None:
        return f"a {name}"
    return f"a {name} of shape {tuple(shape)} and dtype {str(dtype).removeprefix('torch.')}"


def _sentence(text: str, most: int = 60) -> str:
    return repr(text if len(text) <= most else text[: most - 3] + "...")


def encoded(encode, sentences: list[str]) -> torch.Tensor:
    """``encode(sentences)``, checked (checked_embeddings). An encode function csebench builds names what it
    encodes with (its ``source``, e.g. "the model DIR") and what to do about vectors that are not finite (its
    ``remedy``); a user's function is "the encode function"."""
    return checked_embeddings(encode(sentences), sentences, getattr(encode, "source", None) or "the encode function",
                              getattr(encode, "remedy", None))


def checked_embeddings(out, sentences: list[str], what: str = "the encode function",
                       remedy: str | None = None) -> torch.Tensor:
    """``out``, what ``what`` returned for ``sentences``, as a 2-D CPU tensor with one finite row per sentence:
    a floating tensor as it came, anything else (a numpy array, nested lists) as float32. Anything else is a
    one-line DataError (ending in ``remedy`` where rows are not finite, when given); a constant embedding is
    logged as a warning (and scored)."""
    n = len(sentences)
    expected = f"expected a 2-D array of finite numbers, one row per sentence given ({n} rows, in their order)"
    came = _described(out)
    if any(isinstance(t, torch.Tensor) and t.is_meta for t in (out if isinstance(out, (list, tuple)) else [out])):
        raise DataError(f"{what} returned {came} on the meta device for {n} sentences: a meta tensor has a shape and no "
                        "values (a model built under torch.device('meta'), its weights never loaded): load the weights "
                        f"(from_pretrained, or to_empty() and load_state_dict()) before evaluating; {expected}")
    if isinstance(out, (list, tuple)) and out and all(isinstance(row, torch.Tensor) for row in out):
        rows = [row.detach().cpu() for row in out]  # one tensor per sentence (sentence-transformers' lists)
        if len({tuple(row.shape) for row in rows}) > 1:
            raise DataError(f"{what} returned {came} of tensors of different shapes for {n} sentences: {expected}")
        came = f"{came} of {len(rows)} tensors of shape {tuple(rows[0].shape)}"
        out = torch.stack(rows)
    if isinstance(out, torch.Tensor):
        emb = out.detach().cpu()
        if emb.is_complex() or emb.dtype == torch.bool:
            raise DataError(f"{what} returned {came} for {n} sentences: {expected}")
        if not emb.is_floating_point() or emb.dtype in (torch.float16, torch.bfloat16):
            emb = emb.float()
    else:
        try:
            arr = np.asarray(out)
        except (ValueError, TypeError, RuntimeError):  # rows of different lengths, objects numpy cannot stack
            raise DataError(f"{what} returned {came} whose rows numpy cannot stack into one array (rows of "
                            f"different lengths?) for {n} sentences: {expected}") from None
        if out is None or arr.dtype.kind not in NUMERIC_KINDS:
            shown = came if hasattr(out, "dtype") or out is None else f"{came} (as an array: shape {arr.shape}, dtype {arr.dtype})"
            raise DataError(f"{what} returned {shown} for {n} sentences: {expected}")
        came = came if hasattr(out, "dtype") else f"{came} (as an array: shape {arr.shape}, dtype {arr.dtype})"
        emb = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
    if emb.dim() != 2 or emb.shape[0] != n or emb.shape[1] == 0:
        raise DataError(f"{what} returned {came} for {n} sentences: {expected}")
    finite = torch.isfinite(emb).all(dim=1)
    if not bool(finite.all()):
        bad = int((~finite).nonzero()[0, 0])
        values = emb[bad][~torch.isfinite(emb[bad])]
        kinds = " and ".join(k for k, hit in (("NaN", bool(values.isnan().any())), ("inf", bool(values.isinf().any()))) if hit)
        raise DataError(f"{what} returned {came} for {n} sentences; its row {bad} (sentence {_sentence(sentences[bad])}) "
                        f"holds {kinds} ({int((~finite).sum())} of the {n} rows are not finite): {remedy or expected}")
    if n > 1 and bool((emb == emb[0]).all()):
        log.warning("%s returned the same vector for all %d sentences (a constant embedding): every pair has the "
                    "same similarity, so there is nothing to rank; its scores are undefined (NaN) or chance", what, n)
    return emb

"""The envelope of a result file: every `csebench eval-*` command and every analysis writes
its scores through ``write_result``: the scores first, then what the command says of how they were made
(timing, how the vectors were made, which run they are booked to, or the analysis's model and label),
then the provenance block last (csebench.core.provenance), which records the digest of the scores (``scores``:
their keys and sha256), so that a reader tells a number changed after the file was written. Strict JSON, except
that an undefined score (a Spearman correlation of constant cosines) is written as null."""

from __future__ import annotations

import os


def envelope(fields: dict, precision: str | None, tables=()) -> dict:
    """What a result says of how it was made: ``fields``, then its provenance block (with those of the
    embeddings tables that served it, ``tables``)."""
    return {**fields, "provenance": for_evaluation(precision, tables)}


def for_evaluation(precision: str | None, tables=()) -> dict:
    """The provenance block of an evaluation or analysis result, with the blocks of the embeddings tables
    it was scored from (their device and precision made the vectors) under ``embeddings``."""
    from csebench.model.encoder import autocast_name
    from csebench.core.provenance import collect

    tables = [t for t in tables if t is not None]
    precision = precision or next((t.meta["precision"] for t in tables if t.meta.get("precision")), "auto")
    block = collect(precision=precision, autocast=autocast_name(precision))
    made = [t.meta.get("provenance") for t in tables]
    if made:
        block["embeddings"] = made
    return block


def write_result(path: str | os.PathLike, scores: dict, fields: dict, precision: str | None, tables=()) -> dict:
    """Write ``scores`` in their envelope (eval-mteb writes its folder itself, with the same envelope)."""
    from csebench.core.io import write_json
    from csebench.core.provenance import scores_record

    out = {**scores, **envelope(fields, precision, tables)}
    out["provenance"]["scores"] = scores_record(out, scores)  # a reader finds a number edited after it was written
    write_json(path, out, undefined_ok=True)
    return out


def encoding_info(model: str, pooler: str | None, precision: str | None, embeddings: str | None, encode) -> dict:
    """How an evaluation's vectors were made: the pooler (resolved: the one used), the embeddings table
    and its precision, else the precision the model encoded at."""
    from csebench.model.encoder import eval_pooler_of

    used = getattr(encode, "pooler", None) or eval_pooler_of(model, pooler)
    table = getattr(encode, "table", None)
    prefix = {"prefix": encode.prefix} if getattr(encode, "prefix", "") else {}  # the text before every sentence
    if table is None:
        return {"pooler": used, **prefix, "embeddings": None, "precision": precision or "auto"}
    return {"pooler": used, **prefix, "embeddings": embeddings, "precision": table.meta.get("precision"),
            "autocast": table.meta.get("autocast"), "sentences_in_table": len(table.row), "missing_from_table": encode.missing}

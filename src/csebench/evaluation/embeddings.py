"""Evaluation embeddings of one model: a DAG artefact its evaluators and analyses share.

`csebench embed` encodes every distinct sentence that STS (7 test tasks), the transfer tasks (after
the suite's training-set cap) and the STS-based analyses (STS-B test in full, or at a capped evaluation
the capped pairs STS already holds; ``--stsb-whole``) need,
once, length-sorted, and writes

    RUN_DIR/embeddings.npz   keys  (n, 20) uint8  sha1 of each UTF-8 sentence
                             emb   (n, d) float32
                             meta  JSON: model fingerprint, pooler (resolved: the one it encoded with),
                                   precision, counts

Consumers (`eval-sts`, `eval-transfer`, `analyze align_uniform|cosine_dist|embed_dim` with
``--embeddings``) look sentences up instead of running the model. A sentence the table lacks is
encoded with the model (loaded only then) and logged, so a consumer never silently changes its
inputs. The table records the model (as named), its embedding size and the content hash of its
weights (the folder of a saved run, of ``packaged:minilm``, or of a hub id's snapshot in the local
Hugging Face cache): a table without that hash, or made from other weights than ``--model``, is refused.

Vectors are those the encoder produced for each sentence in its length-sorted batch; fp32 rows
can differ in the last bits from an encoding with other batch neighbours (padding width), far
below anything a Spearman correlation or a classifier sees.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from csebench.core.errors import ConfigError, CsebenchError, DataError
from csebench.core.io import atomic_path, dumps_json, load_npz

log = logging.getLogger("csebench.evaluation.embeddings")
EncodeFn = Callable[[list[str]], torch.Tensor]
_FINGERPRINTS: dict[tuple, str] = {}
SKIP = {"training_config.json", "train.json", "sts.json", "transfer.json", "README.md"}  # README.md: the model card


def model_folder(model: str | os.PathLike) -> Path:
    """The local folder holding a model's weights: a saved model folder, the packaged model's folder,
    or a hub id's snapshot in the local Hugging Face cache (where loading it put it)."""
    from csebench.model.encoder import PACKAGED, packaged_model_dir

    if str(model) in PACKAGED:
        return packaged_model_dir(str(model))
    if Path(model).expanduser().is_dir():
        return Path(model).expanduser()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(model), local_files_only=True))
    except Exception as exc:  # not cached (or not a hub id): nothing on disk to hash
        raise ConfigError(f"cannot fingerprint the weights of {model}: not a model folder and not in the local "
                          f"Hugging Face cache ({exc.__class__.__name__}); load it once (e.g. `csebench embed`) or "
                          "pass its folder") from None


def model_dim(model: str | os.PathLike) -> int | None:
    """The embedding size a model's files declare (projection size, else hidden size); None if unknown."""
    from csebench.model.encoder import read_encoder_meta

    try:
        folder = model_folder(model)
        return int(read_encoder_meta(folder).get("projection_dim") or json.loads((folder / "config.json").read_text())["hidden_size"])
    except (CsebenchError, OSError, ValueError, KeyError, TypeError):
        return None


def model_fingerprint(model: str | os.PathLike) -> str:
    """Content hash of a model's weights folder (every file but run reports; see model_folder),
    memoized by (path, sizes, mtimes)."""
    root = model_folder(model).resolve()
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name not in SKIP and "__pycache__" not in p.parts)
    stat_key = (str(root), tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if stat_key in _FINGERPRINTS:
        return _FINGERPRINTS[stat_key]
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    digest = h.hexdigest()[:24]
    _FINGERPRINTS[stat_key] = digest
    return digest


def sentence_key(s: str) -> bytes:
    return hashlib.sha1(s.encode("utf-8")).digest()


def evaluation_sentences(senteval_root: str | os.PathLike, transfer: bool = True,
                         max_train_sentences: int | None = None, seed: int = 1111,
                         max_sts_pairs: int | None = None, max_test_sentences: int | None = None,
                         extra_sets: dict | None = None, stsb_whole: tuple[str, ...] = ("test",)) -> list[str]:
    """Every distinct sentence of the 7 STS test tasks as `eval-sts` scores them (same pair cap, same
    seed), of the STS-B splits ``stsb_whole`` in full (the analyses of STS-B sentences read the test
    split unless told otherwise; a sentence a table lacks is encoded when asked for, so a split left out
    costs time, never a result), of your own STS sets (``extra_sets``, as evaluation.sts.load_extra_sets
    read them), plus, with ``transfer``, of the transfer tasks as `eval-transfer` would see them (same
    cap, same seed)."""
    from csebench.evaluation.sts import load_stsb, load_test_tasks
    from csebench.evaluation.transfer import TASKS, prepared_tasks, task_sentences

    root = Path(senteval_root)
    sets = [*load_test_tasks(root, max_pairs=max_sts_pairs, seed=seed).values(), *(load_stsb(root, s) for s in stsb_whole),
            *(extra_sets or {}).values()]
    out = {s for ps in sets for s in (*ps.sent1, *ps.sent2)}
    if transfer:
        out |= set(task_sentences(prepared_tasks(root, TASKS, max_train_sentences, seed, max_test_sentences=max_test_sentences)))
    return sorted(out)


def write_embeddings(path: str | os.PathLike, sentences: list[str], emb: torch.Tensor | np.ndarray, meta: dict) -> None:
    """Atomically write the table (rows in ``sentences`` order)."""
    emb = emb.detach().float().cpu().numpy() if isinstance(emb, torch.Tensor) else np.asarray(emb, np.float32)
    if emb.shape[0] != len(sentences):
        raise ValueError(f"{emb.shape[0]} embeddings for {len(sentences)} sentences")
    # raw digests as a (n, 20) uint8 matrix: numpy "S20" strings would drop trailing NUL bytes
    keys = np.frombuffer(b"".join(sentence_key(s) for s in sentences), dtype=np.uint8).reshape(len(sentences), 20)
    meta = {**meta, "n_sentences": len(sentences), "dim": int(emb.shape[1]) if emb.ndim == 2 else 0}
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, keys=keys, emb=np.ascontiguousarray(emb, dtype=np.float32), meta=np.array(dumps_json(meta, indent=None)))


class EmbeddingTable:
    """sentence -> vector, read from a `write_embeddings` file."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(f"missing embeddings file: {self.path} (make it with `csebench embed`)")
        remedy = "delete it and rerun `csebench embed`"
        z = load_npz(self.path, "an embeddings table (`csebench embed`)", remedy)
        try:
            keys, self.emb, self.meta = z["keys"], z["emb"], json.loads(str(z["meta"]))
        except (KeyError, ValueError):
            raise DataError(f"{self.path} is damaged or not an embeddings table (`csebench embed`): {remedy}") from None
        if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 20 or self.emb.shape[0] != keys.shape[0]:
            raise DataError(f"{self.path} is damaged or not an embeddings table (keys are not (n, 20) sha1 digests, "
                            f"one per row): {remedy}")
        self.row = {k.tobytes(): i for i, k in enumerate(keys)}

    def lookup(self, sentences: list[str]) -> tuple[np.ndarray, list[int]]:
        """Row index per sentence (-1 where absent) and the positions of the absent ones."""
        idx = np.fromiter((self.row.get(sentence_key(s), -1) for s in sentences), dtype=np.int64, count=len(sentences))
        return idx, np.flatnonzero(idx < 0).tolist()


def table_encode(table: EmbeddingTable | str | os.PathLike, model_dir: str | os.PathLike | None,
                 fallback: Callable[[], EncodeFn], settings: dict | None = None, pooler: str | None = None,
                 prefix: str | None = None) -> EncodeFn:
    """An encode function served from ``table`` (or the table file at that path); sentences it lacks
    go to the encoder ``fallback()`` builds (called at most once). The table must record the
    fingerprint of its model's weights, equal to that of ``model_dir`` (a model folder, hub id or
    packaged:minilm) when given; it must have been pooled as this evaluation pools (``pooler``, the
    --pooler given, None: the model's own evaluation pooler), and ``settings`` (precision) must match
    what it was made from. The function's ``pooler`` is the pooler its vectors were made with. Its sentences were
    encoded after the prefix the table records (none in tables that record none), which must be this evaluation's
    (``prefix``, the --prefix given, None: the model's own)."""
    table = table if isinstance(table, EmbeddingTable) else EmbeddingTable(table)
    path = table.path
    have, made_from = table.meta.get("model_fingerprint"), table.meta.get("model") or "an unnamed model"
    if not have:
        raise DataError(f"{path} records no fingerprint of the weights it was made from ({made_from}), so nothing "
                        "shows it belongs to this model: rerun `csebench embed`")
    if model_dir is not None:
        want = model_fingerprint(model_dir)
        if have != want:
            raise DataError(f"{path} was made from other weights than {model_dir}: the table's model is {made_from} "
                            f"(dim {table.meta.get('dim', '?')}, fingerprint {have}), {model_dir} has dim "
                            f"{model_dim(model_dir) or '?'}, fingerprint {want}; rerun `csebench embed --model {model_dir}`")
    made_with = table_pooler(table, model_dir)
    if model_dir is not None or pooler is not None:
        from csebench.model.encoder import eval_pooler_of

        want = eval_pooler_of(model_dir if model_dir is not None else "", pooler)  # "": pooler given, nothing read
        if made_with is not None and made_with != want:
            asked = (f"asks for {want} (--pooler {pooler})" if pooler is not None else
                     f"uses {want} (the model's own evaluation pooler: no --pooler given)")
            raise DataError(f"{path} holds vectors pooled with {made_with}, this evaluation {asked}: pass --pooler "
                            f"{made_with}, or make a table with {want} (`csebench embed --pooler {want}`), or drop --embeddings")
        made_with = want
    made_after = table.meta.get("prefix") or ""
    if model_dir is not None or prefix is not None:
        from csebench.model.encoder import own_prefix

        wanted = prefix if prefix is not None else own_prefix(model_dir)[0]
        if wanted != made_after:
            raise DataError(f"{path} holds vectors of sentences after the prefix {made_after!r}, this evaluation puts "
                            f"{wanted!r} before them: pass --prefix {made_after!r}, or make a table with that prefix "
                            "(`csebench embed --prefix ...`), or drop --embeddings")
    for key, value in (settings or {}).items():
        if value is not None and table.meta.get(key) not in (None, value):
            raise DataError(f"{path} has {key}={table.meta.get(key)!r}, this evaluation asks for {value!r}: rerun `csebench embed`")
    encoder: list[EncodeFn] = []

    def encode(sentences: list[str]) -> torch.Tensor:
        idx, missing = table.lookup(sentences)
        out = torch.from_numpy(table.emb[np.maximum(idx, 0)])
        encode.missing += len(missing)  # type: ignore[attr-defined]
        if missing:
            log.warning("%d of %d sentences are not in %s: encoding them with the model", len(missing), len(sentences), path)
            if not encoder:
                encoder.append(fallback())
            out[torch.as_tensor(missing)] = encoder[0]([sentences[i] for i in missing]).float().cpu()
        return out

    encode.table = table  # type: ignore[attr-defined]
    encode.missing = 0  # type: ignore[attr-defined]
    encode.pooler = made_with  # type: ignore[attr-defined]
    encode.prefix = made_after  # type: ignore[attr-defined]
    encode.source = f"the embeddings table {path}"  # type: ignore[attr-defined]  (evaluation.encoded's messages)
    encode.remedy = f"check the weights of {made_from} and rerun `csebench embed`"  # type: ignore[attr-defined]
    return encode


def table_pooler(table: EmbeddingTable, model_dir: str | os.PathLike | None = None) -> str | None:
    """The pooler a table's vectors were made with. Tables of csebench before 0.1.x recorded ``pooler: null``
    when `embed` ran without --pooler: the model's own evaluation pooler, that of ``model_dir`` (whose
    fingerprint, csebench_encoder.json included, the caller has matched); None where unknown."""
    if table.meta.get("pooler"):
        from csebench.model.encoder import eval_pooler_of

        return eval_pooler_of("", table.meta["pooler"])  # "cls" evaluates as cls_before_pooler
    if model_dir is None:
        return None
    from csebench.model.encoder import eval_pooler_of

    return eval_pooler_of(model_dir)


def load_eval_model(model: str, pooler: str | None = None, what: str = "--model", prefix: str | None = None):
    """A saved model (evaluation pooler, no training head, ``prefix``: see load_encoder) on the best device."""
    from csebench.model.encoder import load_encoder

    torch.manual_seed(0)
    enc = load_encoder(model, pooler, what, prefix)
    return enc.to("cuda" if torch.cuda.is_available() else "cpu")


def encode_with(enc, batch_size: int | None = None, precision: str = "auto", progress: bool = False) -> EncodeFn:
    """``enc.encode`` with these settings, as an encode function."""
    return lambda sentences: enc.encode(list(sentences), batch_size=batch_size, show_progress=progress, precision=precision)


def model_encoder(model: str, pooler: str | None = None, batch_size: int | None = None, precision: str = "auto",
                  progress: bool = False, prefix: str | None = None) -> EncodeFn:
    enc = load_eval_model(model, pooler, prefix=prefix)
    encode = encode_with(enc, batch_size, precision, progress)
    encode.pooler = enc.pooler  # type: ignore[attr-defined]
    encode.prefix = enc.prefix  # type: ignore[attr-defined]
    encode.source = f"the model {model}"  # type: ignore[attr-defined]  (evaluation.encoded's messages)
    encode.remedy = "check its weights (damaged, or from a training that diverged)"  # type: ignore[attr-defined]
    return encode


def evaluation_encoder(model: str, pooler: str | None = None, batch_size: int | None = None, precision: str | None = None,
                       embeddings: str | os.PathLike | None = None, progress: bool = False,
                       prefix: str | None = None) -> EncodeFn:
    """What evaluators and analyses encode with: the ``embeddings`` table when given (the model is
    loaded only for sentences it lacks, at the table's precision), else the model itself; ``prefix`` before every
    sentence (None: the model's own, csebench.model.encoder.own_prefix)."""
    from csebench.model.encoder import check_model_source

    from csebench.model.encoder import eval_pooler_of

    check_model_source(model)  # also with a table: a bad --model must not wait for a missing sentence
    if not embeddings:
        encode = model_encoder(model, pooler, batch_size, precision or "auto", progress, prefix)
        encode.pooler = eval_pooler_of(model, pooler)  # type: ignore[attr-defined]
        return encode
    table = EmbeddingTable(embeddings)
    use = precision or table.meta.get("precision") or "auto"
    return table_encode(table, model, lambda: model_encoder(model, pooler, batch_size, use, progress, prefix),
                        settings={"precision": precision}, pooler=pooler, prefix=prefix)

"""On-disk sentence-embedding cache shared by the evaluators of one model.

STS and transfer evaluation of the same model encode many of the same sentences (and a rerun
encodes all of them again). Wrapping the encode function once per model,

    from csebench.embed_cache import caching_encode
    encode = caching_encode(lambda s: enc.encode(s, batch_size=128), model_dir, cache_dir,
                            settings={"pooler": enc.pooler, "batch_size": 128, "device": "cpu"})
    evaluate_sts(encode, root)          # encodes every sentence
    evaluate_transfer(encode, root)     # encodes only sentences STS did not have

makes each distinct sentence cost one forward pass per model, across evaluators and processes.

Key: sha256 of the model folder's files (names + contents, memoized per path/size/mtime) plus a
``settings`` string (pooler, max length, precision, device: anything that changes the vectors),
so a retrained model or another pooler never reads stale vectors. Entries: sha1 of the UTF-8
sentence -> float32 vector, stored as append-only shards ``<cache>/<key>/shard-*.npz``, each
written atomically (concurrent evaluators of one model may both write; both shards are valid).

Vectors are the ones the wrapped encoder returned for the sentence in the batch it was encoded
in; encoders whose output depends on the batch (padding in other precisions) can differ in the
last bits from an uncached run, never in anything a Spearman correlation would see in practice.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .io import atomic_path

EncodeFn = Callable[[list[str]], torch.Tensor]
_FINGERPRINTS: dict[tuple, str] = {}
SKIP = {"training_config.json", "train.json", "sts.json", "transfer.json"}


def model_fingerprint(model_dir: str | os.PathLike) -> str:
    """Content hash of a model folder (every file but run reports), memoized by (path, sizes, mtimes)."""
    root = Path(model_dir).resolve()
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


class EmbeddingCache:
    """sentence -> vector for one (model, settings) key, backed by shards in one folder."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.rows: dict[bytes, np.ndarray] = {}
        self._seen: set[str] = set()

    def refresh(self) -> None:
        if not self.folder.is_dir():
            return
        for shard in sorted(self.folder.glob("shard-*.npz")):
            if shard.name in self._seen:
                continue
            with np.load(shard) as z:
                keys, emb = z["keys"], z["emb"]
            for k, v in zip(keys, emb):
                self.rows[bytes(k)] = v
            self._seen.add(shard.name)

    def add(self, keys: list[bytes], emb: np.ndarray) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        karr = np.array(keys, dtype="S20")
        name = f"shard-{hashlib.sha1(karr.tobytes()).hexdigest()[:16]}.npz"
        with atomic_path(self.folder / name) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, keys=karr, emb=np.ascontiguousarray(emb, dtype=np.float32))
        self._seen.add(name)
        for k, v in zip(keys, emb):
            self.rows[k] = v


def cached_encode(encode: EncodeFn, folder: str | os.PathLike) -> EncodeFn:
    """Wrap ``encode`` (list of sentences -> (n, d) tensor) with the cache in ``folder``."""
    cache = EmbeddingCache(folder)

    def wrapped(sentences: list[str]) -> torch.Tensor:
        cache.refresh()
        keys = [sentence_key(s) for s in sentences]
        missing: dict[bytes, str] = {}
        for k, s in zip(keys, sentences):
            if k not in cache.rows and k not in missing:
                missing[k] = s
        if missing:
            new = encode(list(missing.values()))
            new = new.detach().float().cpu().numpy() if isinstance(new, torch.Tensor) else np.asarray(new, np.float32)
            cache.add(list(missing.keys()), new)
        if not sentences:
            return torch.empty(0, 0)
        return torch.from_numpy(np.stack([cache.rows[k] for k in keys]))

    wrapped.cache = cache  # type: ignore[attr-defined]
    return wrapped


def caching_encode(encode: EncodeFn, model_dir: str | os.PathLike, cache_dir: str | os.PathLike,
                   settings: dict | str = "") -> EncodeFn:
    """``encode`` with an on-disk cache under ``cache_dir`` keyed by the model folder's content hash
    and ``settings`` (anything besides the weights that changes the vectors)."""
    tag = settings if isinstance(settings, str) else json.dumps(settings, sort_keys=True, default=str)
    key = model_fingerprint(model_dir) + "-" + hashlib.sha256(tag.encode()).hexdigest()[:12]
    return cached_encode(encode, Path(cache_dir) / key)

"""The tokenized training corpus in memory: a leaf module, read by data (which builds and caches
it), the encoder (which batches sentences through it) and the loader."""

from __future__ import annotations

import hashlib

import numpy as np


class TokenizedCorpus:
    """A corpus tokenized once (no padding, truncated to max length), stored flat as int32."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray):
        self.ids = ids
        self.offsets = offsets

    @classmethod
    def from_lists(cls, id_lists: list[list[int]]) -> "TokenizedCorpus":
        lengths = np.fromiter((len(x) for x in id_lists), dtype=np.int64, count=len(id_lists))
        offsets = np.zeros(len(id_lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter((t for x in id_lists for t in x), dtype=np.int32, count=int(offsets[-1]))
        return cls(flat, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def get(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def batch(self, indices, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
        """Dynamically padded (input_ids, attention_mask) for the given sentence indices."""
        starts = self.offsets[indices]
        lens = self.offsets[np.asarray(indices) + 1] - starts
        width = int(lens.max())
        cols = np.arange(width)
        mask = cols[None, :] < lens[:, None]
        gather = np.where(mask, starts[:, None] + cols[None, :], 0)
        ids = np.where(mask, self.ids[gather], pad_id)
        return ids.astype(np.int64), mask.astype(np.int64)

def tokenizer_fingerprint(tokenizer) -> str:
    """The tokenizer's class, vocabulary and casing, hashed (cache keys of tokenized corpora and teacher caches).
    Remembered on the tokenizer for its size (30 ms a call; a Trainer asks two or three times)."""
    size = len(tokenizer)
    memo = getattr(tokenizer, "_csebench_fingerprint", None)
    if memo is not None and memo[0] == size:
        return memo[1]
    h = hashlib.sha256()
    h.update(tokenizer.__class__.__name__.encode())
    vocab = tokenizer.get_vocab()
    for tok, idx in sorted(vocab.items(), key=lambda kv: kv[1])[:50000]:
        h.update(f"{idx}:{tok}\n".encode())
    h.update(str(getattr(tokenizer, "do_lower_case", "")).encode())
    fingerprint = h.hexdigest()[:16]
    try:
        tokenizer._csebench_fingerprint = (size, fingerprint)
    except AttributeError:  # a tokenizer that takes no attributes is hashed each time
        pass
    return fingerprint

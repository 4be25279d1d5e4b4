"""Host-side batch preparation for the training loop.

The corpus is tokenized once (data.TokenizedCorpus); a batch is a gather + dynamic padding of
its rows, which takes well under a millisecond, so the CPU default does it inline. With
``training.num_workers > 0`` a torch DataLoader collates the upcoming batches of the epoch in
worker processes, ahead of the GPU, into pinned memory when training on CUDA, so the copy to the
device can be non-blocking. The batch order stays the trainer's (``data_order``), which is a pure
function of (seed, epoch): the loader only precomputes what the loop will ask for next, and a
request it did not anticipate (first step, resume, a new epoch) restarts it from that position.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from csebench.model.tokens import TokenizedCorpus


def host_tensors(tokens: TokenizedCorpus, indices, pad_id: int, pin: bool) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = tokens.batch(indices, pad_id)
    ids, mask = torch.from_numpy(ids), torch.from_numpy(mask)
    if pin:
        ids, mask = ids.pin_memory(), mask.pin_memory()
    return ids, mask


class _Batches(Dataset):
    def __init__(self, tokens: TokenizedCorpus, batches: list[np.ndarray], pad_id: int):
        self.tokens, self.batches, self.pad_id = tokens, batches, pad_id

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int):
        idx = np.asarray(self.batches[i])
        ids, mask = self.tokens.batch(idx, self.pad_id)
        return torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(idx.astype(np.int64))


class BatchLoader:
    """``get(epoch, position, indices)`` -> (input_ids, attention_mask) host tensors.

    ``batches_of(epoch)`` returns that epoch's list of per-process index arrays; with
    ``num_workers == 0`` nothing runs in the background."""

    def __init__(self, tokens: TokenizedCorpus, pad_id: int, batches_of, num_workers: int = 0,
                 pin_memory: bool = False, prefetch_factor: int = 4):
        self.tokens, self.pad_id, self.batches_of = tokens, pad_id, batches_of
        self.num_workers, self.pin, self.prefetch_factor = num_workers, pin_memory, prefetch_factor
        self._it = None
        self._next: tuple[int, int] | None = None  # (epoch, position) the iterator yields next

    def _start(self, epoch: int, position: int) -> None:
        batches = self.batches_of(epoch)[position:]
        loader = DataLoader(_Batches(self.tokens, batches, self.pad_id), batch_size=None, shuffle=False,
                            num_workers=self.num_workers, pin_memory=self.pin,
                            prefetch_factor=self.prefetch_factor, persistent_workers=False,
                            generator=torch.Generator().manual_seed(epoch))  # leaves the global RNG (dropout) alone
        self._it = iter(loader)
        self._next = (epoch, position)

    def get(self, epoch: int, position: int, indices) -> tuple[torch.Tensor, torch.Tensor]:
        if self.num_workers <= 0:
            return host_tensors(self.tokens, indices, self.pad_id, self.pin)
        if self._next != (epoch, position):
            self._start(epoch, position)
        try:
            ids, mask, got = next(self._it)
        except StopIteration:
            self._it, self._next = None, None
            return host_tensors(self.tokens, indices, self.pad_id, self.pin)
        self._next = (epoch, position + 1)
        if not np.array_equal(got.numpy(), np.asarray(indices)):  # not the batch asked for: compute it here
            self._it, self._next = None, None
            return host_tensors(self.tokens, indices, self.pad_id, self.pin)
        return ids, mask

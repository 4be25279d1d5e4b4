"""DDP helpers (torchrun). Single-process runs take the trivial branch of every function."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", 0))


def init_from_env() -> bool:
    """Initialise the process group when launched by torchrun (WORLD_SIZE > 1)."""
    if int(os.environ.get("WORLD_SIZE", 1)) <= 1 or is_distributed():
        return is_distributed()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank())
    dist.init_process_group(backend=backend)
    return True


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def gather_keep_local(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """All-gather rows from every rank; this rank's rows keep their autograd graph (as SimCSE
    does), the others are constants. Returns (gathered, row offset of this rank's rows)."""
    if not is_distributed():
        return x, 0
    parts = [torch.empty_like(x) for _ in range(world_size())]
    dist.all_gather(parts, x.detach().contiguous())
    parts[rank()] = x
    return torch.cat(parts, dim=0), rank() * x.shape[0]

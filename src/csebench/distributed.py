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


def shutdown() -> None:
    """Leave the process group (torchrun runs); a no-op on one process."""
    if is_distributed():
        dist.destroy_process_group()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


class _GatherSumGrad(torch.autograd.Function):
    """all_gather whose backward sums, over ranks, the gradient each rank computed for this
    rank's rows (an all-reduce of the full gradient, then this rank's slice)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.rank, ctx.rows = rank(), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(world_size())]
        dist.all_gather(parts, x.contiguous())
        parts[ctx.rank] = x  # bit-identical local rows
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def gather_with_grad(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """All-gather rows (equal row counts on every rank) for in-batch negatives.

    Forward: this rank's rows are kept as they are (local gradient, as SimCSE), the others arrive
    from their ranks. Backward: the gradient that every rank's loss sends to a row is summed on
    the row's owner. With each rank's loss = mean over its own B anchors against all N candidates,
    DDP's gradient average then equals exactly the single-process gradient of the mean loss over
    all N anchors, with no world_size factor. (SimCSE gathers z1 and z2 with remote rows detached
    and computes the full N x N loss on every rank: its DDP gradient is 1/world_size of the
    single-process one. Detaching remote rows with only z2 gathered would instead drop the
    gradient other ranks' anchors send to this rank's positives, which no constant factor fixes.)
    Returns (gathered, row offset of this rank's rows)."""
    if not is_distributed():
        return x, 0
    return _GatherSumGrad.apply(x), rank() * x.shape[0]


def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
    """Mean over ranks of a tensor (itself on one process). Asynchronous on the host: nothing is
    read back here."""
    if not is_distributed():
        return t
    t = t.clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t / world_size()


def average_gradients(params) -> None:
    """Average .grad over ranks for parameters that DDP does not manage (objective terms)."""
    if not is_distributed():
        return
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world_size()


def gather_keep_local(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """All-gather rows from every rank; this rank's rows keep their autograd graph, the others
    are constants (no gradient reaches them). Used for quantities that need no remote gradient;
    for in-batch negatives use ``gather_with_grad``. Returns (gathered, row offset)."""
    if not is_distributed():
        return x, 0
    parts = [torch.empty_like(x) for _ in range(world_size())]
    dist.all_gather(parts, x.detach().contiguous())
    parts[rank()] = x
    return torch.cat(parts, dim=0), rank() * x.shape[0]

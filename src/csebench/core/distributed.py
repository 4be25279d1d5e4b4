"""DDP helpers (torchrun). Single-process runs take the trivial branch of every function."""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist

from csebench.core.errors import CsebenchError, TrainingError


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


def _errors(error: str | None) -> list[str | None]:
    """Every rank's error in a block (None: it ended well); one collective."""
    if not is_distributed():
        return [error]
    out: list[str | None] = [None] * world_size()
    dist.all_gather_object(out, error)
    return out


@contextlib.contextmanager
def fail_together():
    """A block every rank enters (its work may be rank 0's alone: evaluation, checkpoint, outputs)
    that ends in one collective sharing how it ended: if it raised on any rank, every rank raises,
    the failing one its own error, the others a TrainingError carrying it. A rank failing alone
    would otherwise leave the others waiting in their next collective until the NCCL timeout.
    Also the block's barrier."""
    try:
        yield
    except Exception as exc:
        message = str(exc) if isinstance(exc, CsebenchError) else f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(Exception):  # a broken process group must not mask this error
            _errors(message)
        raise
    failed = [(r, e) for r, e in enumerate(_errors(None)) if e is not None]
    if failed:
        r, error = failed[0]
        raise TrainingError(f"rank {r} failed: {error}")


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
        # rows are gathered in the compute dtype (bf16/fp16 under autocast), but their gradients are
        # summed in fp32: a bf16 all-reduce rounds every partial sum to 8 significant bits
        total = torch.empty(grad.shape, dtype=torch.float32, device=grad.device).copy_(grad)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows].to(grad.dtype)


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

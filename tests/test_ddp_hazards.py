"""DDP failure modes found by reading the GPU path, run on CPU with 3 gloo processes:

* the gradients of the all-gathered rows are summed in fp32, not in the bf16/fp16 they are
  gathered in (a bf16 all-reduce rounds every partial sum: 3 ranks are enough to see it);
* a rank failing alone (rank 0's dev evaluation, its writing of the outputs, any rank in a
  shared block) makes every rank fail at once with that rank's error, instead of leaving the
  others waiting in the next collective until the (NCCL) timeout.
"""

from __future__ import annotations

import datetime
import os
import socket
from pathlib import Path

import pytest
import torch

from runhelpers import PARAMS, write_corpus, write_mini_senteval

WORLD = 3
SMALL = 5 * 2.0**-10  # bf16: 1 + SMALL rounds up to 1 + 2^-7, 1 + 2 SMALL rounds down to it


def _outcome(fn) -> str:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001  (what each rank raised is the result)
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def bf16_gather_grad(rank: int) -> torch.Tensor:
    """Each rank gathers its one bf16 row; rank r's loss sends 1 to column r of every row and SMALL
    elsewhere, so each gradient element is the sum 1 + SMALL + SMALL over the ranks."""
    from csebench.core import distributed

    x = torch.zeros(1, WORLD, dtype=torch.bfloat16, requires_grad=True)
    out, _ = distributed.gather_with_grad(x)
    w = torch.full((WORLD, WORLD), SMALL)
    w[:, rank] = 1.0
    (out.float() * w).sum().backward()
    return x.grad


def trainer_failures(rank: int, tmp: Path) -> dict[str, str]:
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.core.errors import DataError
    from csebench.training.trainer import Trainer

    params = load_params(PARAMS)
    params["suites"]["ci"]["training"] = {"batch_size": 6, "max_steps": 2}
    cfg = resolve_run(params, "ci", "simcse", 1)
    tr = Trainer(cfg, tmp / "corpus.txt", tmp / "se", tmp / f"out{rank}", show_progress=False)
    out = {}
    if rank == 0:
        def bad_dev(encoder, pairs):
            raise DataError("STS-B dev file .../sts-dev.csv:3: score 'high' is not a number")

        tr.dev._spearman = bad_dev  # the evaluator stays: finish() asks it for train.json's dev keys
    out["evaluate"] = _outcome(tr.evaluate_and_keep_best)
    if rank == 0:
        def full_disk(summary, timing):
            raise OSError(28, "No space left on device")

        tr._write_outputs = full_disk
    tr.out_dir.mkdir(parents=True, exist_ok=True)
    out["finish"] = _outcome(lambda: tr.finish(0.0, 0))
    return out


def _worker(rank: int, port: int, tmp: str) -> None:
    import torch.distributed as dist

    from csebench.core import distributed
    from csebench.core.errors import DataError

    torch.set_num_threads(1)
    os.environ.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # a short timeout: without the fix a rank would wait here, then fail with a timeout, not the error
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    try:
        res = {"grad": bf16_gather_grad(rank)}

        def block():
            with distributed.fail_together():
                if rank == 1:
                    raise DataError("disk of rank 1 is full")

        res["block"] = _outcome(block)
        res.update(trainer_failures(rank, Path(tmp)))
        torch.save(res, Path(tmp) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("ddp-hazards")
    write_corpus(tmp / "corpus.txt", n=24)
    write_mini_senteval(tmp / "se", pairs=8)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # forked: the ranks start with torch and csebench imported (spawned, each imported them again)
    torch.multiprocessing.start_processes(_worker, args=(port, str(tmp)), nprocs=WORLD, join=True, start_method="fork")
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def test_gathered_bf16_rows_sum_their_gradients_in_fp32(ranks):
    exact = torch.tensor(1 + 2 * SMALL, dtype=torch.float64).to(torch.bfloat16)  # rounded once
    assert float(exact) == 1 + 2.0**-7
    for r in ranks:
        assert r["grad"].dtype == torch.bfloat16
        assert torch.equal(r["grad"], torch.full((1, WORLD), float(exact), dtype=torch.bfloat16)), r["grad"]


def test_a_failing_rank_fails_every_rank_with_its_error(ranks):
    assert ranks[1]["block"] == "DataError: disk of rank 1 is full"
    for r in (0, 2):
        assert ranks[r]["block"] == "TrainingError: rank 1 failed: disk of rank 1 is full"


def test_rank0_failing_to_evaluate_or_write_stops_every_rank(ranks):
    dev = "STS-B dev file .../sts-dev.csv:3: score 'high' is not a number"
    assert ranks[0]["evaluate"] == f"DataError: {dev}"
    disk = "[Errno 28] No space left on device"
    assert ranks[0]["finish"] == f"OSError: {disk}"
    for r in (1, 2):
        assert ranks[r]["evaluate"] == f"TrainingError: rank 0 failed: {dev}"
        assert ranks[r]["finish"] == f"TrainingError: rank 0 failed: OSError: {disk}"

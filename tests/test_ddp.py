"""DDP on CPU with gloo: 2 processes, each with half of the global batch, give the
loss and the (DDP-averaged) gradients of one process on the whole batch.

Dropout is set to 0 so that both setups see the same views (masks are per-rank random
otherwise). The trainer's own code paths run: Trainer.forward_loss (encode both views, gather
z2 across ranks, objective, logs averaged over ranks) and Trainer.backward.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch

from runhelpers import PARAMS, write_corpus, write_mini_senteval

BATCH = 8

PLAIN = {}
TERMS = {  # IS-CSE (buffer filled by the gathered positives), GS-InfoNCE (per-step generator), SSCL (gathered layer reps)
    "instance_smoothing": {"buffer_size": 16, "neighbors": 4},
    "gaussian_negatives": {},
    "layer_negatives": {"layer": 1},
}
DISTILL = {"distillation": {"teachers": {"run": "simcse", "seeds": [2]}, "shuffle": "none"}}  # DistillCSE, anchors x anchors


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fixed_width(tokens, width: int) -> None:
    """Pad every batch to the same width, so a half batch runs the same shapes per sentence as
    the whole batch and the comparison is not drowned in float32 rounding of other GEMM shapes."""
    import numpy as np

    real = tokens.batch

    def batch(indices, pad_id):
        ids, mask = real(indices, pad_id)
        extra = width - ids.shape[1]
        return (np.pad(ids, ((0, 0), (0, extra)), constant_values=pad_id), np.pad(mask, ((0, 0), (0, extra))))

    tokens.batch = batch


def run_steps(tmp: Path, objectives: dict, steps: int, naive_gather: bool = False) -> dict:
    """Build the ci trainer (tiny BERT, dropout 0) and run forward + backward on the first
    global batches; record loss, logs, gradients and the objective's state after each step."""
    from csebench.core import distributed
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.training.trainer import Trainer, data_order

    params = load_params(PARAMS)
    params["suites"]["ci"]["training"] = {"batch_size": BATCH, "dropout": 0.0, "max_steps": 10, "learning_rate": 1e-4}
    params["methods"]["simcse"]["objectives"] = objectives
    # a less degenerate random model (default init: all sentences nearly the same embedding, loss ~ log B)
    params["backbones"]["tiny"]["random_config"]["initializer_range"] = 0.3
    cfg = resolve_run(params, "ci", "simcse", 1)
    teachers = [str(tmp / "teacher.npy")] if "distillation" in objectives else None
    trainer = Trainer(cfg, tmp / "corpus.txt", tmp / "se", tmp / f"out{distributed.rank()}", cache_dir=None,
                      show_progress=False, teacher_cache=teachers)
    fixed_width(trainer.tokens, cfg.training.max_seq_length)
    batches = data_order(len(trainer.tokens), BATCH, cfg.seed, 0, trainer.world)
    out = {"loss": [], "logs": [], "grads": [], "state": []}
    real_gather = distributed.gather_with_grad
    if naive_gather:  # remote rows as constants: what a plain keep-local gather of z2 gives
        distributed.gather_with_grad = distributed.gather_keep_local
    try:
        for step in range(steps):
            trainer.state.step = step
            loss, logs = trainer.forward_loss(batches[step])
            trainer.backward(loss)
            out["loss"].append(logs["loss"])
            out["logs"].append(logs)
            out["grads"].append({n: p.grad.detach().clone() for n, p in trainer.encoder.named_parameters()
                                 if p.grad is not None})
            out["state"].append({k: v.detach().clone() for k, v in trainer.objective.state_dict().items()})
    finally:
        distributed.gather_with_grad = real_gather
    return out


JOBS = {"plain": (PLAIN, 2, False), "naive": (PLAIN, 1, True), "terms": (TERMS, 3, False),
        "distill": (DISTILL, 2, False)}


def _worker(rank: int, world: int, port: int, tmp: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        res = {name: run_steps(Path(tmp), *job) for name, job in JOBS.items()}
        torch.save(res, Path(tmp) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ddp(inputs) -> list[dict]:
    """All DDP jobs in 2 gloo processes, forked from this one: torch and csebench are imported already (spawned, each
    imported them again: process start-up was most of the cost)."""
    torch.multiprocessing.start_processes(_worker, args=(2, _free_port(), str(inputs)), nprocs=2, join=True,
                                          start_method="fork")
    return [torch.load(inputs / f"rank{r}.pt", weights_only=False) for r in range(2)]


def rel_error(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    num = sum(float((a[k].double() - b[k].double()).pow(2).sum()) for k in a)
    den = sum(float(b[k].double().pow(2).sum()) for k in b)
    return (num / den) ** 0.5


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    write_corpus(tmp / "corpus.txt", n=64)
    write_mini_senteval(tmp / "se", pairs=16)
    # a DistillCSE teacher: another tiny random encoder, its corpus embeddings cached
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder
    from csebench.training.teachers import build_teacher_cache

    build_encoder(BackboneConfig(model="random", pooler="cls", random_config={"initializer_range": 0.3}),
                  seed=7).save(tmp / "teacher")
    build_teacher_cache(tmp / "teacher", tmp / "corpus.txt", tmp / "teacher.npy", max_seq_length=32)
    return tmp


@pytest.mark.slow(seconds=3)
def test_ddp_loss_and_gradients_equal_single_process(inputs, ddp):
    single = run_steps(inputs, PLAIN, steps=2)
    ranks = [r["plain"] for r in ddp]
    for step in range(2):
        for r in ranks:  # the averaged loss and the DDP-averaged gradients, on every rank
            assert r["loss"][step] == pytest.approx(single["loss"][step], rel=1e-5, abs=1e-6)
            assert rel_error(r["grads"][step], single["grads"][step]) < 1e-5
            for name, g in single["grads"][step].items():
                torch.testing.assert_close(r["grads"][step][name], g, rtol=1e-3, atol=1e-6, msg=name)
    # the test can fail: without the gradient that other ranks' anchors send back to this rank's
    # positives (remote rows detached), the gradients differ, and no world_size factor fixes it
    naive = [r["naive"] for r in ddp]
    assert naive[0]["loss"][0] == pytest.approx(single["loss"][0], rel=1e-5)  # same forward
    err = rel_error(naive[0]["grads"][0], single["grads"][0])
    assert err > 0.02, err
    scaled = {k: v * 2 for k, v in naive[0]["grads"][0].items()}
    assert rel_error(scaled, single["grads"][0]) > 0.02


@pytest.mark.slow(seconds=1)
def test_ddp_with_iscse_gaussian_sscl_matches_and_ranks_agree(inputs, ddp):
    steps = 3  # the IS-CSE buffer (16 rows) is full after 2 global batches of 8: step 3 smooths
    single = run_steps(inputs, TERMS, steps=steps)
    ranks = [r["terms"] for r in ddp]
    assert single["logs"][-1]["instance_smoothing/active"] == 1.0
    assert single["logs"][-1]["gaussian_negatives/num_gaussian"] == 3 * BATCH  # M from the global batch
    for step in range(steps):
        for r in ranks:
            assert r["loss"][step] == pytest.approx(single["loss"][step], rel=1e-5, abs=1e-6)
            for key in ("loss_contrastive", "loss_instance_smoothing"):
                assert r["logs"][step][key] == pytest.approx(single["logs"][step][key], rel=1e-4, abs=1e-6)
            assert rel_error(r["grads"][step], single["grads"][step]) < 1e-5
            for name, v in single["state"][step].items():  # the IS-CSE buffer: same rows, same order
                torch.testing.assert_close(r["state"][step][name], v, rtol=1e-4, atol=1e-6, msg=name)
        # and the ranks agree exactly with each other
        for name, v in ranks[0]["state"][step].items():
            assert torch.equal(v, ranks[1]["state"][step][name]), name


@pytest.mark.slow(seconds=20)
def test_csebench_train_under_torchrun_killed_and_resumed(tmp_path):
    """`torchrun --nproc_per_node 2 -m csebench train ...` on CPU (gloo). Rank 0 writes the outputs;
    the global batch is split over the ranks, so the step count is the single-process one. A DDP job killed
    (SIGKILL to both ranks, as a preemption) after a checkpoint and started again with torchrun resumes and ends
    identical to an uninterrupted DDP job of the same command. The uninterrupted job and the killed one are two ranks
    each forked from this process with the environment torchrun gives its workers (torch and csebench loaded once:
    a torchrun launch is three fresh interpreters, 15-17 CPU-s on a 2-core Zen 4 VM); the resume is the real torchrun
    command."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from runhelpers import ROOT, ci_training, env, fork_csebench, write_config

    write_corpus(tmp_path / "corpus.txt", n=96)
    write_mini_senteval(tmp_path / "se", pairs=24)
    cfg = write_config(tmp_path / "over.yaml", ci_training(max_steps=8, eval_steps=2, checkpoint_steps=2, batch_size=8,
                                                           log_steps=1, eval_batch_size=64))

    def train(out: Path) -> list[str]:
        return ["--threads", "1", "train", "--config", str(cfg), "--suite", "ci", "--run-name", "simcse", "--seed", "1",
                "--corpus", str(tmp_path / "corpus.txt"), "--senteval", str(tmp_path / "se"), "--out", str(out),
                "--cache-dir", str(tmp_path / "cache"), "--no-progress"]

    def launch(out: Path, log: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(_free_port()), "-m", "csebench", *train(out)]
        return subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=open(tmp_path / log, "wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)

    def finish(proc, log: str) -> None:
        assert proc.wait(timeout=400) == 0, (tmp_path / log).read_text(errors="replace")[-3000:]

    def ranks(out: Path, log: str) -> list:
        port = str(_free_port())  # torchrun's env:// rendezvous, as its workers see it
        return [fork_csebench(train(out), tmp_path / f"{log}{r}.log", start_new_session=True, env_={
            **env(), "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}) for r in range(2)]

    ref, killed = tmp_path / "reference", tmp_path / "killed"
    p_ref = ranks(ref, "reference")
    victim = ranks(killed, "killed")
    deadline = time.time() + 300
    while (not (killed / "checkpoint" / "manifest.json").exists() and all(p.poll() is None for p in victim)
           and time.time() < deadline):
        time.sleep(0.02)
    assert all(p.poll() is None for p in victim), (tmp_path / "killed0.log").read_text(errors="replace")[-3000:]
    for p in victim:  # both ranks at once, as a preemption does
        p.kill()
    for p in victim:
        assert p.wait(30) == -signal.SIGKILL
    time.sleep(0.5)  # let the killed ranks' sockets go
    assert not (killed / "train.json").exists()
    finish(launch(killed, "resumed.log"), "resumed.log")
    for r, proc in enumerate(p_ref):
        finish(proc, f"reference{r}.log")

    summary = json.loads((ref / "train.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == 8
    assert len((ref / "train_curve.csv").read_text().splitlines()) == 1 + 8
    assert not (ref / "checkpoint").exists() and not (ref / "best_model.partial").exists()
    assert json.loads((killed / "train_timing.json").read_text())["resumed_from_step"] in (2, 4, 6)
    for name in ("train.json", "train_curve.csv", "dev_curve.csv", "model/model.safetensors"):
        assert (killed / name).read_bytes() == (ref / name).read_bytes(), name


@pytest.mark.slow(seconds=1)
def test_ddp_with_distillation_matches(inputs, ddp):
    """DistillCSE's anchors x anchors distillation covers all ranks' anchors under DDP."""
    single = run_steps(inputs, DISTILL, steps=2)
    ranks = [r["distill"] for r in ddp]
    for step in range(2):
        for r in ranks:
            assert r["logs"][step]["loss_distillation"] == pytest.approx(single["logs"][step]["loss_distillation"],
                                                                         rel=1e-4, abs=1e-6)
            assert r["loss"][step] == pytest.approx(single["loss"][step], rel=1e-5, abs=1e-6)
            assert rel_error(r["grads"][step], single["grads"][step]) < 1e-5

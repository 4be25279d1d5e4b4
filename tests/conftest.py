import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# `make test` runs a worker per core (-n auto): one torch thread in each, and in the commands they start. With
# torch's default (a thread per core in every worker) two workers kept four busy threads on two cores, and
# OpenMP's waiting threads spin. A command that asks for more threads itself (the README's builds, `--cores all`:
# two-thread jobs beside the other worker) waits without spinning: one such eval-transfer job took 8.8 CPU-s beside
# a busy core, 5.4 with a passive wait (and 30 once in make test).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared"))


def pytest_sessionstart(session):
    """A process that runs tests (a worker, or pytest without -n): torch and transformers imported once, their objects
    frozen, and the collector run less often (csebench.cli.collect_less, as the program does). Python's default
    thresholds rescanned every imported object again and again: 8 of 40 CPU-s of test_trainer, test_objective_* and
    test_embeddings; with this 2.0 of 30."""
    if getattr(session.config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return  # xdist's controller: it runs no test
    import gc
    import importlib

    from csebench.cli import collect_less

    importlib.import_module("transformers.modeling_utils")  # and torch
    gc.freeze()
    collect_less()


def _expected_seconds(item) -> float:
    """A test's cost as its marker states it (`@pytest.mark.slow(seconds=N)`: N measured in `make test`)."""
    marker = item.get_closest_marker("slurm") or item.get_closest_marker("slow")
    return float(marker.kwargs.get("seconds", 30)) if marker else 0.0


def pytest_collection_modifyitems(config, items):
    """The real-SLURM test first, then the costliest modules: `make test` hands whole modules to its
    workers in this order (--dist loadfile --no-loadscope-reorder), so the long ones, started first, end
    with the short ones rather than after them. The SLURM test mostly waits on the cluster's status
    checks, so it overlaps best from the start. A module's cost is the sum of its tests' `seconds=`
    (slow and slurm markers); the unmarked modules keep their file order after the costly ones.
    xdist's own order (most tests first) left the SLURM test to start 15 minutes in and run alone for
    7 (1,320 s on 2 cores)."""
    cost: dict[str, float] = {}
    slurm = {item.module.__name__ for item in items if item.get_closest_marker("slurm")}
    for item in items:
        cost[item.module.__name__] = cost.get(item.module.__name__, 0.0) + _expected_seconds(item)
    items.sort(key=lambda item: (item.module.__name__ not in slurm, -cost[item.module.__name__]))  # stable


@pytest.fixture(scope="session", autouse=True)
def _synthetic_senteval_allowed():
    """Most tests read small SentEval-layout files they write themselves (a few STS-B dev pairs, a
    20-sentence MR): the check against SentEval's published files (csebench.core.provenance) is off for
    them, from the session's start (module-scoped fixtures train with such files too).
    tests/test_provenance.py turns it on, and so does the ci suite's end-to-end run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CSEBENCH_DATA_CHECK", "0")
        yield


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "senteval").is_dir():
        pytest.skip(f"shared data not found at {SHARED} (set CSEBENCH_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def tokenizer():
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import load_tokenizer

    return load_tokenizer(BackboneConfig(model="random"))


@pytest.fixture()
def tiny_encoder(tokenizer):
    """A tiny random BERT encoder (2 layers, hidden 32) with the MiniLM tokenizer."""
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import SentenceEncoder, build_backbone

    def make(pooler: str = "cls", seed: int = 0):
        cfg = BackboneConfig(model="random", pooler=pooler)
        return SentenceEncoder(build_backbone(cfg, tokenizer, seed=seed), tokenizer, pooler)

    return make


@pytest.fixture()
def one_thread():
    """Tiny matrices: one torch thread avoids oversubscription on a shared machine (a module that wants it
    for every test: ``pytestmark = pytest.mark.usefixtures("one_thread")``)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture()
def inputs(tmp_path):
    """The inputs of a `csebench train` of the ci suite (runhelpers.train_argv): tmp_path/corpus.txt (64
    sentences of the shared corpus) and tmp_path/se (24 STS-B dev and SICK-R dev pairs)."""
    from runhelpers import write_corpus, write_mini_senteval

    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=24)
    return tmp_path


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """The first 40 lines of every STS file, a synthetic transfer set: seconds per evaluation."""
    from runhelpers import write_small_shared

    return write_small_shared(tmp_path_factory.mktemp("small"), lines=40) / "senteval"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished ci run (1 step on 5 sentences), trained once for the module: copy it before damaging it
    (runhelpers.copy_run); its inputs are in its parent folder (runhelpers.train_argv(trained.parent, ...))."""
    from csebench.cli import main
    from runhelpers import train_argv, write_corpus, write_mini_senteval

    tmp = tmp_path_factory.mktemp("trained")
    write_corpus(tmp / "corpus.txt", n=5)
    write_mini_senteval(tmp / "se", pairs=24)
    assert main(train_argv(tmp, tmp / "run", None)) == 0
    return tmp / "run"


@pytest.fixture(scope="session")
def warm_jobs():
    """The environment that sends a local Snakemake build's jobs to a warm server forked from this test process
    (runhelpers.start_warm_server), for a build run with ``--config warm_start=false``: such a build does not start a
    server of its own (6-7 CPU-s of imports each). The builds that check the Snakefile's own server run without it."""
    from runhelpers import start_warm_server, stop_warm_server

    proc, env = start_warm_server()
    yield env
    stop_warm_server(proc, env)


@pytest.fixture(scope="session")
def ci_build(tmp_path_factory, shared_dir, warm_jobs):
    """The ci suite built once for the whole session through Snakemake, with the shared data as users have it
    (runhelpers.build_ci; its command is CI_BUILD, its jobs in warm_jobs' server): a runhelpers.Built.
    tests/test_pipeline.py checks the build end to end; a test that needs a finished ci suite takes a copy of its own
    (``ci_build.copy(tmp_path / "proj")``) and runs Snakemake there with ``ci_build.env``. The workers share the one
    build (runhelpers.built_once)."""
    from runhelpers import build_ci, built_once, session_dir, tool_env

    return built_once(session_dir(tmp_path_factory), "ci-build", lambda proj, env: build_ci(proj, env, warm_jobs),
                      tool_env(shared_dir))

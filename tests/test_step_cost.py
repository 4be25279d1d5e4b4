"""A training step's fixed cost, counted on the CPU where a GPU pays for it.

At the papers' main setting (BERT-base, batch 64) a GPU step is short enough that what surrounds the
kernels sets the speed: a host wait (the host reads a value the device computes, so it stops queueing
work until the device catches up), extra operators (each a kernel launch), Python work per step. None of
that depends on the device, so it is counted here, on a tiny random BERT:

- host reads per optimizer step: none on a step whose logs are not read, exactly one (the losses since the
  last read, in one copy) on a step that reads them. Counted as the operators whose result size or value
  the host must see (``item``, ``nonzero``, ``masked_select``, ...) and the reads of a tensor into Python
  (``tolist``, ``numpy``, ``cpu``) of anything but the batch the loader prepared on the host;
- operators dispatched (every ATen call, nested ones included, as the profiler records them): at most 1.3x
  those of benchmarks/plain_loop.py's step, the plain forty-line loop, on the same weights and batches;
- no deterministic-mode NaN fills of new allocations (fill_ no more often than in the plain loop), and the
  losses and weights bitwise the same as with them;
- no per-step work that need not be per step: Module.train over every submodule, torch.manual_seed's
  seeding of every device type.
"""

from __future__ import annotations

import collections
import copy
import sys
import traceback
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from runhelpers import write_corpus, write_mini_senteval

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import plain_loop  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

SHAPE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
BATCH, LOG_STEPS = 16, 4
# operators whose output size or value the host must know: on a GPU each waits for the device
WAITING_OPS = {"_local_scalar_dense", "item", "nonzero", "masked_select", "_unique2", "unique_consecutive", "unique_dim",
               "is_nonzero", "equal", "allclose", "repeat_interleave", "_assert_async"}
READS = ("tolist", "numpy", "cpu")  # a tensor's values into Python (on a GPU: a copy to the host, and a wait)
TERMS = {"simcse": {}, "gaussian_negatives": {"gaussian_negatives": {}},
         "instance_smoothing": {"instance_smoothing": {"buffer_size": BATCH, "neighbors": 4}},  # full after one step
         "layer_negatives": {"layer_negatives": {}}}


@pytest.fixture(scope="module")
def data(tmp_path_factory, shared_dir):
    root = tmp_path_factory.mktemp("step-cost")
    return write_corpus(root / "corpus.txt", 200), write_mini_senteval(root / "se"), root


def make_trainer(data, objectives: dict, steps: int = 40):
    from csebench.objectives import validate_objectives
    from csebench.study.params import BackboneConfig, DataConfig, SourceConfig, TrainingConfig
    from csebench.study.resolve import RunConfig
    from csebench.training.trainer import Trainer

    corpus, senteval, root = data
    t = TrainingConfig(batch_size=BATCH, max_steps=steps, eval_steps=10**6, log_steps=LOG_STEPS, checkpoint_steps=10**6,
                       precision="fp32", dev_max_pairs=20)
    cfg = RunConfig(suite="cost", name="step", seed=42, method="cost", method_label="cost", backbone_name="tiny",
                    backbone=BackboneConfig(model="random", pooler="cls", random_config=dict(SHAPE)), data_name="cost",
                    data=DataConfig(SourceConfig(path=str(corpus)), SourceConfig(path=str(senteval))), training=t,
                    objectives=validate_objectives(objectives, "step cost", t), paths={"data": str(root), "results": str(root)})
    return Trainer(cfg, corpus, senteval, root / f"run-{len(list(root.iterdir()))}", cache_dir=root / "cache",
                   show_progress=False)


def one_step(tr) -> dict | None:
    """One optimizer step of Trainer.run's loop (logs read where the loop reads them)."""
    from csebench.training.trainer import data_order

    batch = data_order(len(tr.tokens), tr.t.batch_size, tr.cfg.seed, tr.state.epoch, tr.world)[tr.state.batch_in_epoch]
    logs = tr.train_step(batch, read=tr.reads_logs_at(tr.state.step + 1))
    tr.state.step += 1
    tr.state.batch_in_epoch += 1
    return logs


class HostWaits(TorchDispatchMode):
    """Records each operator of WAITING_OPS and each read of READS into Python, with where it was called."""

    def __init__(self, host_tensors: set[int]):
        super().__init__()
        self.host, self.seen = host_tensors, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        if name in WAITING_OPS or (name == "index" and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                                           for i in (args[1] if len(args) > 1 else ()))):
            self.note(name)
        return func(*args, **(kwargs or {}))

    def note(self, what: str) -> None:
        where = [f for f in traceback.extract_stack()[:-2] if "csebench" in f.filename or "plain_loop" in f.filename]
        self.seen.append(f"{what} at {where[-1].filename.split('/')[-1]}:{where[-1].lineno}" if where else what)

    def __enter__(self):
        self._saved = {n: getattr(torch.Tensor, n) for n in READS}
        for n, f in self._saved.items():
            def read(t, *a, _f=f, _n=n, **k):
                if id(t) not in self.host:
                    self.note(_n)
                return _f(t, *a, **k)
            setattr(torch.Tensor, n, read)
        return super().__enter__()

    def __exit__(self, *exc):
        for n, f in self._saved.items():
            setattr(torch.Tensor, n, f)
        return super().__exit__(*exc)


def host_waits(tr, steps: int) -> list[list[str]]:
    """The host waits of each of the next ``steps`` steps; the loader's host-side batch tensors are not device
    tensors (reading them waits for nothing)."""
    host: set[int] = set()
    real_get = tr.loader.get

    def get(*a, **k):
        out = real_get(*a, **k)
        host.update(id(t) for t in out)
        return out

    tr.loader.get = get
    per_step = []
    for _ in range(steps):
        mode = HostWaits(host)
        with mode:
            one_step(tr)
        per_step.append(mode.seen)
        host.clear()
    tr.loader.get = real_get
    return per_step


@pytest.mark.parametrize("name", list(TERMS) + ["all"])
def test_a_step_waits_for_the_device_only_when_it_reads_the_logs(data, name):
    objectives = {k: v for d in TERMS.values() for k, v in d.items()} if name == "all" else TERMS[name]
    tr = make_trainer(data, objectives)
    for _ in range(2):  # past the first step (train mode set, buffers started)
        one_step(tr)
    waits = host_waits(tr, 2 * LOG_STEPS)  # steps 3..10: reads after steps 4 and 8
    for step, seen in enumerate(waits, start=3):
        expected = 1 if tr.reads_logs_at(step) else 0
        assert len(seen) == expected, f"step {step} of {name}: {len(seen)} host waits, expected {expected}: {seen}"


def count_ops(fn) -> collections.Counter:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))


def test_a_step_dispatches_at_most_1_3x_the_operators_of_the_plain_loop(data):
    """Both sides count a step that reads no logs, after two warm steps; the plain loop runs as a plain loop
    would (no deterministic mode), csebench's step with the mode its trainer sets."""
    tr = make_trainer(data, {})
    for _ in range(2):
        one_step(tr)
    ours = count_ops(lambda: one_step(tr))
    assert not tr.reads_logs_at(tr.state.step)

    from csebench.training.trainer import data_order

    model = plain_loop.PlainSimCSE(copy.deepcopy(tr.encoder.backbone), copy.deepcopy(tr.encoder.head.dense))
    loop = plain_loop.PlainLoop(model, tr.t.learning_rate, tr.t.temperature, 100)
    from csebench.core.corpus import read_corpus

    batches = plain_loop.device_batches(tr.encoder.tokenizer, read_corpus(data[0]),
                                        data_order(len(tr.tokens), BATCH, 42, 0)[:3], tr.t.max_seq_length, "cpu")
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        loop.step(*batches[0])
        loop.step(*batches[1])
        plain = count_ops(lambda: loop.step(*batches[2]))
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
    ratio = sum(ours.values()) / sum(plain.values())
    worst = sorted(set(ours) | set(plain), key=lambda k: plain[k] - ours[k])[:8]
    detail = ", ".join(f"{k} {ours[k]} vs {plain[k]}" for k in worst)
    assert ratio <= 1.3, f"{sum(ours.values())} operators a step against the plain loop's {sum(plain.values())}: {detail}"
    assert ours["aten::fill_"] <= 1.3 * plain["aten::fill_"], f"fills: {ours['aten::fill_']} vs {plain['aten::fill_']}"


def test_deterministic_mode_fills_nothing_and_that_changes_no_bit(data):
    """The trainer turns off deterministic mode's NaN fill of new memory; the same steps with it on give the same
    losses and weights, bit for bit (no kernel reads memory it did not write)."""
    runs = []
    for fill in (False, True):
        tr = make_trainer(data, TERMS["layer_negatives"])
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        torch.utils.deterministic.fill_uninitialized_memory = fill
        try:
            losses = [one_step(tr) for _ in range(LOG_STEPS)]
        finally:
            torch.utils.deterministic.fill_uninitialized_memory = False
        runs.append(([x["loss"] for x in losses if x], {k: v.clone() for k, v in tr.encoder.state_dict().items()}))
    (loss_a, w_a), (loss_b, w_b) = runs
    assert loss_a == loss_b and len(loss_a) == 2
    assert all(torch.equal(w_a[k], w_b[k]) for k in w_a)


def test_a_step_does_no_per_module_or_per_device_type_work(data):
    """Module.train walks every submodule and torch.manual_seed seeds every device type torch knows (capturing
    a stack per lazily seeded one): once after an evaluation is enough, and the step seeds its own generators."""
    tr = make_trainer(data, TERMS["instance_smoothing"])
    one_step(tr)
    calls = collections.Counter()

    def profiler(frame, event, arg):
        if event == "call":
            calls[(Path(frame.f_code.co_filename).name, frame.f_code.co_name)] += 1

    sys.setprofile(profiler)
    try:
        one_step(tr)
    finally:
        sys.setprofile(None)
    assert calls[("module.py", "train")] == 0 and calls[("random.py", "manual_seed")] == 0, calls.most_common(10)
    tr.evaluate_and_keep_best()
    tr.encoder.eval()  # as an evaluation leaves it, were it not restored
    one_step(tr)
    assert tr.encoder.training and tr.objective.training

"""CUDA-safety regressions that run on CPU: float32 similarities under autocast, no
data-dependent shapes or host reads in the per-step objective code (checked on the ``meta``
device, where any host read or data-dependent shape raises), and the loss computed outside
the trainer's autocast region."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from runhelpers import PARAMS, write_corpus, write_mini_senteval


def test_cosine_matrix_is_float32_under_autocast():
    from csebench.objectives.base import cosine_matrix

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 64, generator=g), torch.randn(24, 64, generator=g)
    want = cosine_matrix(a, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = cosine_matrix(a.bfloat16(), b)
        got32 = cosine_matrix(a, b)
    assert got.dtype == torch.float32 and got32.dtype == torch.float32
    assert torch.equal(got32, want)  # before the fix: a bf16 product, errors ~4e-3


def test_teacher_logits_are_float32_under_autocast(tmp_path):
    from csebench.model.teacher_cache import FORMAT, TeacherBank
    from csebench.training.teachers import save_teacher_cache

    rng = np.random.default_rng(0)
    emb = rng.standard_normal((10, 16)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    path = tmp_path / "t.npy"
    save_teacher_cache(path, emb, {"format": FORMAT, "rows": 10, "dim": 16, "dtype": "float32", "normalized": True,
                                   "model": "x", "teacher_run": None, "max_seq_length": 32, "tokenizer": "x",
                                   "corpus": "x", "corpus_sha256": "x"})
    bank = TeacherBank([path])
    idx = torch.arange(6)
    want = bank.logits(idx, idx)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = bank.logits(idx, idx)
    assert got.dtype == torch.float32 and torch.equal(got, want)


def test_off_diagonal_has_no_data_dependent_shape():
    from csebench.objectives.distillation import off_diagonal

    m = torch.arange(20.0).view(4, 5)
    excluded = torch.tensor([0, 2, 4, 1])
    keep = torch.ones(4, 5, dtype=torch.bool)
    keep[torch.arange(4), excluded] = False
    assert torch.equal(off_diagonal(m, excluded), m[keep].view(4, 4))
    # meta tensors have no data: boolean-mask indexing (a CUDA sync) cannot run there, a gather can
    out = off_diagonal(torch.empty(8, 9, device="meta"), torch.empty(8, dtype=torch.long, device="meta"))
    assert out.shape == (8, 8) and out.device.type == "meta"


def test_instance_smoothing_step_reads_nothing_back_from_the_device():
    from csebench.objectives.base import StepContext
    from csebench.objectives.smoothing import InstanceSmoothing, SmoothingSettings

    term = InstanceSmoothing(SmoothingSettings(buffer_size=8, neighbors=2), 16, 2).to("meta")
    for step in range(3):  # fills the buffer, then retrieval + smoothing loss
        z1 = torch.empty(4, 16, device="meta", requires_grad=True)
        z2 = torch.empty(4, 16, device="meta", requires_grad=True)
        ctx = StepContext(z1=z1, z2=z2, temperature=0.05, step=step, total_steps=10,
                          indices=torch.empty(4, dtype=torch.long, device="meta"),
                          all_indices=torch.empty(4, dtype=torch.long, device="meta"))
        loss = term.extra_loss(ctx)  # int(buffer) here raised "Cannot copy out of meta tensor"
        assert loss.device.type == "meta" and loss.dtype == torch.float32
    assert term.logs()["active"] == 1.0


def test_instance_smoothing_host_counters_follow_load_state_dict():
    from csebench.objectives.smoothing import InstanceSmoothing, SmoothingSettings

    a = InstanceSmoothing(SmoothingSettings(buffer_size=5, neighbors=2), 4, 2)
    a.push(torch.randn(7, 4))
    b = InstanceSmoothing(SmoothingSettings(buffer_size=5, neighbors=2), 4, 2)
    b.load_state_dict(a.state_dict())
    assert b.ready() and torch.equal(b.entries(), a.entries())
    rows = torch.randn(2, 4)
    a.push(rows)
    b.push(rows)
    assert torch.equal(a.memory, b.memory) and int(a.pointer) == int(b.pointer) == 2
    assert torch.allclose(b.entries()[-2:], F.normalize(rows, dim=1))


def test_objective_runs_outside_the_trainers_autocast(tmp_path, shared_dir):
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.training.trainer import Trainer, data_order

    write_corpus(tmp_path / "corpus.txt")
    write_mini_senteval(tmp_path / "se")
    params = load_params(PARAMS)
    params["suites"]["ci"]["training"] = {"batch_size": 8, "max_steps": 2, "precision": "bf16", "dropout": 0.0}
    params["methods"]["simcse"]["objectives"] = {"gaussian_negatives": {}}
    cfg = resolve_run(params, "ci", "simcse", 1)
    tr = Trainer(cfg, tmp_path / "corpus.txt", tmp_path / "se", tmp_path / "out", show_progress=False)
    assert tr.amp_dtype == torch.bfloat16  # CPU autocast in bf16 when asked for explicitly
    seen = {}
    forward = tr.objective.forward

    def spy(ctx):
        seen["autocast"] = torch.is_autocast_enabled("cpu")
        seen["z_dtype"] = ctx.z1.dtype
        return forward(ctx)

    tr.objective.forward = spy
    loss, logs = tr.forward_loss(data_order(len(tr.tokens), 8, 1, 0)[0])
    assert seen["autocast"] is False  # the encoder ran in bf16, the loss does not
    assert loss.dtype == torch.float32 and np.isfinite(logs["loss"])
    assert set(logs) >= {"loss", "loss_contrastive", "gaussian_negatives/num_gaussian"}


@pytest.mark.parametrize("precision,expected", [("fp32", None), ("bf16", torch.bfloat16), ("fp16", None)])
def test_cpu_autocast_dtype(precision, expected):
    from csebench.model.encoder import autocast_dtype

    # fp16 autocast (and so a GradScaler) exists only on CUDA; CPU falls back to fp32
    assert autocast_dtype(precision, torch.device("cpu")) == expected


@pytest.mark.parametrize("native", [True, False])
def test_fast_training_precision_is_bf16_only_on_native_bf16_cpus(monkeypatch, native):
    from csebench.model import encoder
    from csebench.model.encoder import autocast_dtype

    monkeypatch.setattr(encoder, "cpu_has_native_bf16", lambda: native)
    assert autocast_dtype("fast", torch.device("cpu")) == (torch.bfloat16 if native else None)
    assert autocast_dtype("auto", torch.device("cpu")) is None  # auto stays fp32 on CPU


def test_cpu_bf16_override_forces_the_fp32_fallback(monkeypatch):
    from csebench.model.encoder import cpu_has_native_bf16, eval_autocast_dtype

    monkeypatch.setenv("CSEBENCH_CPU_BF16", "0")
    assert cpu_has_native_bf16() is False
    assert eval_autocast_dtype("fast", torch.device("cpu")) is None


def _fake_gpu(monkeypatch, capability: tuple[int, int]) -> None:
    """A CUDA device of this compute capability, as torch.cuda.is_bf16_supported sees it: native bf16
    from 8.0 on; below, bf16 tensors still work (emulated), so the default call answers yes too."""
    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return capability >= (8, 0) or including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)


@pytest.mark.parametrize("capability,expected", [((7, 0), torch.float16), ((7, 5), torch.float16),
                                                 ((8, 0), torch.bfloat16), ((9, 0), torch.bfloat16)])
def test_gpu_auto_precision_uses_bf16_only_where_it_is_native(monkeypatch, capability, expected):
    """V100 (7.0) / T4 (7.5) emulate bf16 slowly: "auto"/"fast" train in fp16 with a GradScaler there
    (before the fix: bf16, since is_bf16_supported() counts emulation); A100/H100 train in bf16."""
    from csebench.model.encoder import eval_autocast_dtype
    from csebench.model.encoder import autocast_dtype

    _fake_gpu(monkeypatch, capability)
    gpu = torch.device("cuda", 0)
    for precision in ("auto", "fast"):
        assert autocast_dtype(precision, gpu) == expected
        # evaluation has no loss scaling: fp32 where bf16 is not native
        assert eval_autocast_dtype(precision, gpu) == (torch.bfloat16 if expected == torch.bfloat16 else None)
    assert autocast_dtype("bf16", gpu) == torch.bfloat16  # asked for explicitly: honoured
    assert autocast_dtype("fp32", gpu) is None


# what the code calls, and the torch release that added it
TORCH_NEEDS = {
    'torch.amp.GradScaler("cuda") (trainer: fp16 training)': (2, 3),
    "AdamW(fused=True) on CPU (trainer)": (2, 4),
    "torch.amp.is_autocast_available (objectives.base.no_autocast)": (2, 4),
    "torch.cuda.is_bf16_supported(including_emulation=False) (encoder.cuda_has_native_bf16)": (2, 4),
}


def test_torch_floor_admits_nothing_older_than_the_code_needs():
    import re
    import tomllib

    from runhelpers import ROOT

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if re.match(r"torch\b", d))
    floor = tuple(int(x) for x in re.fullmatch(r"torch>=(\d+)\.(\d+)", spec).groups())
    too_new = [what for what, version in TORCH_NEEDS.items() if version > floor]
    assert not too_new, f"pyproject.toml allows {spec}, but these need a newer torch: {too_new}"
    assert floor == max(TORCH_NEEDS.values())  # and no higher than needed


def test_kmeans_smoothing_reads_nothing_back_from_the_device():
    """IS-CSE's K-means variant counts cluster members with scatter_add_: bincount reads the indices'
    range back to the host on CUDA (kmeans_iterations waits per step) and cannot run on ``meta``."""
    from csebench.objectives.smoothing import spherical_kmeans

    x = F.normalize(torch.randn(40, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    centres = spherical_kmeans(x, 4, 5)
    # the same centres as counting with bincount (empty clusters keep their previous centre)
    want = x[torch.linspace(0, 39, 4).round().long()].clone()
    for _ in range(5):
        assign = (x @ want.T).argmax(dim=1)
        sums = torch.zeros_like(want).index_add_(0, assign, x)
        want = torch.where((torch.bincount(assign, minlength=4) > 0).unsqueeze(1), F.normalize(sums, dim=1), want)
    assert torch.equal(centres, want)
    out = spherical_kmeans(torch.empty(40, 8, device="meta"), 4, 5)
    assert out.shape == (4, 8) and out.device.type == "meta"


def test_kmeans_instance_smoothing_step_on_meta():
    from csebench.objectives.base import StepContext
    from csebench.objectives.smoothing import InstanceSmoothing, SmoothingSettings

    term = InstanceSmoothing(SmoothingSettings(buffer_size=8, retrieval="kmeans", clusters=3), 16, 2).to("meta")
    for step in range(3):
        z = torch.empty(4, 16, device="meta", requires_grad=True)
        ctx = StepContext(z1=z, z2=torch.empty(4, 16, device="meta"), temperature=0.05, step=step, total_steps=10,
                          indices=torch.arange(4), all_indices=torch.arange(4))
        loss = term.extra_loss(ctx)
    assert loss.device.type == "meta" and term.logs()["active"] == 1.0


def test_training_step_reads_nothing_back_between_log_steps(tmp_path, shared_dir, monkeypatch):
    """A whole step up to the loss (views, pooling, the objective terms incl. DistillCSE's teacher
    lookup, the finiteness bookkeeping) on the ``meta`` device, where any host read raises: the
    corpus indices stay on the host (before: sent to the device, read back by the teacher lookup)
    and the loss is not read (before: float(loss) and .tolist() of its parts every step). Only the
    backbone is stubbed: transformers' SDPA mask check reads the attention mask back itself."""
    from csebench.training import trainer as T
    from csebench.study.params import BackboneConfig, load_params
    from csebench.study.resolve import resolve_run
    from csebench.model.encoder import build_encoder
    from csebench.training.teachers import build_teacher_cache

    write_corpus(tmp_path / "corpus.txt")
    write_mini_senteval(tmp_path / "se")
    build_encoder(BackboneConfig(model="random", pooler="cls"), seed=7).save(tmp_path / "teacher")
    build_teacher_cache(tmp_path / "teacher", tmp_path / "corpus.txt", tmp_path / "teacher.npy", max_seq_length=32)
    params = load_params(PARAMS)
    params["suites"]["ci"]["training"] = {"batch_size": 8, "max_steps": 3}
    params["methods"]["simcse"]["objectives"] = {
        "layer_negatives": {"layer": 1},  # (GS-InfoNCE and Group-P draw from device generators: none on meta)
        "instance_smoothing": {"buffer_size": 8, "retrieval": "kmeans", "clusters": 2},
        "distillation": {"teachers": {"run": "simcse", "seeds": [2]}, "shuffle": "none"}}
    cfg = resolve_run(params, "ci", "simcse", 1)
    tr = T.Trainer(cfg, tmp_path / "corpus.txt", tmp_path / "se", tmp_path / "out", show_progress=False,
                   teacher_cache=[str(tmp_path / "teacher.npy")])
    tr.encoder.to("meta")
    tr.objective.to("meta")
    tr.device = torch.device("meta")
    hidden = tr.encoder.hidden_size

    def meta_backbone(model, ids, mask, all_layers, rows=None):
        return tuple(torch.empty(*ids.shape, hidden, device="meta", requires_grad=True)
                     for _ in range(tr.encoder.num_layers + 1))

    monkeypatch.setattr(T, "_call_hidden", meta_backbone)
    # the first step's check that dropout made the two views differ is the one read a run makes on purpose,
    # once (tests/test_dropout.py): the steps between log steps are what this test is about
    assert tr._check_views
    tr._check_views = False
    batches = T.data_order(len(tr.tokens), 8, 1, 0)
    for step in range(3):  # the IS-CSE buffer fills at step 2: smoothing runs at step 3
        tr.state.step = step
        loss, logs = tr.forward_loss(batches[step], read=False)
        assert logs is None and loss.device.type == "meta"
    assert [u.step for u in tr._unread] == [1, 2, 3]  # kept on the device for the next read
    with pytest.raises(NotImplementedError):  # and a read is what would wait for the device
        tr.read_logs()

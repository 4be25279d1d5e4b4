"""csebench speed benchmarks -> BENCHMARKS.md (one command: ``python benchmarks/run.py [--quick]``).

Every figure is measured in this one run, side by side with the reference it is compared to:
  1. training throughput: our unsup-SimCSE vs sentence-transformers' unsupervised SimCSE recipe
     (MultipleNegativesRankingLoss, anchor = positive, CLS pooling, SentenceTransformerTrainer)
  2. STS evaluation of the 7 tasks: evaluate_sts vs EmbeddingSimilarityEvaluator task by task
  3. per-step time of each method relative to SimCSE (in one process, interleaved step by step)
  4. Group-P shuffling: the vectorized function vs a per-row loop
  5. peak RSS of training and evaluation (each trial runs in its own subprocess)
  6. evaluation batch size on CPU: encoding time of the same evaluation sentences at batch 32-256
  + a GPU cost estimate from FLOP counts (not measured here).

Ours and the reference alternate (ours, ref, ours, ref, ...), each trial in a fresh subprocess,
so load from other processes on the machine hits both alike; figures are medians over trials.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

BATCH = 64
MAX_LEN = 32
LR = 3e-5
TEMPERATURE = 0.05


def peak_rss_mb() -> float:
    from csebench.core.startup import peak_memory_mib

    return peak_memory_mib() or 0.0  # this trial process's own high-water mark, not its parent's


def _shared() -> Path:
    from csebench.study.params import load_params, shared_dir

    return (ROOT / shared_dir(load_params(ROOT / "params.yaml"))).resolve()


def corpus_path() -> Path:
    return _shared() / "corpus" / "demo-sentences.txt"


def senteval_dir() -> Path:
    from csebench.evaluation.locate import senteval_root

    return senteval_root(_shared() / "senteval")


def _bench_config(seed: int, steps: int, objectives: dict | None = None, precision: str = "auto",
                  compile_: bool = False):
    """The demo suite's SimCSE run on the packaged MiniLM, with the benchmark's batch/length/steps."""
    from csebench.study.params import load_params
    from csebench.study.resolve import resolve_run
    from csebench.objectives import validate_objectives

    params = load_params(ROOT / "params.yaml")
    cfg = resolve_run(params, "demo", "simcse", seed)
    if BACKBONE["name"] != cfg.backbone_name:
        from csebench.study.resolve import backbone_config

        cfg.backbone, cfg.backbone_name = backbone_config(params, BACKBONE["name"]), BACKBONE["name"]
    t = cfg.training
    t.batch_size, t.max_seq_length, t.learning_rate, t.max_steps = BATCH, MAX_LEN, LR, steps
    t.warmup_steps, t.weight_decay, t.temperature = 0, 0.0, TEMPERATURE
    t.precision, t.compile = precision, compile_
    t.eval_steps = t.checkpoint_steps = 10 ** 9
    if objectives:
        cfg.objectives = validate_objectives(objectives, "benchmark", t)
    return cfg


def bench_batches(n_sentences: int, steps: int, seed: int):
    from csebench.training.trainer import data_order

    return data_order(n_sentences, BATCH, seed, 0)[:steps]


# ----------------------------------------------------------------------------- workers (subprocesses)


def worker_train_ours(a) -> dict:
    import torch

    from csebench.training.trainer import Trainer

    cfg = _bench_config(a.seed, a.steps + a.warmup, precision=a.precision)
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, corpus_path(), senteval_dir(), tmp, cache_dir=a.cache_dir, show_progress=False)
        batches = bench_batches(len(tr.tokens), a.steps + a.warmup, a.seed)
        marks = []
        for i, b in enumerate(batches):
            tr.train_step(b)
            tr.state.step += 1
            tr.state.batch_in_epoch += 1
            marks.append(time.perf_counter())
        dev = tr.dev(tr.encoder)
    steps_t = [marks[i] - marks[i - 1] for i in range(a.warmup, len(marks))]
    return {"step_s": steps_t, "dev": dev, "rss_mb": peak_rss_mb(), "threads": torch.get_num_threads()}


def in_order_sampler():
    """sentence-transformers batch sampler that takes consecutive rows as batches (no reshuffling),
    so a dataset laid out batch by batch in our order is trained on in our batches."""
    from sentence_transformers import DefaultBatchSampler

    class InOrder(DefaultBatchSampler):
        def __iter__(self):
            n = len(self.sampler)
            for s in range(0, n - self.batch_size + 1, self.batch_size):
                yield list(range(s, s + self.batch_size))

        def __len__(self):
            return len(self.sampler) // self.batch_size

    return InOrder


def worker_train_st(a) -> dict:
    """sentence-transformers' unsupervised SimCSE recipe, fed the same sentences in the same batches."""
    import torch
    from datasets import Dataset
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments, losses, models)
    from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator
    from transformers import TrainerCallback

    from csebench.core.corpus import read_corpus
    from csebench.model.encoder import packaged_model_dir
    from csebench.evaluation.sts import load_stsb

    sentences = read_corpus(corpus_path())
    batches = bench_batches(len(sentences), a.steps + a.warmup, a.seed)
    ordered = [sentences[i] for b in batches for i in b]  # our batches, in our order
    train = Dataset.from_dict({"anchor": ordered, "positive": ordered})

    InOrder = in_order_sampler()
    torch.manual_seed(a.seed)
    word = models.Transformer(str(packaged_model_dir()), max_seq_length=MAX_LEN)
    pooling = models.Pooling(word.get_embedding_dimension(), pooling_mode="cls")
    model = SentenceTransformer(modules=[word, pooling], device="cpu")
    loss = losses.MultipleNegativesRankingLoss(model, scale=1.0 / TEMPERATURE)
    marks: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            marks.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=BATCH, max_steps=a.steps + a.warmup, learning_rate=LR,
            warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, seed=a.seed, batch_sampler=InOrder,
            save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True,
            bf16=a.precision == "bf16", dataloader_drop_last=True)
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=loss,
                                             callbacks=[Clock()])
        trainer.train()
    dev = load_stsb(senteval_dir(), "dev")
    ev = EmbeddingSimilarityEvaluator(dev.sent1, dev.sent2, list(dev.scores), batch_size=128,
                                      main_similarity="cosine", write_csv=False)
    score = ev(model)
    spearman = 100.0 * float(next(v for k, v in score.items() if k.endswith("spearman_cosine")))
    steps_t = [marks[i] - marks[i - 1] for i in range(a.warmup, len(marks))]
    return {"step_s": steps_t, "dev": spearman, "rss_mb": peak_rss_mb(), "threads": torch.get_num_threads(),
            "optim": str(args.optim)}


def _sts_pairsets():
    from csebench.evaluation.sts import TEST_TASKS, load_task

    root = senteval_dir()
    return {t: load_task(root, t) for t in TEST_TASKS}


def _gemm_share(run) -> float:
    """Share of CPU self time in matrix products (aten::addmm/mm/bmm/linear kernels) while ``run()`` runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    ops = prof.key_averages()
    total = sum(o.self_cpu_time_total for o in ops)
    gemm = sum(o.self_cpu_time_total for o in ops if o.key in ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul",
                                                                 "mkldnn::_linear_pointwise", "aten::_mkldnn_linear"))
    return gemm / total if total else float("nan")


def _eval_amp(a):
    import contextlib

    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16) if a.eval_precision == "bf16" else contextlib.nullcontext()


def worker_eval_ours(a) -> dict:
    import torch

    from csebench.model.encoder import load_encoder, packaged_model_dir
    from csebench.evaluation.sts import evaluate_sts

    sets = _sts_pairsets()
    enc = load_encoder(packaged_model_dir(), pooler="avg")
    encode = lambda s: enc.encode(s, batch_size=a.eval_batch, precision=a.eval_precision)  # noqa: E731
    encode(sets["STS12"].sent1[:64])  # warm-up, as for the reference
    t0 = time.perf_counter()
    res = evaluate_sts(encode, None, pairsets=sets)
    secs = time.perf_counter() - t0
    out = {"seconds": secs, "tasks": res["tasks"], "rss_mb": peak_rss_mb(), "threads": torch.get_num_threads()}
    if a.profile_eval:
        out["gemm_share"] = _gemm_share(lambda: evaluate_sts(encode, None, pairsets={"STS16": sets["STS16"]}))
    return out


def worker_eval_st(a) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

    from csebench.model.encoder import packaged_model_dir

    sets = _sts_pairsets()
    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    model.max_seq_length = 512  # ours truncates at the model's 512 positions; the folder says 256

    def evaluate(task, ps):
        ev = EmbeddingSimilarityEvaluator(ps.sent1, ps.sent2, list(ps.scores), batch_size=a.eval_batch,
                                          main_similarity="cosine", write_csv=False, name=task)
        with _eval_amp(a):  # bf16: the same autocast our encoder uses
            return 100.0 * float(ev(model)[f"{task}_spearman_cosine"])

    with _eval_amp(a):
        model.encode(sets["STS12"].sent1[:64], batch_size=a.eval_batch)
    t0 = time.perf_counter()
    tasks = {task: evaluate(task, ps) for task, ps in sets.items()}
    secs = time.perf_counter() - t0
    out = {"seconds": secs, "tasks": tasks, "rss_mb": peak_rss_mb(), "threads": torch.get_num_threads()}
    if a.profile_eval:
        out["gemm_share"] = _gemm_share(lambda: evaluate("STS16", sets["STS16"]))
    return out


EVAL_BATCHES = (32, 64, 128, 256)


def worker_eval_batch(a) -> dict:
    """Encoding time of a seeded sample of the demo's evaluation sentences at each batch size (one
    thread, as each demo job runs), in fp32 and, where the CPU computes it natively, bf16."""
    import random

    import torch

    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.embeddings import evaluation_sentences
    from csebench.model.encoder import cpu_has_native_bf16, load_encoder, packaged_model_dir

    torch.set_num_threads(1)
    sents = evaluation_sentences(senteval_root(senteval_dir()), transfer=True, max_train_sentences=500, max_sts_pairs=500)
    sample = random.Random(0).sample(sents, min(a.eval_sample, len(sents)))
    enc = load_encoder(packaged_model_dir())
    enc.encode(sample[:64], batch_size=64, precision="fp32")  # warm-up
    out = {"sentences": len(sample), "seconds": {}}
    for precision in ("fp32", "bf16") if cpu_has_native_bf16() else ("fp32",):
        for rep in range(a.eval_reps):
            for bs in EVAL_BATCHES if rep % 2 == 0 else EVAL_BATCHES[::-1]:
                t0 = time.perf_counter()
                enc.encode(sample, batch_size=bs, precision=precision)
                out["seconds"].setdefault(f"{precision}-{bs}", []).append(time.perf_counter() - t0)
    return out


WORKERS = {"train-ours": worker_train_ours, "train-st": worker_train_st,
           "eval-ours": worker_eval_ours, "eval-st": worker_eval_st, "eval-batch": worker_eval_batch}


def run_worker(kind: str, **kw) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind]
    for k, v in kw.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {kind} failed:\n{proc.stderr[-4000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    out["wall_s"] = time.perf_counter() - t0
    print(f"  {kind} {json.dumps({k: v for k, v in out.items() if k not in ('step_s', 'tasks')})}", flush=True)
    return out


# ----------------------------------------------------------------------------- sections


def med(xs):
    return statistics.median(xs)


def section_training(o, cache_dir: str) -> dict:
    print("[1] training throughput: ours vs sentence-transformers", flush=True)
    rows = {"ours": [], "st": []}
    for rep in range(o.reps):
        seed = 42 + rep
        for kind in (("ours", "st") if rep % 2 == 0 else ("st", "ours")):
            rows[kind].append(run_worker(f"train-{kind}", steps=o.steps, warmup=o.warmup, seed=seed,
                                         cache_dir=cache_dir, precision="auto"))
    out = {}
    for kind, trials in rows.items():
        per_trial = [BATCH / med(t["step_s"]) for t in trials]  # sentences/s, median step of each trial
        out[kind] = {"sps": med(per_trial), "sps_trials": per_trial, "dev": [t["dev"] for t in trials],
                     "rss_mb": med([t["rss_mb"] for t in trials]), "threads": trials[0]["threads"],
                     "optim": trials[0].get("optim", "")}
    out["ratio"] = out["ours"]["sps"] / out["st"]["sps"]
    # paired ratios (trial i of ours vs trial i of st ran back to back)
    out["paired"] = [a / b for a, b in zip(out["ours"]["sps_trials"], out["st"]["sps_trials"])]
    return out


def section_eval(o) -> dict:
    """fp32 (identical numerics expected) and bf16 autocast (the `fast` evaluation precision) pairs."""
    print("[2] STS evaluation: evaluate_sts vs EmbeddingSimilarityEvaluator (fp32, bf16)", flush=True)
    out: dict = {}
    for precision in ("fp32", "bf16"):
        rows = {"ours": [], "st": []}
        for rep in range(o.eval_reps):
            for kind in (("ours", "st") if rep % 2 == 0 else ("st", "ours")):
                rows[kind].append(run_worker(f"eval-{kind}", eval_batch=o.eval_batch, eval_precision=precision,
                                             profile_eval=int(rep == 0 and precision == "fp32")))
        res = {k: {"seconds": med([t["seconds"] for t in v]), "trials": [t["seconds"] for t in v],
                   "tasks": v[0]["tasks"], "rss_mb": med([t["rss_mb"] for t in v]),
                   "gemm_share": v[0].get("gemm_share")} for k, v in rows.items()}
        res["ratio"] = res["st"]["seconds"] / res["ours"]["seconds"]
        out[precision] = res
    out["ratio_fast_vs_st_fp32"] = out["fp32"]["st"]["seconds"] / out["bf16"]["ours"]["seconds"]
    sets = _sts_pairsets()
    out["sentences_st"] = sum(2 * len(ps.sent1) for ps in sets.values())  # each evaluator encodes both columns
    out["sentences_ours"] = len({s for ps in sets.values() for s in (*ps.sent1, *ps.sent2)})
    return out


def section_eval_batch(o) -> dict:
    print("[6] evaluation batch size on CPU (one thread)", flush=True)
    r = run_worker("eval-batch", eval_sample=o.eval_sample, eval_reps=o.eval_reps)
    return {"sentences": r["sentences"], "seconds": {k: med(v) for k, v in r["seconds"].items()}, "trials": r["seconds"]}


METHOD_TERMS = {  # label: (params.yaml method, its paper-default terms if params.yaml lacks it)
    "GS-InfoNCE": ("gs_infonce", {"gaussian_negatives": {}}),
    "IS-CSE": ("iscse", {"instance_smoothing": {}}),
    "SSCL": ("sscl", {"layer_negatives": {}}),
}
BACKBONE = {"name": "minilm"}  # --backbone tiny: a smoke test of the code paths only


def method_terms(label: str) -> dict:
    from csebench.study.params import load_params

    key, default = METHOD_TERMS[label]
    spec = (load_params(ROOT / "params.yaml").get("methods") or {}).get(key)
    return dict((spec or {}).get("objectives") or default)


def _term_available(key: str) -> bool:
    from csebench.objectives import term_class

    try:
        term_class(key)
        return True
    except Exception:
        return False


def _prefill_smoothing(trainer) -> None:
    """IS-CSE waits for a full buffer before its loss starts; fill it so every timed step pays it."""
    import torch

    for term in trainer.objective.terms.values():
        if hasattr(term, "push") and hasattr(term, "memory"):
            rows = torch.nn.functional.normalize(torch.randn(term.memory.shape[0], term.memory.shape[1]), dim=-1)
            term.push(rows.to(term.memory.device))


def section_methods(o, cache_dir: str) -> dict:
    """Per-step time of each method relative to SimCSE: one Trainer per method in this process,
    stepped round-robin on the same batches, so load changes hit every method alike."""
    import torch

    from csebench.training.trainer import Trainer

    print("[3] per-step time of each method relative to SimCSE", flush=True)
    methods = {"SimCSE": {}}
    notes = []
    for label in METHOD_TERMS:
        terms = method_terms(label)
        missing = [k for k in terms if not _term_available(k)]
        if missing:
            notes.append(f"{label}: skipped, objective term(s) {', '.join(missing)} not in this checkout")
        else:
            methods[label] = terms
    corpus = method_corpus(cache_dir)
    distill = distill_setups(corpus, cache_dir)
    if isinstance(distill, str):
        notes.append(distill)
    else:
        methods.update(distill["methods"])
    steps = o.method_steps
    trainers = {}
    tmp = tempfile.TemporaryDirectory()
    for label, terms in methods.items():
        cfg = _bench_config(42, steps + o.method_warmup, objectives=terms)
        teacher = distill["teacher_cache"].get(label) if not isinstance(distill, str) else None
        trainers[label] = Trainer(cfg, corpus, senteval_dir(), Path(tmp.name) / label.replace(" ", "_"),
                                  cache_dir=cache_dir, show_progress=False, teacher_cache=teacher)
        _prefill_smoothing(trainers[label])
    n = len(next(iter(trainers.values())).tokens)
    batches = bench_batches(n, steps + o.method_warmup, 42)
    times = {k: [] for k in trainers}
    order = list(trainers)
    for i, b in enumerate(batches):
        for label in (order if i % 2 == 0 else order[::-1]):
            tr = trainers[label]
            t0 = time.perf_counter()
            tr.train_step(b)
            dt = time.perf_counter() - t0
            tr.state.step += 1
            if i >= o.method_warmup:
                times[label].append(dt)
    tmp.cleanup()
    out = {"median_s": {k: med(v) for k, v in times.items()}, "notes": notes, "steps": steps,
           "threads": torch.get_num_threads()}
    base = out["median_s"]["SimCSE"]
    out["relative"] = {k: v / base for k, v in out["median_s"].items()}
    if not isinstance(distill, str) and distill.get("pair"):
        one, many = distill["pair"]
        out["distill_ratio"] = out["median_s"][many] / out["median_s"][one]
        out["distill_pair"] = distill["pair"]
    return out


N_TEACHERS = 16


def method_corpus(cache_dir: str, n: int = 4096) -> Path:
    """The first n sentences of the demo corpus (enough for the timed steps; keeps 16 teacher caches small)."""
    from csebench.core.corpus import read_corpus

    out = Path(cache_dir) / f"methods-corpus-{n}.txt"
    if not out.is_file():
        out.write_text("\n".join(read_corpus(corpus_path())[:n]) + "\n", encoding="utf-8")
    return out


def distill_setups(corpus: Path, cache_dir: str):
    """DistillCSE (Group-P, p = 0.1) with 1 and with 16 teacher components, each teacher a cached
    embedding artefact as the pipeline builds it. The timing does not depend on the teachers'
    values, so the caches hold random unit vectors (csebench.training.teachers format). Returns a note
    (str) when the distillation term or the teacher-cache module is missing."""
    if not _term_available("distillation"):
        return "DistillCSE: skipped, objective term distillation not in this checkout"
    import numpy as np

    try:
        from csebench.core.corpus import read_corpus
        from csebench.model.tokens import tokenizer_fingerprint
        from csebench.model.encoder import load_tokenizer
        from csebench.model.teacher_cache import FORMAT
        from csebench.training.teachers import corpus_sha256, save_teacher_cache
    except Exception as exc:  # noqa: BLE001
        return f"DistillCSE: skipped, teacher cache module unavailable ({exc.__class__.__name__}: {exc})"
    cfg = _bench_config(42, 1)
    rows = len(read_corpus(corpus))
    dim = 384 if BACKBONE["name"] == "minilm" else int(cfg.backbone.random_config.get("hidden_size", 32))
    tok = tokenizer_fingerprint(load_tokenizer(cfg.backbone))
    paths = []
    rng = np.random.default_rng(0)
    for k in range(N_TEACHERS):
        out = Path(cache_dir) / f"teacher-{k}.npy"
        if not out.is_file():
            emb = rng.standard_normal((rows, dim)).astype(np.float32)
            emb /= np.linalg.norm(emb, axis=1, keepdims=True)
            save_teacher_cache(out, emb, {
                "format": FORMAT, "model": "random (benchmark)", "teacher_run": None, "pooler": "cls_before_pooler",
                "rows": rows, "dim": dim, "dtype": "float32", "normalized": True, "max_seq_length": MAX_LEN,
                "tokenizer": tok, "corpus": str(corpus), "corpus_sha256": corpus_sha256(corpus)})
        paths.append(str(out))
    one, many = "DistillCSE (1 teacher)", f"DistillCSE ({N_TEACHERS} teachers)"
    methods = {
        one: {"distillation": {"shuffle": "group_p", "p": 0.1, "teachers": {"run": "simcse", "seeds": [0]}}},
        many: {"distillation": {"shuffle": "group_p", "p": 0.1,
                                "teachers": {"run": "simcse", "seeds": list(range(N_TEACHERS))}}},
    }
    return {"methods": methods, "teacher_cache": {one: paths[:1], many: paths}, "pair": (one, many)}


def loop_group_p(logits, p: float, generator):
    """Direct per-row Group-P shuffling (DistillCSE Eq. 5-6, the way the released code does it):
    for each row, sort the teacher logits (descending), G = cumulative softmax probability,
    interval g = ceil(G / p) - 1, and shuffle the logits inside each interval."""
    import math

    import torch

    out = torch.empty_like(logits)
    n_groups = max(1, math.ceil(1.0 / p - 1e-9))
    for r in range(logits.shape[0]):
        row = logits[r]
        vals, order = torch.sort(row, descending=True)
        cum = torch.cumsum(torch.softmax(vals, dim=0), dim=0)
        shuffled = vals.clone()
        start = 0
        k = len(vals)
        while start < k:
            g = min(max(math.ceil(float(cum[start]) / p) - 1, 0), n_groups - 1)
            end = start + 1
            while end < k and min(max(math.ceil(float(cum[end]) / p) - 1, 0), n_groups - 1) == g:
                end += 1
            perm = torch.randperm(end - start, generator=generator, device=logits.device) + start
            shuffled[start:end] = vals[perm]
            start = end
        out[r, order] = shuffled
    return out


def section_group_p(o) -> dict:
    print("[4] Group-P shuffling: vectorized vs per-row loop", flush=True)
    if not _term_available("distillation"):
        return {"note": "skipped: objectives/distillation.py is not in this checkout"}
    import torch

    try:
        from csebench.objectives.distillation import group_p_shuffle as fast
    except Exception as exc:  # noqa: BLE001
        return {"note": f"skipped: vectorized Group-P function not found ({exc.__class__.__name__}: {exc})"}
    out = {"rows": [], "threads": 1}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # short ops on a shared machine: a 2-thread op stalls whenever one thread is descheduled
    try:
        out["rows"] = time_group_p(fast, (64, 512), o.gp_reps)
    finally:
        torch.set_num_threads(threads)
    return out


def time_group_p(fast, sizes, reps: int, device: str = "cpu") -> list[dict]:
    """Median time of ``fast`` (group_p_shuffle) and of loop_group_p on (batch, batch - 1) teacher
    logits on ``device``, alternating; CUDA work is synchronized before each clock read."""
    import torch

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    rows = []
    for bs in sizes:
        g = torch.Generator(device=dev).manual_seed(0)
        # teacher cosines of a trained encoder: mostly 0.1-0.6 (Eq. 5's softmax has no temperature)
        logits = (0.35 + 0.15 * torch.randn(bs, bs - 1, generator=g, device=dev)).clamp(-1, 1)
        fast(logits, 0.1, g)
        sync()
        inner = 20 if bs <= 64 else 5
        tf, tl = [], []
        for rep in range(reps):
            for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
                sync()
                t0 = time.perf_counter()
                if which == 0:
                    for _ in range(inner):
                        fast(logits, 0.1, g)
                    sync()
                    tf.append((time.perf_counter() - t0) / inner)
                else:
                    loop_group_p(logits, 0.1, g)
                    sync()
                    tl.append(time.perf_counter() - t0)
        rows.append({"batch": bs, "fast_ms": 1e3 * med(tf), "loop_ms": 1e3 * med(tl), "ratio": med(tl) / med(tf)})
    return rows


def section_profile(o=None) -> dict:
    """torch.profiler over a few steps of ours and of the reference (benchmarks/profile_step.py)."""
    print("[profile] where a training step's time goes", flush=True)
    steps = 2 if (o is not None and o.quick) else 3
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile_step.py"), "--steps", str(steps),
                           "--warmup", "1"], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"note": f"profile failed: {proc.stderr[-1500:]}"}
    return {"text": proc.stdout.strip(), "steps": steps}


# ----------------------------------------------------------------------------- GPU estimate

def section_gpu() -> dict:
    """The GPU cost of the wiki1m suites by `csebench plan`'s model (csebench.results.plan: padded training
    tokens, assumed MFUs until benchmarks/gpu.py measures them), on an A100 and an H100."""
    from csebench.results import plan as P
    from csebench.study.params import load_params
    from csebench.results.registry import default_suites

    params = load_params(ROOT / "params.yaml")
    suites = [s for s, spec in (params.get("suites") or {}).items() if (spec or {}).get("data") == "wiki1m"]
    default = set(default_suites(params))  # what `csebench plan` costs
    plans = P.plan(params, suites)
    measured = P.measured_throughput(ROOT)  # training MFU measured on a GPU (benchmarks/gpu_results.json), else assumed
    small = measured["small_mfu"] if measured else P.SMALL_BATCH_MFU
    large = measured["large_mfu"] if measured else P.LARGE_BATCH_MFU
    row = lambda p: {"suite": p.suite, "runs": p.training_runs, "unknown": p.unknown_models, "flops": p.total_flops,  # noqa: E731
                     "default_target": p.suite in default,
                     "hours": {gpu: p.gpu_hours(peak, small, large) for gpu, peak in P.GPU_PEAKS.items()}}
    rows = [row(p) for p in plans]
    # each distinct run once (docs/runs.md): what the default target trains
    once = row(P.distinct([p for p in plans if p.suite in default]))
    tokens = P.padded_tokens(64, 32)
    per_backbone = [{"model": m, "nonemb": total - emb, "flops": 6 * (total - emb) * 2 * 1_000_000 * tokens}
                    for m, (total, emb) in P.BACKBONE_PARAMS.items()]
    return {"padded_tokens": tokens, "mean_tokens": P.mean_tokens(32), "source": P.length_histogram()[2],
            "peaks": P.GPU_PEAKS, "mfu": {"small_batch": small, "large_batch": large, "measured_on": (measured or {}).get("gpu"),
                                          "other": P.ASSUMED_MFU, "small_batch_max": P.SMALL_BATCH},
            "suites": rows, "distinct": once, "per_backbone": per_backbone}


# ----------------------------------------------------------------------------- report


def machine_info() -> dict:
    import psutil
    import sentence_transformers
    import torch
    import transformers

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return {
        "cpu": cpu, "cores": os.cpu_count(), "ram_gb": psutil.virtual_memory().total / 2 ** 30,
        "avx512_bf16": "avx512_bf16" in flags, "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "sentence_transformers": sentence_transformers.__version__,
        "torch_threads": torch.get_num_threads(), "load_start": os.getloadavg(),
    }


GPU_BEGIN = "<!-- gpu-measured:begin (benchmarks/gpu.py writes this section) -->"
GPU_END = "<!-- gpu-measured:end -->"
# the two commands' measured times (make demo, make test; benchmarks/build_profile.py), written by hand from
# measured builds: this report keeps the section as it is
BUILDS_BEGIN = "<!-- builds-measured:begin (measured builds: make demo, make test) -->"
BUILDS_END = "<!-- builds-measured:end -->"
# the packed vs padded training step (benchmarks/packed_step.py writes it)
PACKED_BEGIN = "<!-- packed-measured:begin (benchmarks/packed_step.py writes this section) -->"
PACKED_END = "<!-- packed-measured:end -->"


def kept_section(path: Path, begin: str, end: str) -> str:
    """A section another command writes into an existing report, markers included ('' when none)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    i, j = text.find(begin), text.find(end)
    return text[i : j + len(end)] if 0 <= i < j else ""


def gpu_section(path: Path) -> str:
    """The GPU (measured) section of an existing report, markers included ('' when none)."""
    return kept_section(path, GPU_BEGIN, GPU_END)


def put_section(path: Path, begin: str, end: str, body: str, before: str | None = None) -> None:
    """Replace the section between ``begin`` and ``end`` of the report at ``path`` (markers included), or add it before
    the marker ``before`` (else at the end); the rest is kept."""
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmarks\n"
    block = f"{begin}\n{body.strip()}\n{end}"
    old = kept_section(path, begin, end)
    if old:
        text = text.replace(old, block)
    elif before and before in text:
        text = text.replace(before, block + "\n\n" + before, 1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def put_gpu_section(path: Path, body: str) -> None:
    """Replace (or append) the GPU (measured) section of the report at ``path``; the rest is kept."""
    put_section(path, GPU_BEGIN, GPU_END, body)


def fmt(x, nd=2):
    return f"{x:.{nd}f}"


def write_report(path: Path, info: dict, cmd: str, res: dict, started: float) -> None:
    L = []
    w = L.append

    def A(section: str) -> dict:
        return res["when"][section]["args"]

    def when(section: str) -> None:
        m = res["when"].get(section)
        if m:
            w(f"_Measured {m['utc']} UTC in {m['minutes']} min, load average {m['load'][0]} -> {m['load'][1]}, "
              f"by `{m['command']}`._\n")
    w("# Benchmarks\n")
    w(f"Generated by `{cmd}` (report written {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}). "
      f"Every ratio below was measured within one run of its section, ours and the reference alternating trial "
      f"by trial (each trial a fresh subprocess), medians over trials; each section states when it ran.\n")
    w("| machine | |\n|---|---|")
    w(f"| CPU | {info['cpu']}, {info['cores']} cores (avx512_bf16: {info['avx512_bf16']}) |")
    w(f"| RAM | {info['ram_gb']:.1f} GiB |")
    w(f"| versions | python {info['python']}, torch {info['torch']}, transformers {info['transformers']}, "
      f"sentence-transformers {info['sentence_transformers']} |")
    w(f"| torch threads | {info['torch_threads']} |")
    la0, la1 = info["load_start"], info.get("load_end", (float('nan'),) * 3)
    w(f"| load average (1 min) at start / end | {la0[0]:.1f} / {la1[0]:.1f} |\n")
    w("The machine was shared with other jobs while this ran (load average above), so absolute times are "
      "noisy; ratios are what the alternating design protects.\n")

    tr = res.get("training")
    if tr:
        w("## 1. Training throughput: unsup-SimCSE\n")
        when("training")
        w(f"Packaged MiniLM-L6 (22.7M parameters), batch {BATCH}, max length {MAX_LEN}, lr {LR}, "
          f"fp32 on CPU, the same sentences in the same batches, {A('training')['steps']} timed steps after "
          f"{A('training')['warmup']} warm-up steps per trial, {A('training')['reps']} trials each (seeds 42..). "
          f"Throughput = batch / median step time (data loading included). STS-B dev Spearman x100 of the "
          f"CLS embedding after the trial's steps.\n")
        w("| | sentences/s (median) | per trial | STS-B dev per trial | peak RSS (MB) |\n|---|---|---|---|---|")
        for k, name in (("ours", "csebench (Trainer.train_step)"), ("st", f"sentence-transformers ({tr['st']['optim']})")):
            d = tr[k]
            w(f"| {name} | {fmt(d['sps'], 1)} | {', '.join(fmt(x, 1) for x in d['sps_trials'])} | "
              f"{', '.join(fmt(x) for x in d['dev'])} | {fmt(d['rss_mb'], 0)} |")
        w(f"\n**Speed-up: {tr['ratio']:.2f}x** (paired per-trial ratios: {', '.join(fmt(x) for x in tr['paired'])}; "
          f"target 1.5x).\n")
        m = res["when"].get("training", {})
        if m and max(m.get("load", [0])) > 3:
            w("Caveat: this ran while other jobs kept the 2 cores busy (load average above). Ours and the reference "
              "alternated, so both met the same load, but they need not suffer from it equally (the reference runs "
              "two forward passes per step, twice the operator calls, each waiting for its threads); the ratio on "
              "an idle machine may be smaller. `make bench` on an idle machine settles it.\n")
        pr = res.get("profile")
        if pr:
            w("### Where the step time goes (torch.profiler, CPU self time by operator group)\n")
            when("profile")
            w(pr.get("note") or f"```\n{pr['text']}\n```\n")
        prof = res.get("profile_note")
        if prof:
            w(prof + "\n")
    ev = res.get("eval")
    if ev and "fp32" not in ev:  # results.json from before the bf16 pair
        ev = {"fp32": ev, "sentences_st": ev.get("sentences_st"), "sentences_ours": ev.get("sentences_ours")}
    if ev:
        e32, e16 = ev["fp32"], ev.get("bf16")
        w("## 2. STS evaluation (7 tasks)\n")
        when("eval")
        w(f"Packaged MiniLM-L6 (mean pooling), batch {A('eval')['eval_batch']} for both, same pairs "
          f"(STS12-16 'all': the concatenated subsets), cosine, Spearman x100. Ours: `evaluate_sts` (every distinct "
          f"sentence of all tasks encoded once, length-sorted). Reference: one `EmbeddingSimilarityEvaluator` per "
          f"task. Model loading is outside the timing; both warm up on 64 sentences first. "
          f"{A('eval')['eval_reps']} trials each, alternating. Two precisions: fp32 (both sides as shipped), and bf16 "
          f"autocast on both sides (ours: the `fast`/`bf16` evaluation precision; this CPU has AVX512-BF16).\n")
        head = "| task | ours fp32 | sentence-transformers fp32 | |diff| |"
        sep = "|---|---|---|---|"
        if e16:
            head += " ours bf16 | sentence-transformers bf16 | ours bf16 - ours fp32 |"
            sep += "---|---|---|"
        w(head + "\n" + sep)
        for t, v in e32["ours"]["tasks"].items():
            row = f"| {t} | {v:.4f} | {e32['st']['tasks'][t]:.4f} | {abs(v - e32['st']['tasks'][t]):.1e} |"
            if e16:
                b = e16["ours"]["tasks"][t]
                row += f" {b:.4f} | {e16['st']['tasks'][t]:.4f} | {b - v:+.4f} |"
            w(row)
        w("\n| | seconds (median) | per trial | peak RSS (MB) |\n|---|---|---|---|")
        for label, key, e in (("csebench evaluate_sts, fp32", "ours", e32), ("sentence-transformers, fp32", "st", e32),
                              ("csebench evaluate_sts, bf16", "ours", e16), ("sentence-transformers, bf16", "st", e16)):
            if e:
                w(f"| {label} | {fmt(e[key]['seconds'])} | {', '.join(fmt(x) for x in e[key]['trials'])} | {fmt(e[key]['rss_mb'], 0)} |")
        w("")
        w(f"- **fp32 vs fp32: {e32['ratio']:.2f}x** (target 3x with identical Spearman: "
          f"{'met' if e32['ratio'] >= 3 else 'not met'}; the values agree to the |diff| column).")
        if e16:
            w(f"- bf16 vs bf16: {e16['ratio']:.2f}x.")
            w(f"- **Our `fast` precision (bf16) vs sentence-transformers as shipped (fp32): {ev['ratio_fast_vs_st_fp32']:.2f}x**, "
              f"Spearman within {max(abs(e16['ours']['tasks'][t] - e32['ours']['tasks'][t]) for t in e32['ours']['tasks']):.3f} "
              f"of fp32 (not identical: bf16 rounding).")
        w("")
        if ev.get("sentences_st"):
            g_ours, g_st = e32["ours"].get("gemm_share"), e32["st"].get("gemm_share")
            gemm = (f" torch.profiler on STS16 (fp32): {100 * g_ours:.0f}% of our CPU time and {100 * g_st:.0f}% of the "
                    f"reference's is spent in matrix products (aten::addmm etc.)." if g_ours and g_st else "")
            w(f"Why fp32 stops at {e32['ratio']:.1f}x: sentences encoded: {ev['sentences_st']} by the reference (both columns of every "
              f"task's pairs), {ev['sentences_ours']} by ours (each distinct sentence once), a factor of "
              f"{ev['sentences_st'] / ev['sentences_ours']:.2f}; the rest of the gain comes from sorting by token "
              f"count (less padding) over all tasks at once and no per-task overhead.{gemm} With the GEMMs of "
              f"the distinct sentences as the floor, identical numerics cannot go much further on this model: 3x "
              f"needs fewer FLOPs, which bf16 gives (the row above) at a cost of about 0.01 Spearman. In the pipeline, "
              f"STS, transfer and the STS analyses of a model share one embeddings table (`csebench embed`), so each "
              f"of them re-encodes nothing.\n")
    me = res.get("methods")
    if me:
        w("## 3. Per-step time of each method relative to SimCSE\n")
        when("methods")
        w(f"One process, one Trainer per method (paper-default settings, packaged MiniLM, batch {BATCH}), stepped "
          f"round-robin on the same {me['steps']} batches (order reversed every other step) after "
          f"{A('methods')['method_warmup']} warm-up step(s); median step time. IS-CSE's buffer is pre-filled so every timed step "
          f"pays for retrieval and the smoothing loss.\n")
        w("| method | median step (s) | relative to SimCSE | target |\n|---|---|---|---|")
        targets = {"GS-InfoNCE": "<= 1.10", "IS-CSE": "<= 1.10", "SSCL": "<= 1.10"}
        for k, v in me["median_s"].items():
            w(f"| {k} | {v:.3f} | {me['relative'][k]:.3f} | {targets.get(k, '')} |")
        if min(me["relative"].values()) < 0.95:
            w("\n**Noise warning:** a method that computes a superset of SimCSE's step measured faster than SimCSE "
              "means this run's per-step noise exceeds the differences being measured (few steps on a loaded "
              "machine, see the load average above); the targets cannot be judged from it. Rerun on an idle "
              "machine: `python benchmarks/run.py --sections methods`.")
        if "distill_ratio" in me:
            one, many = me["distill_pair"]
            w(f"\nDistillCSE: {many} vs {one}: **{me['distill_ratio']:.3f}** (target <= 1.15).")
        for n in me["notes"]:
            w(f"\n- {n}")
        w("")
    gp = res.get("group_p")
    if gp:
        w("## 4. Group-P shuffling\n")
        when("group_p")
        if "note" in gp:
            w(gp["note"] + "\n")
        else:
            w("Teacher logits of a batch (rows = anchors, columns = the other in-batch sentences), p = 0.1, one "
              "torch thread for both. Vectorized: `csebench.objectives.distillation.group_p_shuffle`. Loop: "
              "`loop_group_p` in this file (per row: sort, cumulative probability, shuffle each interval), "
              "alternating with the vectorized one; median over trials.\n")
            w("| batch | vectorized (ms) | per-row loop (ms) | speed-up | target |\n|---|---|---|---|---|")
            for r in gp["rows"]:
                w(f"| {r['batch']} | {r['fast_ms']:.2f} | {r['loop_ms']:.1f} | {r['ratio']:.0f}x | >= 50x |")
            w("")
    if tr or ev:
        w("## 5. Peak memory (RSS)\n")
        w("Peak resident set size of each trial's process (VmHWM; includes Python, torch and the model), median.\n")
        w("| | csebench | sentence-transformers |\n|---|---|---|")
        if tr:
            w(f"| training ({A('training')['steps'] + A('training')['warmup']} steps + STS-B dev) | {fmt(tr['ours']['rss_mb'], 0)} MB | {fmt(tr['st']['rss_mb'], 0)} MB |")
        if ev:
            w(f"| STS evaluation (7 tasks, fp32) | {fmt(ev['fp32']['ours']['rss_mb'], 0)} MB | {fmt(ev['fp32']['st']['rss_mb'], 0)} MB |")
        w("")
    eb = res.get("eval_batch")
    if eb:
        w("## 6. Evaluation batch size (CPU)\n")
        when("eval_batch")
        w(f"`SentenceEncoder.encode` on {eb['sentences']} sentences drawn (seed 0) from the demo's evaluation set "
          "(capped STS tasks, STS-B dev/test, capped transfer tasks), packaged MiniLM, one thread (as each demo job), "
          "length-sorted batches; median over trials, batch sizes alternating in order. This is why the encoding "
          "batch defaults to 64 on CPU (`encoder.default_encode_batch_size`; 128 on GPUs) and the demo suites "
          "evaluate STS-B dev in batches of 64.\n")
        precisions = sorted({k.split("-")[0] for k in eb["seconds"]}, key=["fp32", "bf16"].index)
        w("| batch | " + " | ".join(f"{p} seconds | {p} vs batch 64" for p in precisions) + " |")
        w("|---|" + "---|---|" * len(precisions))
        for bs in EVAL_BATCHES:
            cells = []
            for p in precisions:
                sec, ref = eb["seconds"].get(f"{p}-{bs}"), eb["seconds"].get(f"{p}-64")
                cells += [fmt(sec), f"{sec / ref:.2f}x" if sec and ref else "–"]
            w(f"| {bs} | " + " | ".join(cells) + " |")
        w("")
    g = res.get("gpu")
    if g:
        w("## GPU: expected cost of the paper suites (FLOP model" + (f", training utilisation measured on an {g['mfu']['measured_on']})\n"
                                                                     if g["mfu"].get("measured_on") else ", utilisation assumed)\n"))
        when("gpu")
        m, peaks = g["mfu"], g["peaks"]
        w(f"The cost model of `csebench plan` (`csebench.results.plan`). FLOPs = 6 x non-embedding parameters x training "
          f"tokens (forward + backward; attention at length 32 and the embedding lookups are negligible), both "
          f"dropout views counted, one epoch of wiki1m (1e6 sentences; a run's max_steps where it sets one; an "
          f"evaluation-only run, train: false, trains nothing), plus STS-B dev every eval_steps, the "
          f"evaluation and teacher caches. A dynamically padded batch runs every sentence at its longest, capped "
          f"at max_seq_length: a sentence costs the expected longest of its batch, {g['padded_tokens']:.1f} tokens "
          f"at batch 64 and cap 32 (the mean sentence has {g['mean_tokens']:.1f}), from the sentence-length "
          f"histogram of {g['source']} (BERT WordPiece; `benchmarks/length_histogram.py`). "
          + (f"Training at the utilisation measured on an {m['measured_on']} (section GPU (measured) below; "
             f"benchmarks/gpu_results.json): " if m.get("measured_on") else "Throughput assumed, not measured: training at ")
          + f"{m['small_batch']:.1%} of the bf16 dense peak (MFU) at batch <= {m['small_batch_max']} (a step that small "
          f"is launch-bound), {m['large_batch']:.1%} above; evaluation and teacher caches at an assumed {m['other']:.0%}. "
          f"The H100 and A100 columns apply that utilisation to their own bf16 peaks (an H100's equals the H200's).\n")
        w("| backbone | non-embedding params | training FLOPs per run (batch 64) | " +
          " | ".join(f"hours on {k} (bf16 dense peak {v / 1e12:.0f} TFLOP/s)" for k, v in peaks.items()) + " |")
        w("|---|---|---|" + "---|" * len(peaks))
        for r in g["per_backbone"]:
            w(f"| {r['model']} | {r['nonemb'] / 1e6:.0f}M | {r['flops']:.2e} | " +
              " | ".join(f"{r['flops'] / (m['small_batch'] * peak) / 3600:.2f}" for peak in peaks.values()) + " |")
        w("\n| suite (data wiki1m) | runs costed | FLOPs | " + " | ".join(f"GPU-hours, {k}" for k in peaks) + " |")
        w("|---|---|---|" + "---|" * len(peaks))
        for r in g["suites"]:
            extra = f" (no cost model for {', '.join(r['unknown'])})" if r["unknown"] else ""
            w(f"| {r['suite']}{'' if r['default_target'] else ' †'} | {r['runs']}{extra} | {r['flops']:.2e} | " +
              " | ".join(f"{r['hours'][k]:.1f}" for k in peaks) + " |")
        for label, rows in (("total, default target (`csebench plan`)", [r for r in g["suites"] if r["default_target"]]),
                            ("total, every wiki1m suite", g["suites"])):
            w(f"| {label} | {sum(r['runs'] for r in rows)} | {sum(r['flops'] for r in rows):.2e} | " +
              " | ".join(f"{sum(r['hours'][k] for r in rows):.1f}" for k in peaks) + " |")
        if g.get("distinct"):
            d = g["distinct"]
            w(f"| default target, each distinct run trained once (docs/runs.md) | {d['runs']} | {d['flops']:.2e} | " +
              " | ".join(f"{d['hours'][k]:.1f}" for k in peaks) + " |")
        w("\n† not in the default target (no paper table or figure reads it).")
        w("\nWhat the code does to approach that throughput on a GPU (all in `trainer.py` / `encoder.py`): "
          "bf16 autocast (fp16 + GradScaler where bf16 is not native; `training.precision`), fused AdamW, "
          "PyTorch scaled-dot-product attention (`attn_implementation=\"sdpa\"`, flash/memory-efficient kernels), "
          "both dropout views in one forward pass of the doubled batch, the corpus tokenized once and "
          "dynamically padded, pinned host memory with non-blocking copies, background batch collation "
          "(`training.num_workers`), no host read of the loss between log steps, optional `torch.compile` "
          "(`training.compile`), DistillCSE teachers read from a cached-embedding artefact (no teacher forward "
          "per step), and evaluation that encodes each distinct sentence once, length-sorted, in bf16.\n")
    w("## Reproduce\n")
    w(f"```\n{cmd}\n```\n`--quick` runs fewer steps and trials (a smoke test; ratios are noisier). "
      "`make bench` runs the full benchmark.\n")
    for kept in (kept_section(path, BUILDS_BEGIN, BUILDS_END), kept_section(path, PACKED_BEGIN, PACKED_END),
                 gpu_section(path)):  # written elsewhere: kept as they are
        if kept:
            w(kept + "\n")
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text("\n".join(L) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer steps and trials (smoke test)")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--sections", default="training,eval,methods,group_p,gpu,profile,eval_batch")
    ap.add_argument("--eval-sample", type=int, default=None, help="eval_batch: sentences encoded (default 6000; --quick 1500)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results.json"),
                    help="raw results (a run of some --sections updates those and re-renders the report)")
    # worker arguments (internal)
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--eval-batch", type=int, default=128)
    ap.add_argument("--eval-precision", default="fp32", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    ap.add_argument("--profile-eval", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--backbone", default="minilm", help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=None, help="training trials per side (default 3; --quick 2)")
    ap.add_argument("--eval-reps", type=int, default=None, help="STS evaluation trials per side (default 2; --quick 1)")
    a = ap.parse_args(argv)
    BACKBONE["name"] = a.backbone
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if a.worker:
        print("RESULT " + json.dumps(WORKERS[a.worker](a)), flush=True)
        return
    a.steps = a.steps or (4 if a.quick else 10)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 2)
    a.reps = a.reps or (2 if a.quick else 3)
    a.eval_reps = a.eval_reps or (1 if a.quick else 2)
    a.eval_sample = a.eval_sample or (1500 if a.quick else 6000)
    a.method_steps = 3 if a.quick else 6
    a.method_warmup = 1
    a.gp_reps = 3 if a.quick else 9
    started = time.time()
    cmd = "python benchmarks/run.py" + (" --quick" if a.quick else "")
    all_sections = "training,eval,methods,group_p,gpu,profile,eval_batch"
    sections = a.sections.split(",")
    info = machine_info()
    store = Path(a.json)
    # a subset of sections updates those in the stored results and re-renders the whole report
    res: dict = json.loads(store.read_text()) if (a.sections != all_sections and store.is_file()) else {}
    res.setdefault("when", {})
    args = {"steps": a.steps, "warmup": a.warmup, "reps": a.reps, "eval_reps": a.eval_reps,
            "eval_batch": a.eval_batch, "method_steps": a.method_steps, "method_warmup": a.method_warmup}
    cache = tempfile.mkdtemp(prefix="csebench-bench-")

    def stamp(name: str, t0: float, load0) -> None:
        res["when"][name] = {"utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                             "minutes": round((time.time() - t0) / 60, 1), "load": [round(load0[0], 1), round(os.getloadavg()[0], 1)],
                             "command": " ".join(["python benchmarks/run.py"] + (sys.argv[1:] if argv is None else list(argv))),
                             "args": args}

    for name, fn in (("training", lambda: section_training(a, cache)), ("eval", lambda: section_eval(a)),
                     ("methods", lambda: section_methods(a, cache)), ("group_p", lambda: section_group_p(a)),
                     ("gpu", section_gpu), ("profile", lambda: section_profile(a)), ("eval_batch", lambda: section_eval_batch(a))):
        if name in sections:
            t0, load0 = time.time(), os.getloadavg()
            res[name] = fn()
            stamp(name, t0, load0)
            store.write_text(json.dumps(res, indent=2, default=str))
    note = ROOT / "benchmarks" / "profile_note.md"
    res["profile_note"] = note.read_text(encoding="utf-8").strip() if note.is_file() else ""
    info["load_end"] = os.getloadavg()
    write_report(Path(a.out), info, "python benchmarks/run.py" + (" --quick" if a.quick else ""), res, started)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

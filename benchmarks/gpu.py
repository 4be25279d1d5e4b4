"""GPU benchmark -> the "GPU (measured)" section of BENCHMARKS.md (``make bench-gpu``).

    python benchmarks/gpu.py                 # on a CUDA machine: the full benchmark
    python benchmarks/gpu.py --tiny          # CPU smoke test: 2-layer hidden-32 model, a few steps
    python benchmarks/gpu.py --pending       # (re)write the section as "not yet measured"

Randomly initialised models of the real shapes (bert-base-uncased: 12 x 768, 12 heads, FFN 3072,
vocab 30522; roberta-large: 24 x 1024, 16 heads, FFN 4096, vocab 50265; BertModel of that shape,
the packaged MiniLM tokenizer), through the real Trainer:
  a. correctness: every objective term alone and all composed, fp32 / bf16 / fp16 (GradScaler),
     with and without torch.compile: finite losses; checkpoint save + resume equals an
     uninterrupted run; fp32 loss curve with dropout off on the device vs on CPU (<= 1e-4 rel.)
  b. training throughput vs sentence-transformers' unsupervised SimCSE recipe
     (MultipleNegativesRankingLoss, anchor = positive, its trainer with bf16), MFU, projected
     wiki1m epoch time (1e6 sentences, STS-B dev every 125 steps)
  c. STS evaluation (7 tasks) vs EmbeddingSimilarityEvaluator, bf16 and fp32
  d. Group-P shuffling on the device vs the per-row loop
Helpers (configs, corpus, teacher caches, Group-P timing, the report splice) come from
benchmarks/run.py. Only this script's section of BENCHMARKS.md is replaced; the rest is kept.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts (deterministic GEMMs)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (same setup and helpers as the CPU benchmark)

ROOT = bench.ROOT
SHAPES = {  # BertConfig of the real architectures (random init)
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                      vocab_size=30522, max_position_embeddings=512),
    "roberta-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                          vocab_size=50265, max_position_embeddings=514),
}
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            vocab_size=30522, max_position_embeddings=128)
# bf16 dense peak FLOP/s by device name (first match wins); unknown devices: MFU n/a
PEAKS = [("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12), ("GH200", 989e12), ("A100", 312e12),
         ("L40S", 362e12), ("A10", 125e12), ("L4", 121e12)]
WIKI1M, EVAL_EVERY = 1_000_000, 125
# Resume on a GPU is not bitwise (docs/reliability.md, Determinism): use_deterministic_algorithms(
# warn_only=True) still runs the CUDA kernels that have no deterministic version (attention backward,
# float cumsum in Group-P's device path), so a resumed run parts from the uninterrupted one in the
# last bits. The check there: per-step losses within this max relative difference. On CPU: bitwise.
RESUME_LOSS_RTOL = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2}


def peak_flops(name: str) -> float | None:
    return next((v for k, v in PEAKS if k.lower() in name.lower()), None)


def terms_for(batch: int, teacher: bool) -> dict[str, dict]:
    """Each term alone (paper defaults; IS-CSE with a buffer of one batch, full after the first step, so its
    loss is active from the second step on) and all composed."""
    smoothing = {"buffer_size": batch, "neighbors": 4}
    out = {"simcse": {}, "gaussian_negatives": {"gaussian_negatives": {}},
           "instance_smoothing": {"instance_smoothing": smoothing}, "layer_negatives": {"layer_negatives": {}}}
    if teacher:
        out["distillation"] = {"distillation": {"shuffle": "group_p", "p": 0.1, "teachers": {"run": "simcse", "seeds": [0]}}}
    out["all"] = {k: v for d in out.values() for k, v in d.items()}
    return out


# ----------------------------------------------------------------------------- trainer helpers


def make_cfg(shape: dict, batch: int, steps: int, precision: str, compile_: bool = False,
             objectives: dict | None = None, dropout: float | None = None, seed: int = 42):
    from csebench.objectives import validate_objectives

    bench.BACKBONE["name"] = "tiny"  # a random-BERT backbone entry; its shape is replaced below
    cfg = bench._bench_config(seed, steps, precision=precision, compile_=compile_)
    b = cfg.backbone
    b.model, b.pooler, b.tokenizer, b.random_config = "random", "cls", "packaged:minilm", dict(shape)
    t = cfg.training
    t.batch_size, t.dropout = batch, dropout
    cfg.objectives = validate_objectives(objectives or {}, "gpu benchmark", t)
    return cfg


class Ctx:
    def __init__(self, a, device: str):
        self.a, self.device = a, device
        self.cache = tempfile.mkdtemp(prefix="csebench-gpu-")
        bench.BACKBONE["name"] = "tiny"  # teacher caches of the tiny width (DistillCSE uses only their cosines)
        self.corpus = bench.method_corpus(self.cache, a.corpus_rows)
        self.senteval = bench.senteval_dir()  # (parses params.yaml: once)
        d = bench.distill_setups(self.corpus, self.cache)
        self.teacher = None if isinstance(d, str) else d["teacher_cache"][d["pair"][0]]

    def trainer(self, cfg, out: str | Path):
        import torch

        from csebench.training import trainer as T

        keep = T.pick_device
        if self.device == "cpu":  # the CPU side of the device-vs-CPU comparison
            T.pick_device = lambda: torch.device("cpu")
        try:
            teacher = self.teacher if "distillation" in cfg.objectives else None
            tr = T.Trainer(cfg, self.corpus, self.senteval, out, cache_dir=self.cache, show_progress=False,
                           teacher_cache=teacher)
        finally:
            T.pick_device = keep
        bench._prefill_smoothing(tr)  # IS-CSE's loss active from the first step
        return tr


def sync(device) -> None:
    import torch

    if getattr(device, "type", device) == "cuda":
        torch.cuda.synchronize()


def advance(tr, n: int, like_run: bool = False) -> list[float]:
    """n optimizer steps of Trainer.run's loop (no dev evaluation); the losses read back. Every
    step's loss by default (the correctness checks compare them); with ``like_run`` only where
    Trainer.run reads them (log steps, ...), so a timing sees the loop's host waits and no more."""
    return tr.step_losses(n, like_run=like_run, past_the_end=True)


def free(*objs) -> None:
    import torch

    for o in objs:
        del o
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def fresh_compile_state() -> None:
    """Forget what torch.compile compiled for earlier rows. Every Trainer compiles the same forward
    code again (another precision, other terms: new guards); past dynamo's recompile limit a later
    "compile" row would silently run uncompiled."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


def graphs_compiled() -> int:
    """Graphs torch.compile compiled since fresh_compile_state (0: the row ran uncompiled)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def rel_diff(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=float("nan"))


# ----------------------------------------------------------------------------- a. correctness


def section_correctness(c: Ctx) -> dict:
    import torch

    a = c.a
    cuda = c.device == "cuda"
    shape = TINY if a.tiny else SHAPES["bert-base"]
    terms = terms_for(a.corr_batch, c.teacher is not None)
    precisions = ["fp32", "bf16", "fp16"]
    if a.tiny:  # smoke test: each term once in fp32, all terms composed in every precision
        terms_grid = [(n, p) for n in terms for p in precisions if p == "fp32" or n == "all"]
    else:
        terms_grid = [(n, p) for n in terms for p in precisions]
    compiles = [False, True] if (cuda and not a.no_compile) else [False]
    print(f"[a] correctness: {len(terms)} objective sets x {precisions} x compile {compiles}", flush=True)
    grid = []
    for name, precision in terms_grid:
        objectives = terms[name]
        if True:
            for comp in compiles:
                row = {"terms": name, "precision": precision, "compile": comp}
                if precision == "fp16" and not cuda:
                    row["note"] = "n/a: fp16 autocast + GradScaler is CUDA only (CPU runs it as fp32)"
                    grid.append(row)
                    continue
                with tempfile.TemporaryDirectory() as tmp:
                    try:
                        fresh_compile_state()
                        tr = c.trainer(make_cfg(shape, a.corr_batch, a.corr_steps, precision, comp, objectives), tmp)
                        row["amp"] = str(tr.amp_dtype).replace("torch.", "") if tr.amp_dtype else "fp32"
                        row["scaler"] = tr.scaler is not None
                        row["losses"] = advance(tr, a.corr_steps)
                        row["finite"] = all(math.isfinite(x) for x in row["losses"])
                        row["graphs"] = graphs_compiled()
                        row["compiled"] = row["graphs"] > 0  # compile asked for and not done: a failed row
                        free(tr)
                    except Exception as exc:  # noqa: BLE001  (recorded, the grid goes on)
                        row["finite"], row["error"] = False, f"{exc.__class__.__name__}: {str(exc)[:300]}"
                        traceback.print_exc()
                grid.append(row)
                print(f"  {row.get('terms')} {precision} compile={comp}: finite={row.get('finite')} "
                      f"compiled={row.get('compiled')} "
                      f"{row.get('note') or row.get('error') or ''}", flush=True)

    resume = []
    for precision in (["fp32", "bf16", "fp16"] if cuda else ["fp32"] if a.tiny else ["fp32", "bf16"]):
        n, k = a.corr_steps * 2, a.corr_steps
        objectives = terms["all"]
        with tempfile.TemporaryDirectory() as tmp:
            cfg = make_cfg(shape, a.corr_batch, n, precision, False, objectives)
            ref = c.trainer(cfg, Path(tmp) / "ref")
            want = advance(ref, n)
            want_w = {k_: v.detach().float().cpu() for k_, v in ref.encoder.state_dict().items()}
            free(ref)
            first = c.trainer(cfg, Path(tmp) / "cut")
            (Path(tmp) / "cut").mkdir(exist_ok=True)
            got = advance(first, k)
            first.save_checkpoint()
            free(first)
            second = c.trainer(cfg, Path(tmp) / "cut")
            resumed = second.maybe_resume()
            got += advance(second, n - k)
            got_w = {k_: v.detach().float().cpu() for k_, v in second.encoder.state_dict().items()}
            free(second)
        wdiff = max(float((got_w[k_] - want_w[k_]).abs().max()) for k_ in want_w)
        bitwise, loss_diff = got == want and wdiff == 0.0, rel_diff(got, want)
        tol = RESUME_LOSS_RTOL[precision] if cuda else 0.0
        resume.append({"precision": precision, "steps": n, "cut_at": k, "resumed": resumed,
                       "loss_max_rel_diff": loss_diff, "weights_max_abs_diff": wdiff, "bitwise": bitwise,
                       "loss_rtol": tol, "ok": resumed and (bitwise or (cuda and loss_diff <= tol))})
        print(f"  resume {precision}: {resume[-1]}", flush=True)

    # device vs CPU, fp32, dropout off; GS-InfoNCE and DistillCSE draw from device generators
    # (CUDA Philox vs CPU Mersenne Twister), so their draws, and losses, differ by design: left out
    curve = []
    for name in (("deterministic terms",) if a.tiny else ("simcse", "deterministic terms")):
        objectives = {} if name == "simcse" else {**terms["layer_negatives"], **terms["instance_smoothing"]}
        cfg = make_cfg(shape, a.corr_batch, a.corr_steps, "fp32", False, objectives, dropout=0.0)
        runs = {}
        for dev in (c.device, "cpu"):
            with tempfile.TemporaryDirectory() as tmp:
                saved, c.device = c.device, dev
                try:
                    tr = c.trainer(cfg, tmp)
                finally:
                    c.device = saved
                runs[dev] = advance(tr, a.corr_steps)
                free(tr)
        diff = rel_diff(runs[c.device], runs["cpu"])
        curve.append({"terms": name, "device": runs[c.device], "cpu": runs["cpu"], "max_rel_diff": diff,
                      "ok": diff <= 1e-4, "same_device": c.device == "cpu"})
        print(f"  {c.device} vs cpu ({name}): max rel diff {diff:.2e}", flush=True)
    return {"grid": grid, "resume": resume, "curve": curve, "shape": "tiny" if a.tiny else "bert-base",
            "batch": a.corr_batch, "steps": a.corr_steps, "torch_version": torch.__version__}


# ----------------------------------------------------------------------------- b. training throughput


def padded_tokens(tr, batches) -> list[int]:
    lens = tr.tokens.lengths()
    return [2 * len(b) * int(lens[b].max()) for b in batches]  # both views, dynamic padding


def train_ours(c: Ctx, shape: dict, batch: int, precision: str) -> dict:
    from csebench.training.trainer import data_order

    a = c.a
    with tempfile.TemporaryDirectory() as tmp:
        tr = c.trainer(make_cfg(shape, batch, a.warmup + a.steps, precision), tmp)
        params = sum(p.numel() for p in tr.encoder.parameters())
        advance(tr, a.warmup)
        sync(tr.device)
        t0 = time.perf_counter()
        advance(tr, a.steps, like_run=True)  # no wait for the GPU per step: one at the end
        sync(tr.device)
        total = time.perf_counter() - t0
        batches = data_order(len(tr.tokens), batch, tr.cfg.seed, 0)[a.warmup : a.warmup + a.steps]
        toks = padded_tokens(tr, batches)
        sync(tr.device)
        t0 = time.perf_counter()
        dev = tr.dev(tr.encoder)
        sync(tr.device)
        dev_s = time.perf_counter() - t0
        amp = str(tr.amp_dtype).replace("torch.", "") if tr.amp_dtype else "fp32"
        model_dir = Path(c.cache) / f"random-{shape['num_hidden_layers']}x{shape['hidden_size']}"
        if not model_dir.is_dir():  # the same random weights for the reference
            tr.encoder.backbone.save_pretrained(model_dir)
            tr.encoder.tokenizer.save_pretrained(model_dir)
        free(tr)
    return {"sps": batch * a.steps / total, "mean_step_s": total / a.steps,
            "tokens_per_s": sum(toks) / total, "params": params, "dev_s": dev_s, "dev": dev, "amp": amp,
            "model_dir": str(model_dir)}


def train_st(c: Ctx, model_dir: str, batch: int, bf16: bool) -> dict:
    """sentence-transformers' unsupervised SimCSE recipe on the same weights, sentences and batches."""
    import torch
    from datasets import Dataset
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments, losses, models)
    from transformers import TrainerCallback

    from csebench.core.corpus import read_corpus
    from csebench.training.trainer import data_order

    a = c.a
    n = a.warmup + a.steps
    sentences = read_corpus(c.corpus)
    ordered = [sentences[i] for b in data_order(len(sentences), batch, 42, 0)[:n] for i in b]
    torch.manual_seed(42)
    word = models.Transformer(model_dir, max_seq_length=bench.MAX_LEN)
    model = SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), pooling_mode="cls")],
                                device=c.device)
    first = max(a.warmup, 1)  # timed: the steps after this one, as ours (no wait for the GPU in between)
    marks: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step in (first, n):
                sync(c.device)
                marks.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=batch, max_steps=n, learning_rate=bench.LR, warmup_steps=0,
            weight_decay=0.0, max_grad_norm=1.0, seed=42, batch_sampler=bench.in_order_sampler(),
            save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True,
            use_cpu=c.device == "cpu", bf16=bf16, dataloader_drop_last=True)
        SentenceTransformerTrainer(model=model, args=args, loss=losses.MultipleNegativesRankingLoss(model, scale=1.0 / bench.TEMPERATURE),
                                   train_dataset=Dataset.from_dict({"anchor": ordered, "positive": ordered}),
                                   callbacks=[Clock()]).train()
    total = marks[-1] - marks[0]
    free(model)
    return {"sps": batch * (n - first) / total, "mean_step_s": total / (n - first), "optim": str(args.optim)}


def section_training(c: Ctx) -> dict:
    a = c.a
    peak = peak_flops(c.name) if c.device == "cuda" else None
    precision = "bf16" if c.device == "cuda" else "fp32"
    setups = [("tiny", TINY, a.tiny_batch)] if a.tiny else [("bert-base", SHAPES["bert-base"], 64),
                                                             ("roberta-large", SHAPES["roberta-large"], 512)]
    rows = []
    for label, shape, batch in setups:
        print(f"[b] training throughput: {label}, batch {batch}, {precision}", flush=True)
        ours = train_ours(c, shape, batch, precision)
        st = None
        if a.st:
            try:
                st = train_st(c, ours["model_dir"], batch, bf16=precision == "bf16")
            except Exception as exc:  # noqa: BLE001
                st = {"error": f"{exc.__class__.__name__}: {str(exc)[:300]}"}
                traceback.print_exc()
        mfu = 6 * ours["params"] * ours["tokens_per_s"] / peak if peak else None
        steps = WIKI1M // batch
        epoch_s = steps * ours["mean_step_s"] + (steps // EVAL_EVERY) * ours["dev_s"]
        row = {"model": label, "batch": batch, "precision": precision, "ours": ours, "st": st, "mfu": mfu,
               "peak": peak, "epoch_s": epoch_s, "ratio": (ours["sps"] / st["sps"]) if st and "sps" in st else None}
        rows.append(row)
        print(f"  ours {ours['sps']:.1f} sent/s, st {st and st.get('sps')}, mfu {mfu}, epoch {epoch_s / 60:.1f} min", flush=True)
    return {"rows": rows}


# ----------------------------------------------------------------------------- c. evaluation throughput


def section_eval(c: Ctx) -> dict:
    import torch

    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder
    from csebench.evaluation.sts import PairSet, evaluate_sts

    a = c.a
    shape = TINY if a.tiny else SHAPES["bert-base"]
    sets = bench._sts_pairsets()
    if a.eval_pairs:
        sets = {t: PairSet(p.sent1[: a.eval_pairs], p.sent2[: a.eval_pairs], p.scores[: a.eval_pairs],
                           p.groups[: a.eval_pairs]) for t, p in sets.items()}
    enc = build_encoder(BackboneConfig(model="random", pooler="avg", tokenizer="packaged:minilm",
                                       random_config=dict(shape)), seed=0).to(c.device)
    model_dir = Path(c.cache) / "eval-model"
    enc.backbone.save_pretrained(model_dir)
    enc.tokenizer.save_pretrained(model_dir)
    out = {"pairs_per_task": a.eval_pairs or "all", "shape": "tiny" if a.tiny else "bert-base", "batch": a.eval_batch}
    st_model = None
    if a.st:
        from sentence_transformers import SentenceTransformer, models

        word = models.Transformer(str(model_dir), max_seq_length=512)
        st_model = SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")],
                                       device=c.device)
    for precision in ("bf16", "fp32"):
        print(f"[c] STS evaluation, {precision}", flush=True)
        encode = lambda s: enc.encode(s, batch_size=a.eval_batch, precision=precision)  # noqa: E731
        encode(sets["STS12"].sent1[:64])
        sync(c.device)
        t0 = time.perf_counter()
        ours = evaluate_sts(encode, None, pairsets=sets)["tasks"]
        sync(c.device)
        row = {"ours_s": time.perf_counter() - t0, "ours": ours}
        if st_model is not None:
            from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

            amp = torch.autocast(c.device, dtype=torch.bfloat16, enabled=precision == "bf16")
            with amp:
                st_model.encode(sets["STS12"].sent1[:64], batch_size=a.eval_batch)
                sync(c.device)
                t0 = time.perf_counter()
                st = {}
                for task, ps in sets.items():
                    ev = EmbeddingSimilarityEvaluator(ps.sent1, ps.sent2, list(ps.scores), batch_size=a.eval_batch,
                                                      main_similarity="cosine", write_csv=False, name=task)
                    st[task] = 100.0 * float(ev(st_model)[f"{task}_spearman_cosine"])
                sync(c.device)
            row.update(st_s=time.perf_counter() - t0, st=st)
            row["ratio"] = row["st_s"] / row["ours_s"]
            row["max_abs_spearman_diff"] = max(abs(ours[t] - st[t]) for t in ours)
        out[precision] = row
    free(enc, st_model)
    return out


# ----------------------------------------------------------------------------- d. Group-P


def section_group_p(c: Ctx) -> dict:
    from csebench.objectives.distillation import group_p_shuffle

    print(f"[d] Group-P shuffling on {c.device}", flush=True)
    sizes = (64,) if c.a.tiny else (64, 512)
    return {"rows": bench.time_group_p(group_p_shuffle, sizes, c.a.gp_reps, c.device)}


# ----------------------------------------------------------------------------- report


def device_info(device: str) -> dict:
    import torch

    info = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "host": platform.node(), "cpu_threads": torch.get_num_threads()}
    if device == "cuda":
        info["name"] = torch.cuda.get_device_name(0)
        try:
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            info["driver"] = "unknown"
    else:
        info["name"], info["driver"] = "CPU (no CUDA device)", "n/a"
    return info


def f(x, nd=2, unit=""):
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}{unit}"


def pending_body() -> str:
    return ("## GPU (measured)\n\n"
            "**Not yet run on a GPU: no device was lent to this task.** No GPU figure exists yet; the estimate in "
            "the section \"GPU: expected cost of the paper suites\" above is a FLOP count, not a measurement. "
            "On any CUDA machine, `make bench-gpu` (`python benchmarks/gpu.py`) measures and replaces this section: "
            "correctness of every objective term in fp32 / bf16 / fp16 with and without torch.compile, checkpoint "
            "resume, device-vs-CPU loss curves; training throughput vs sentence-transformers with MFU and the "
            "projected wiki1m epoch time (BERT-base batch 64, RoBERTa-large batch 512); STS evaluation throughput; "
            "Group-P shuffling on the device. The CPU smoke test of the script (`python benchmarks/gpu.py --tiny`, "
            "tests/test_gpu_bench.py) checks only that it runs; its numbers are not GPU figures and are not shown here.\n")


def render(res: dict) -> str:
    info, a = res["info"], res["args"]
    L = []
    w = L.append
    w("## GPU (measured)\n")
    if info["device"] != "cuda":
        w("**NOT A GPU MEASUREMENT.** CPU smoke run of `benchmarks/gpu.py` (no CUDA device): it checks that the "
          "script runs; tiny shapes, few steps, none of these numbers says anything about GPU speed.\n")
    w("| | |\n|---|---|")
    w(f"| device | {info['name']} |\n| driver | {info['driver']} |\n| torch / CUDA | {info['torch']} / {info['cuda']} |")
    w(f"| command | `{res['command']}` |\n| date | {res['date']} (total {res['minutes']} min) |\n")
    cr = res.get("correctness")
    if cr:
        w(f"### a. Correctness ({cr['shape']} shape, random init, batch {cr['batch']}, {cr['steps']} steps through `Trainer.train_step`)\n")
        w("torch.compile rows start from a reset dynamo (`torch._dynamo.reset()`); *graphs* is what it "
          "compiled in the row (compile asked for and 0 graphs: the row ran uncompiled, **NO**).\n")
        w("| terms | precision | compile | graphs | autocast | GradScaler | finite losses | last loss |\n"
          "|---|---|---|---|---|---|---|---|")
        for r in cr["grid"]:
            if "note" in r:
                w(f"| {r['terms']} | {r['precision']} | {r['compile']} | | | | {r['note']} | |")
                continue
            last = f(r["losses"][-1], 4) if r.get("losses") else (r.get("error") or "")
            graphs = r.get("graphs", "")
            if r["compile"] and not r.get("compiled"):
                graphs = f"**NO** ({graphs})"
            w(f"| {r['terms']} | {r['precision']} | {r['compile']} | {graphs} | {r.get('amp', '')} | "
              f"{r.get('scaler', '')} | {'yes' if r.get('finite') else '**NO**'} | {last} |")
        w("\nCheckpoint resume (all terms; uninterrupted run vs. the same run saved at the cut and resumed in a new "
          "Trainer). On CPU it must be bitwise; on a GPU not (kernels without a deterministic version: "
          "docs/reliability.md, Determinism), so there the per-step losses must agree within the relative "
          "tolerance shown:\n")
        w("| precision | steps | cut at | resumed | max rel. loss diff | tolerance | max abs. weight diff | bitwise | ok |\n"
          "|---|---|---|---|---|---|---|---|---|")
        for r in cr["resume"]:
            w(f"| {r['precision']} | {r['steps']} | {r['cut_at']} | {r['resumed']} | {r['loss_max_rel_diff']:.2e} | "
              f"{r['loss_rtol']:.0e} | {r['weights_max_abs_diff']:.2e} | {r['bitwise']} | "
              f"{'yes' if r['ok'] else '**NO**'} |")
        w(f"\nfp32 loss curve, dropout off, {info['device']} vs CPU (target <= 1e-4 relative per step; GS-InfoNCE and "
          f"DistillCSE draw from device generators and are left out):\n")
        w("| terms | max rel. diff | within 1e-4 |\n|---|---|---|")
        for r in cr["curve"]:
            same = " (same device: a check of the code path only)" if r["same_device"] else ""
            w(f"| {r['terms']} | {r['max_rel_diff']:.2e} | {r['ok']}{same} |")
        w("")
    tr = res.get("training")
    if tr:
        w("### b. Training throughput (unsup-SimCSE)\n")
        w(f"Our Trainer vs sentence-transformers (MultipleNegativesRankingLoss, anchor = positive, CLS pooling, its "
          f"trainer), same random weights, sentences and batches, max length {bench.MAX_LEN}, {a['steps']} timed steps "
          f"after {a['warmup']} warm-up. MFU = 6 x parameters x padded tokens/s (both views) / bf16 dense peak "
          f"({f(tr['rows'][0]['peak'] / 1e12 if tr['rows'][0]['peak'] else None, 0)} TFLOP/s). Epoch = wiki1m "
          f"(1e6 sentences) at the mean step + STS-B dev every {EVAL_EVERY} steps. Both sides time the steps "
          f"with one wait for the GPU at the end (ours reads its losses back where `Trainer.run` does).\n")
        w("| model | batch | precision | ours sent/s | sentence-transformers sent/s | ratio | MFU | projected epoch |\n"
          "|---|---|---|---|---|---|---|---|")
        for r in tr["rows"]:
            st = r["st"] or {}
            w(f"| {r['model']} ({r['ours']['params'] / 1e6:.0f}M) | {r['batch']} | {r['precision']} | {f(r['ours']['sps'], 1)} | "
              f"{f(st.get('sps'), 1) if 'sps' in st else (st.get('error') or 'not run')} | {f(r['ratio'])} | "
              f"{f(100 * r['mfu'], 1, '%') if r['mfu'] else 'n/a'} | {f(r['epoch_s'] / 60, 1)} min |")
        w("")
    ev = res.get("eval")
    if ev:
        w(f"### c. STS evaluation (7 tasks, {ev['shape']} shape, {ev['pairs_per_task']} pairs per task, batch {ev['batch']})\n")
        w("| precision | ours (s) | sentence-transformers (s) | ratio | max abs. Spearman diff |\n|---|---|---|---|---|")
        for p in ("bf16", "fp32"):
            r = ev[p]
            w(f"| {p} | {f(r['ours_s'])} | {f(r.get('st_s'))} | {f(r.get('ratio'))} | {f(r.get('max_abs_spearman_diff'), 4)} |")
        w("")
    gp = res.get("group_p")
    if gp:
        w("### d. Group-P shuffling on the device (p = 0.1)\n")
        w("| batch | vectorized (ms) | per-row loop (ms) | speed-up |\n|---|---|---|---|")
        for r in gp["rows"]:
            w(f"| {r['batch']} | {r['fast_ms']:.3f} | {r['loop_ms']:.1f} | {r['ratio']:.0f}x |")
        w("")
    return "\n".join(L)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test: tiny model, few steps, no sentence-transformers")
    ap.add_argument("--pending", action="store_true", help="write the section as 'not yet measured' and stop")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--json", default=None, help="raw results (default benchmarks/gpu_results.json; --tiny: none)")
    ap.add_argument("--sections", default="correctness,training,eval,group_p")
    ap.add_argument("--st", action=argparse.BooleanOptionalAction, default=None,
                    help="run the sentence-transformers side (default: on, off with --tiny)")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out of the correctness grid")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    a = ap.parse_args(argv)
    out = Path(a.out)
    if a.pending:
        bench.put_gpu_section(out, pending_body())
        print(f"wrote the pending GPU section of {out}")
        return {}
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not a.tiny:
        ap.error("no CUDA device: the full benchmark needs a GPU (use --tiny for the CPU smoke test)")
    a.st = (not a.tiny) if a.st is None else a.st
    a.steps = a.steps or (2 if a.tiny else 20)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.tiny else 5)
    a.corr_steps, a.corr_batch = (2, 8) if a.tiny else (4, 64)
    a.tiny_batch = 8
    a.corpus_rows = 512 if a.tiny else 16384  # >= (warm-up + timed steps) x 512: no epoch wrap in the timing
    a.eval_pairs, a.eval_batch = (30 if a.tiny else 0), 128
    a.gp_reps = 1 if a.tiny else 3
    if a.tiny:  # tiny ops: a second thread only waits (and stalls whenever the shared CPU deschedules it)
        torch.set_num_threads(1)
    started = time.time()
    c = Ctx(a, device)
    c.name = device_info(device)["name"]
    res = {"info": device_info(device),
           "command": "python benchmarks/gpu.py" + (" " + " ".join(sys.argv[1:] if argv is None else argv)).rstrip(),
           "args": {"steps": a.steps, "warmup": a.warmup, "tiny": a.tiny, "st": a.st}}
    from csebench.core.startup import frozen_imports

    try:
        with frozen_imports("csebench.training.trainer"):  # every section frees its models with a full collection
            for name, fn in (("correctness", section_correctness), ("training", section_training),
                             ("eval", section_eval), ("group_p", section_group_p)):
                if name in a.sections.split(","):
                    t0 = time.time()
                    res[name] = fn(c)
                    print(f"  ({name}: {time.time() - t0:.1f} s)", flush=True)
    finally:
        shutil.rmtree(c.cache, ignore_errors=True)
    res["date"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    res["minutes"] = round((time.time() - started) / 60, 1)
    js = a.json or (None if a.tiny else str(ROOT / "benchmarks" / "gpu_results.json"))
    if js:
        Path(js).write_text(json.dumps(res, indent=2, default=str))
    bench.put_gpu_section(out, render(res))
    print(f"wrote the GPU section of {out}")
    return res


if __name__ == "__main__":
    main()

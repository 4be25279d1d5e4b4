"""The GPU check that works on its first call: run by benchmarks/device.sh (docs/gpu.md).

On a machine with its own python3 (torch, transformers, sentence-transformers preinstalled), no network and
nothing installed: the checkout's src/ on PYTHONPATH, the git-ignored benchmarks/device-bundle/ beside it
(tokenizers, a corpus sample, the STS files: benchmarks/device_bundle.py writes it). Models are the real
classes (BertModel, RobertaModel) of the published shapes (csebench.model.architectures) with random weights.

Sections, in priority order, within --budget seconds (a section that cannot start in time is skipped, a grid
stops where the budget ends); gpu_results.json and gpu.md are rewritten in --out after EACH section, so a
timeout keeps what was measured:
  1 correctness: every objective term of params.yaml's methods (the zoo's included) and the core terms composed,
    bf16 / fp16 (GradScaler) / fp32, BERT-base and RoBERTa-base: every loss finite, each term's losses apart from
    SimCSE's (a term that never acted fails its row); a run stopped after its checkpoint and resumed matches the
    uninterrupted one within RESUME_LOSS_RTOL (bitwise on CPU)
  2 BERT-base batch 64: training sentences/s, ours (packed, and on the padded batch) vs sentence-transformers'
    unsupervised SimCSE recipe (MultipleNegativesRankingLoss, anchor = positive, AdamW, the same autocast) and vs
    the hardware's anchor, benchmarks/plain_loop.py's plain step (padded per batch and to 32), same weights and batches
  3 RoBERTa-large batch 512, the real RobertaModel: sentences/s and MFU
  4 evaluation: the 7 STS tasks, ours in bf16 and fp32 vs sentence-transformers' EmbeddingSimilarityEvaluator
    (fp32); STS-B and SICK-R scores agree within 0.01
  5 Group-P shuffling on the device vs the per-row loop
  6 torch.compile: the BERT-base step compiled vs eager, and vs the plain loop compiled (padded to 32)
--tiny: the same sections on CPU at toy sizes (hidden 32, 2 layers), the rehearsal of this script here.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu  # noqa: E402  (peak FLOP/s, RESUME_LOSS_RTOL, the objective terms, the step loop)

SECTIONS = ("correctness", "training", "large", "eval", "group_p", "compile")
TINY_SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
MODELS = {"bert-base": "bert-base-uncased", "roberta-base": "roberta-base", "roberta-large": "roberta-large"}
TEMPERATURE, LR, MAX_LEN = 0.05, 3e-5, 32
TINY_CORPUS = 1024


class Run:
    def __init__(self, a):
        import torch

        self.a, self.t0 = a, time.time()
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.bundle = Path(a.bundle)
        self.corpus = self.bundle / "corpus.txt"
        self.senteval = self.bundle / "senteval" / "downstream"
        self.tmp = Path(tempfile.mkdtemp(prefix="csebench-device-"))
        if a.tiny:  # the CPU rehearsal reads a few batches: the teacher caches embed this sample, not 20,000 sentences
            lines = self.corpus.read_text(encoding="utf-8").splitlines(keepends=True)[:TINY_CORPUS]
            self.corpus = self.tmp / "corpus.txt"
            self.corpus.write_text("".join(lines), encoding="utf-8")
        self.out = Path(a.out)
        self.res: dict = {"sections": {}, "budget_s": a.budget, "tiny": a.tiny}

    def left(self) -> float:
        return self.a.budget - (time.time() - self.t0)

    def cfg(self, model: str, batch: int, steps: int, precision: str, objectives: dict | None = None,
            checkpoint_steps: int = 10**6, compile_: bool | str = False, dropout: float | None = None, log_steps: int = 1):
        """A RunConfig of the backbone ``model`` (a paper hub id, built by the rehearsal) without params.yaml.
        ``log_steps``: 1 where every loss is compared (correctness), the training default where steps are timed
        (a log read waits for the device)."""
        from csebench.study.params import BackboneConfig, DataConfig, SourceConfig, TrainingConfig
        from csebench.study.resolve import RunConfig
        from csebench.objectives import validate_objectives

        t = TrainingConfig(batch_size=batch, max_steps=steps, eval_steps=steps, log_steps=log_steps, checkpoint_steps=checkpoint_steps,
                           precision=precision, max_seq_length=MAX_LEN, learning_rate=LR, temperature=TEMPERATURE,
                           dev_max_pairs=64, eval_batch_size=128, compile=compile_, dropout=dropout)
        data = DataConfig(SourceConfig(path=str(self.corpus)), SourceConfig(path=str(self.senteval)))
        return RunConfig(suite="device", name=model, seed=42, method="device", method_label="device", backbone_name=model,
                         backbone=BackboneConfig(model=MODELS[model], pooler="cls"), data_name="device", data=data,
                         training=t, objectives=validate_objectives(objectives or {}, "device check", t),
                         paths={"data": str(self.tmp), "results": str(self.tmp)})

    def trainer(self, cfg, out, teacher=None):
        from csebench.objectives import term_class
        from csebench.training.trainer import Trainer

        taught = any("teacher_cache" in term_class(k).extra_init_args for k in cfg.objectives)  # DistillCSE, DCLR, RankCSE
        return Trainer(cfg, self.corpus, self.senteval, out, cache_dir=self.tmp / "cache", show_progress=False,
                       teacher_cache=[teacher] if teacher and taught else None)

    def write(self) -> None:
        self.res["seconds"] = round(time.time() - self.t0, 1)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu_results.json").write_text(json.dumps(self.res, indent=2, default=str))
        (self.out / "gpu.md").write_text(render(self.res))


def versions() -> dict:
    import torch
    import transformers

    try:
        import sentence_transformers as st
        st_version = st.__version__
    except ImportError:
        st_version = None
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "CPU"
    return {"device": name, "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "sentence_transformers": st_version, "cuda": torch.version.cuda,
            "peak_bf16_flops": gpu.peak_flops(name) if torch.cuda.is_available() else None}


def teacher_cache(r: Run, model: str) -> str:
    """A frozen teacher's corpus cache (DistillCSE), from the untrained backbone (csebench teacher-cache's code)."""
    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import build_encoder
    from csebench.training.teachers import embed_corpus, save_teacher_cache

    out = r.tmp / f"teacher-{model}.npy"
    if not out.is_file():
        from csebench.model.tokens import tokenizer_fingerprint
        from csebench.training.teachers import corpus_sha256

        enc = build_encoder(BackboneConfig(model=MODELS[model], pooler="cls")).to(r.device)
        emb = embed_corpus(enc, r.corpus, MAX_LEN, device=r.device)
        save_teacher_cache(out, emb, {"format": 1, "model": model, "teacher_run": None, "pooler": "cls", "rows": emb.shape[0],
                                      "dim": emb.shape[1], "dtype": "float32", "normalized": True, "max_seq_length": MAX_LEN,
                                      "tokenizer": tokenizer_fingerprint(enc.tokenizer), "corpus": str(r.corpus),
                                      "corpus_sha256": corpus_sha256(r.corpus)})
        gpu.free(enc)
    return str(out)


# ----------------------------------------------------------------------------- 1 correctness


def grid_terms(batch: int, steps: int) -> dict[str, dict]:
    """The correctness grid's rows: SimCSE; each core term alone (gpu.terms_for: GS-InfoNCE, IS-CSE with a buffer of
    one batch, SSCL, DistillCSE); every other term of params.yaml's methods with the settings of the method that uses
    it with the fewest terms, that method's other terms beside it (SNCSE's negation rides on PromptBERT's template),
    its teachers the device's SimCSE teacher and what it waits for at the rehearsal's scale; the core terms composed."""
    import copy
    import dataclasses

    from csebench.objectives import at_rehearsal_scale, term_class
    from csebench.study.params import load_params

    core = gpu.terms_for(batch, teacher=True)
    rows = {k: v for k, v in core.items() if k != "all"}
    smallest: dict[str, dict] = {}
    for method in (load_params(HERE.parent / "params.yaml").get("methods") or {}).values():
        objectives = (method or {}).get("objectives") or {}
        for key in objectives:
            if key not in rows and (key not in smallest or len(objectives) < len(smallest[key])):
                smallest[key] = objectives
    for key, objectives in smallest.items():
        objectives = copy.deepcopy(objectives)
        for k, settings in objectives.items():
            fields = {f.name for f in dataclasses.fields(term_class(k).Settings)}
            if "teachers" in fields:
                settings = objectives[k] = dict(settings or {}, teachers={"run": "simcse", "seeds": [0]})
            if "teacher_representation" in fields:
                # the device's teacher is the untrained backbone, which saved no head: its one cache is the eval one
                objectives[k] = dict(objectives[k] or {}, teacher_representation="eval")
        for k, change in at_rehearsal_scale(objectives, batch, steps).items():
            objectives[k] = {**(objectives[k] or {}), **change}
        rows[key] = objectives
    rows["all"] = core["all"]
    return rows


def section_correctness(r: Run) -> dict:
    from csebench.core.io import read_json
    from csebench.workflow.rehearse import _stop_after_checkpoint

    batch, steps = (8, 2) if r.a.tiny else (64, 4)
    cuda = r.device == "cuda"
    rows, complete = [], True
    raw: dict[tuple[str, str, str], list[float]] = {}  # the losses as computed: the rows keep them to 6 decimals
    for model in ("bert-base", "roberta-base"):
        teacher = teacher_cache(r, model)
        terms = grid_terms(batch, steps)
        for precision in ("bf16", "fp16", "fp32"):
            for name, objectives in terms.items():
                if r.a.tiny and name != "all" and precision != "fp32":  # --tiny: each term once, all of them in each precision
                    continue
                if r.a.terms and name not in r.a.terms.split(","):
                    continue
                if r.left() < 10:
                    complete = False
                    break
                out = r.tmp / f"c-{model}-{precision}-{name}"
                row = {"model": model, "precision": precision, "terms": name}
                try:
                    cfg = r.cfg(model, batch, steps, precision, objectives, checkpoint_steps=1 if name == "all" else 10**6)
                    tr = r.trainer(cfg, out / "whole", teacher)
                    row["amp"] = str(tr.amp_dtype).replace("torch.", "") if tr.amp_dtype else "fp32"
                    row["scaler"] = tr.scaler is not None
                    losses = gpu.advance(tr, steps)
                    gpu.free(tr)
                    raw[(model, precision, name)] = losses
                    row["losses"] = [round(x, 6) for x in losses]
                    row["finite"] = all(math.isfinite(x) for x in losses)
                    if name == "all":  # checkpoint at step 1, a new Trainer resumes; per-step losses compared
                        _stop_after_checkpoint(cfg, str(r.corpus), str(r.senteval), out / "resumed", r.tmp / "cache",
                                               [teacher] if "distillation" in cfg.objectives else [])
                        tr = r.trainer(cfg, out / "resumed", teacher)
                        tr.run()
                        gpu.free(tr)
                        curve = (out / "resumed" / "train_curve.csv").read_text().splitlines()
                        keys = curve[0].split(",")
                        resumed = [float(line.split(",")[keys.index("loss")]) for line in curve[1:]]
                        tol = gpu.RESUME_LOSS_RTOL[row["amp"] if row["amp"] in gpu.RESUME_LOSS_RTOL else "fp32"] if cuda else 0.0
                        diff = gpu.rel_diff(resumed, [round(x, 6) for x in losses])
                        row.update(resume_rel_diff=diff, resume_tol=tol,
                                   resumed_from=read_json(out / "resumed" / "train_timing.json")["resumed_from_step"],
                                   resume_ok=diff <= max(tol, 1e-6) and len(resumed) == steps)
                    # a term that adds nothing in these steps was not checked: its losses, as computed, must part from
                    # SimCSE's at some step. Not only from the second on: GS-InfoNCE's Gaussian negatives move a tiny
                    # random model's loss by 1e-5 at the first step and not at all in float32 at the second, once
                    # the embeddings sit closer together than the noise (IS-CSE's loss starts at the second)
                    plain = raw.get((model, precision, "simcse"))
                    if plain is not None and name != "simcse":
                        row["differs_from_simcse"] = losses != plain
                    row["ok"] = row["finite"] and row.get("resume_ok", True) and row.get("differs_from_simcse", True)
                except Exception as exc:  # noqa: BLE001
                    row.update(ok=False, error=f"{exc.__class__.__name__}: {str(exc)[:300]}")
                    traceback.print_exc()
                rows.append(row)
                print(f"  {model} {precision:<4} {name:<20} {'ok' if row['ok'] else 'FAILED'} "
                      f"{row.get('error', '')}", flush=True)
    return {"rows": rows, "complete": complete, "ok": all(x["ok"] for x in rows)}


# ----------------------------------------------------------------------------- 2, 3 training throughput


def padded_tokens(tr, batches) -> int:
    lens = tr.tokens.lengths()
    return sum(2 * len(b) * int(lens[b].max()) for b in batches)


def time_ours(r: Run, model: str, batch: int, precision: str, steps: int, warmup: int, compile_: bool | str = False,
              packed: bool = True) -> dict:
    """csebench's training step as Trainer.run makes it (logs read every training.log_steps, its default);
    ``packed=False``: the dense layers on the padded batch (CSEBENCH_PACKED=0), as the library's forward runs them."""
    import os

    from csebench.study.params import TrainingConfig
    from csebench.training.trainer import data_order

    before = os.environ.get("CSEBENCH_PACKED")
    os.environ["CSEBENCH_PACKED"] = "1" if packed else "0"
    try:
        tr = r.trainer(r.cfg(model, batch, warmup + steps + 1, precision, compile_=compile_,
                             log_steps=TrainingConfig().log_steps), r.tmp / f"t-{model}-{batch}")
        nonemb = sum(p.numel() for n, p in tr.encoder.backbone.named_parameters() if "embeddings" not in n)
        t0 = time.perf_counter()
        gpu.advance(tr, warmup, like_run=True)
        gpu.sync(tr.device)
        warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        gpu.advance(tr, steps, like_run=True)
        gpu.sync(tr.device)
        total = time.perf_counter() - t0
    finally:
        if before is None:
            os.environ.pop("CSEBENCH_PACKED", None)
        else:
            os.environ["CSEBENCH_PACKED"] = before
    toks = padded_tokens(tr, data_order(len(tr.tokens), batch, 42, 0)[warmup: warmup + steps])
    model_dir = r.tmp / f"weights-{model}"
    if not model_dir.is_dir():  # the same random weights for the references
        tr.encoder.backbone.save_pretrained(model_dir)
        tr.encoder.tokenizer.save_pretrained(model_dir)
    amp = str(tr.amp_dtype).replace("torch.", "") if tr.amp_dtype else "fp32"
    gpu.free(tr)
    return {"sps": batch * steps / total, "step_s": total / steps, "tokens_per_s": toks / total, "nonemb_params": nonemb,
            "amp": amp, "warmup_s": warm_s, "model_dir": str(model_dir), "packed": packed}


def time_plain(r: Run, model_dir: str, batch: int, amp: str, steps: int, warmup: int, fixed: bool = False,
               compile_: bool = False) -> dict:
    """The hardware's anchor: benchmarks/plain_loop.py's forty-line step on the same weights, sentences, batches,
    autocast and optimizer settings; each batch padded to its longest row or (``fixed``) to MAX_LEN."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    import plain_loop
    from csebench.core.corpus import read_corpus
    from csebench.training.trainer import data_order

    sentences = read_corpus(r.corpus)
    order = data_order(len(sentences), batch, 42, 0)[: warmup + steps]
    batches = plain_loop.device_batches(AutoTokenizer.from_pretrained(model_dir), sentences, order, MAX_LEN, r.device, fixed)
    model = plain_loop.PlainSimCSE(AutoModel.from_pretrained(model_dir, add_pooling_layer=False)).to(r.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    loop = plain_loop.PlainLoop(model, LR, TEMPERATURE, warmup + steps, amp_dtype=dtype, compile_=compile_)
    t0 = time.perf_counter()
    for b in batches[:warmup]:
        loop.step(*b)
    gpu.sync(r.device)
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in batches[warmup:]:
        loss = loop.step(*b)
    float(loss)  # the one read a plain loop makes: the last loss
    gpu.sync(r.device)
    total = time.perf_counter() - t0
    gpu.free(model, loop)
    return {"sps": batch * steps / total, "step_s": total / steps, "warmup_s": warm_s, "fixed": fixed, "compiled": compile_}


def time_st(r: Run, model_dir: str, batch: int, amp: str, steps: int, warmup: int) -> dict:
    """sentence-transformers' unsupervised SimCSE recipe: its model (Transformer + CLS pooling), its
    MultipleNegativesRankingLoss with anchor = positive (scale 1/tau), AdamW, the same autocast and batches."""
    import torch
    from sentence_transformers import SentenceTransformer, losses, models

    from csebench.core.corpus import read_corpus
    from csebench.training.trainer import data_order

    sentences = read_corpus(r.corpus)
    word = models.Transformer(model_dir, max_seq_length=MAX_LEN)
    st = SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), pooling_mode="cls")],
                             device=r.device)
    loss = losses.MultipleNegativesRankingLoss(st, scale=1.0 / TEMPERATURE)
    opt = torch.optim.AdamW(st.parameters(), lr=LR, fused=r.device == "cuda")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    st.train()

    def step(b):
        batch_s = [sentences[i] for i in b]
        prep = getattr(st, "preprocess", None) or st.tokenize  # sentence-transformers 6: preprocess
        feats = [{k: v.to(r.device) for k, v in prep(batch_s).items() if hasattr(v, "to")} for _ in range(2)]
        with torch.autocast(r.device, dtype=dtype, enabled=dtype is not None):
            value = loss(feats, None)
        opt.zero_grad(set_to_none=True)
        (scaler.scale(value) if scaler else value).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    order = data_order(len(sentences), batch, 42, 0)
    for b in order[:warmup]:
        step(b)
    gpu.sync(r.device)
    t0 = time.perf_counter()
    for b in order[warmup: warmup + steps]:
        step(b)
    gpu.sync(r.device)
    total = time.perf_counter() - t0
    gpu.free(st, opt)
    return {"sps": batch * steps / total, "step_s": total / steps}


def section_training(r: Run) -> dict:
    """BERT-base at the papers' batch: csebench's step (packed, and on the padded batch), sentence-transformers'
    recipe, and the plain loop padded per batch and to MAX_LEN, all on the same weights and batches."""
    batch, steps, warmup = (8, 3, 1) if r.a.tiny else (64, 30, 5)
    amp = "bf16" if r.device == "cuda" else "fp32"
    # two rounds, the second reported: the GPU's attention kernels build a plan for each new shape (each
    # padded length) the first time they see it, and on the H200 that first round cost the side measured
    # first 0.18 s a step against 0.06 s warm: whichever ran first lost. Every side sees the same batches.
    rounds = []
    for _ in range(2):
        ours = time_ours(r, "bert-base", batch, amp, steps, warmup)
        side = {"ours_unpacked": time_ours(r, "bert-base", batch, amp, steps, warmup, packed=False)}
        for name, fn in (("st", lambda: time_st(r, ours["model_dir"], batch, ours["amp"], steps, warmup)),
                         ("plain", lambda: time_plain(r, ours["model_dir"], batch, ours["amp"], steps, warmup)),
                         ("plain_fixed", lambda: time_plain(r, ours["model_dir"], batch, ours["amp"], steps, warmup, fixed=True))):
            try:
                side[name] = fn()
            except Exception as exc:  # noqa: BLE001
                side[name] = {"error": f"{exc.__class__.__name__}: {str(exc)[:300]}"}
                traceback.print_exc()
        rounds.append((ours, side))
    (cold_ours, cold), (ours, side) = rounds
    sps = lambda name: side[name].get("sps")  # noqa: E731
    best_plain = max((x for x in (sps("plain"), sps("plain_fixed")) if x), default=None)
    ratios = {"vs_st": ours["sps"] / sps("st") if sps("st") else None,
              "vs_plain": ours["sps"] / sps("plain") if sps("plain") else None,
              "vs_plain_fixed": ours["sps"] / sps("plain_fixed") if sps("plain_fixed") else None,
              "vs_plain_best": ours["sps"] / best_plain if best_plain else None,
              "unpacked_vs_plain_best": side["ours_unpacked"]["sps"] / best_plain if best_plain else None}
    print(f"  BERT-base batch {batch}, sentences/s: ours {ours['sps']:.1f} (padded batch: {side['ours_unpacked']['sps']:.1f}), "
          f"sentence-transformers {sps('st')}, plain loop {sps('plain')} (padded to {MAX_LEN}: {sps('plain_fixed')}); "
          f"ours / best plain {ratios['vs_plain_best']}")
    return {"batch": batch, "ours": ours, **side, "ratio": ratios["vs_st"], "ratios": ratios,
            "first_round": {"ours_sps": cold_ours["sps"], "st_sps": cold["st"].get("sps"), "plain_sps": cold["plain"].get("sps"),
                            "plain_fixed_sps": cold["plain_fixed"].get("sps")}}


def section_large(r: Run) -> dict:
    batch, steps, warmup = (16, 2, 1) if r.a.tiny else (512, 8, 2)
    ours = time_ours(r, "roberta-large", batch, "bf16" if r.device == "cuda" else "fp32", steps, warmup)
    peak = versions()["peak_bf16_flops"]
    mfu = 6 * ours["nonemb_params"] * ours["tokens_per_s"] / peak if peak else None
    print(f"  RoBERTa-large batch {batch}: {ours['sps']:.1f} sent/s, MFU {mfu}")
    return {"batch": batch, "ours": ours, "mfu": mfu, "peak": peak}


# ----------------------------------------------------------------------------- 4 evaluation


def section_eval(r: Run) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer, models
    from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator

    from csebench.model.encoder import load_encoder
    from csebench.evaluation.sts import evaluate_sts, load_task

    model_dir = r.tmp / "weights-bert-base"
    if not model_dir.is_dir():
        time_ours(r, "bert-base", 8, "fp32", 1, 0)
    max_pairs = 40 if r.a.tiny else None
    enc = load_encoder(model_dir, pooler="avg").to(r.device)
    out = {"ours": {}}
    # an untimed pass first: the first encoding of each padded shape builds the attention kernels' plans
    evaluate_sts(lambda s: enc.encode(s, precision="bf16"), r.senteval, max_pairs=max_pairs)
    for precision in ("bf16", "fp32"):
        gpu.sync(r.device)
        t0 = time.perf_counter()
        res = evaluate_sts(lambda s, p=precision: enc.encode(s, precision=p), r.senteval, max_pairs=max_pairs)
        gpu.sync(r.device)
        out["ours"][precision] = {"seconds": time.perf_counter() - t0, "tasks": res["tasks"], "avg": res.get("avg")}
    gpu.free(enc)
    word = models.Transformer(str(model_dir), max_seq_length=512)
    st = SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")],
                             device=r.device)
    out["st"], agree = {}, {}
    from csebench.evaluation.sts import cap_pairs

    t_all = 0.0
    for task in ("STSBenchmark", "SICKRelatedness"):
        ps = cap_pairs(load_task(r.senteval, task), max_pairs, 1111)
        ev = EmbeddingSimilarityEvaluator(list(ps.sent1), list(ps.sent2), [float(x) for x in ps.scores], batch_size=128,
                                          show_progress_bar=False)
        gpu.sync(r.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            scores = ev(st)
        gpu.sync(r.device)
        t_all += time.perf_counter() - t0
        theirs = 100 * next(v for k, v in scores.items() if k.endswith("spearman_cosine"))
        ours = out["ours"]["fp32"]["tasks"][task]
        out["st"][task] = theirs
        agree[task] = abs(ours - theirs)
    out["st_seconds_2_tasks"] = t_all
    enc = load_encoder(model_dir, pooler="avg").to(r.device)  # ours on the same two tasks, the same precision
    gpu.sync(r.device)
    t0 = time.perf_counter()
    evaluate_sts(lambda s: enc.encode(s, precision="fp32"), r.senteval, tasks=["STSBenchmark", "SICKRelatedness"],
                 max_pairs=max_pairs)
    gpu.sync(r.device)
    out["ours_seconds_2_tasks"] = time.perf_counter() - t0
    gpu.free(enc)
    out["agree_within_0.01"] = all(d <= 0.01 for d in agree.values())
    out["abs_diff"] = agree
    gpu.free(st)
    print(f"  STS: ours bf16 {out['ours']['bf16']['seconds']:.1f} s, fp32 {out['ours']['fp32']['seconds']:.1f} s (7 tasks); "
          f"STS-B/SICK-R vs sentence-transformers |diff| {agree}; those two tasks: ours {out['ours_seconds_2_tasks']:.1f} s, "
          f"sentence-transformers {t_all:.1f} s")
    return out


# ----------------------------------------------------------------------------- 5 Group-P, 6 compile


def section_group_p(r: Run) -> dict:
    import run as bench

    from csebench.objectives.distillation import group_p_shuffle

    sizes = (16, 64) if r.a.tiny else (64, 512)
    rows = bench.time_group_p(group_p_shuffle, sizes, 1 if r.a.tiny else 3, r.device)
    print("  Group-P: " + ", ".join(f"batch {x['batch']}: {x['ratio']:.0f}x" for x in rows))
    return {"rows": rows}


def section_compile(r: Run) -> dict:
    """torch.compile: csebench's compiled step against its eager one and against the plain loop compiled (padded
    to MAX_LEN, its best case), BERT-base at the papers' batch."""
    batch, steps = (8, 2) if r.a.tiny else (64, 20)
    amp = "bf16" if r.device == "cuda" else "fp32"
    eager = time_ours(r, "bert-base", batch, amp, steps, 1)
    gpu.fresh_compile_state()
    import torch

    torch._logging.set_logs(recompiles=True)  # why a graph was compiled again, in the log
    # warm-up long enough for every padded width the timed steps meet (trainer.compile_width_multiple)
    compiled = time_ours(r, "bert-base", batch, amp, steps, 2 if r.a.tiny else 6, compile_=True)
    torch._logging.set_logs()
    graphs = gpu.graphs_compiled()
    graphed = None
    if r.device == "cuda":  # training.compile: reduce-overhead, CUDA graphs of each padded width too
        gpu.fresh_compile_state()
        try:
            graphed = time_ours(r, "bert-base", batch, amp, steps, 6, compile_="reduce-overhead")
        except Exception as exc:  # noqa: BLE001
            graphed = {"error": f"{exc.__class__.__name__}: {str(exc)[:300]}"}
            traceback.print_exc()
    gpu.fresh_compile_state()
    try:
        plain = time_plain(r, eager["model_dir"], batch, eager["amp"], steps, 2 if r.a.tiny else 6, fixed=True, compile_=True)
    except Exception as exc:  # noqa: BLE001
        plain = {"error": f"{exc.__class__.__name__}: {str(exc)[:300]}"}
        traceback.print_exc()
    vs_plain = compiled["sps"] / plain["sps"] if "sps" in plain else None
    print(f"  torch.compile: {compiled['sps']:.1f} vs eager {eager['sps']:.1f} sent/s ({graphs} graphs, "
          f"first steps {compiled['warmup_s']:.1f} s); plain loop compiled {plain.get('sps')}, ours / plain {vs_plain}")
    best = max([compiled] + ([graphed] if graphed and "sps" in graphed else []), key=lambda x: x["sps"])
    return {"eager": eager, "compiled": compiled, "graphs": graphs, "speedup": compiled["sps"] / eager["sps"],
            "reduce_overhead": graphed, "plain_compiled": plain, "vs_plain_compiled": vs_plain,
            "best_vs_plain_compiled": best["sps"] / plain["sps"] if "sps" in plain else None}


FUNCS = {"correctness": section_correctness, "training": section_training, "large": section_large,
         "eval": section_eval, "group_p": section_group_p, "compile": section_compile}
MIN_SECONDS = {"correctness": 30, "training": 30, "large": 40, "eval": 20, "group_p": 10, "compile": 60}


def _grid(sec: dict) -> list[str]:
    """The correctness grid: a row per term set, a column per backbone and precision, the last loss."""
    rows = sec["rows"]
    cols = list(dict.fromkeys((x["model"], x["precision"]) for x in rows))
    terms = list(dict.fromkeys(x["terms"] for x in rows))
    cell = {(x["terms"], x["model"], x["precision"]): x for x in rows}
    out = ["| terms | " + " | ".join(f"{m} {p}" for m, p in cols) + " |", "|---|" + "---:|" * len(cols)]
    for t in terms:
        vals = []
        for m, p in cols:
            x = cell.get((t, m, p))
            if x is None:
                vals.append("not run")
                continue
            mark = "" if x["ok"] else " FAILED"
            resumed = f", resumed Δ {x['resume_rel_diff']:.0e}" if "resume_rel_diff" in x else ""
            # a cell that failed before its first step has no losses: its error is in the section's log
            loss = f"{x['losses'][-1]:.3f}" if x.get("losses") else "no step"
            vals.append(f"{loss}{resumed}{mark}")
        out.append(f"| {t} | " + " | ".join(vals) + " |")
    return out


def render(res: dict) -> str:
    v = res.get("versions", {})
    s = res["sections"]
    lines = [f"## GPU check (benchmarks/device.sh{' --tiny' if res.get('tiny') else ''})", "",
             f"{v.get('device')} · torch {v.get('torch')} · transformers {v.get('transformers')} · "
             f"sentence-transformers {v.get('sentence_transformers')} · CUDA {v.get('cuda')} · "
             f"{res.get('seconds')} s of a {res.get('budget_s')} s budget", ""]
    grid = []
    for name in SECTIONS:
        sec = s.get(name)
        if sec is None:
            lines.append(f"- {name}: not run")
        elif "skipped" in sec or "error" in sec:
            lines.append(f"- {name}: {sec.get('skipped') or sec.get('error')}")
        elif name == "correctness":
            bad = [f"{x['model']} {x['precision']} {x['terms']}" for x in sec["rows"] if not x["ok"]]
            lines.append(f"- correctness: {len(sec['rows'])} rows, {'all finite and resumed within tolerance' if not bad else 'FAILED: ' + '; '.join(bad)}"
                         + ("" if sec["complete"] else " (stopped by the budget)"))
            grid = _grid(sec)
        elif name == "training":
            first = sec.get("first_round") or {}
            lines.append(f"- BERT-base batch {sec['batch']}, training sentences/s (second round; the same weights and batches):")
            for label, key in (("csebench (its default: packed real tokens)", "ours"), ("csebench on the padded batch", "ours_unpacked"),
                               ("sentence-transformers' recipe", "st"), ("plain loop (benchmarks/plain_loop.py), padded per batch", "plain"),
                               (f"plain loop, padded to {MAX_LEN}", "plain_fixed")):
                x = sec.get(key) or {}
                ratio = f", csebench / this {sec['ours']['sps'] / x['sps']:.2f}x" if x.get("sps") and key != "ours" else ""
                lines.append(f"  - {label}: " + (f"{x['sps']:.1f}{ratio}" if x.get("sps") else str(x.get("error", "not run"))))
            if first.get("st_sps"):
                lines.append(f"  - first round (attention plans still being built): ours {first['ours_sps']:.1f}, "
                             f"sentence-transformers {first['st_sps']:.1f}")
        elif name == "large":
            mfu = f"{sec['mfu']:.1%}" if sec.get("mfu") else "unknown"
            lines.append(f"- RoBERTa-large (RobertaModel) batch {sec['batch']}: {sec['ours']['sps']:.1f} sentences/s, "
                         f"{sec['ours']['tokens_per_s']:.0f} padded tokens/s, MFU {mfu}")
        elif name == "eval":
            two = (f"; STS-B + SICK-R alone: ours {sec['ours_seconds_2_tasks']:.1f} s, sentence-transformers "
                   f"{sec['st_seconds_2_tasks']:.1f} s" if "ours_seconds_2_tasks" in sec else "")
            diff = ", ".join(f"{k} {d:.1e}" for k, d in sec["abs_diff"].items())
            lines.append(f"- 7 STS tasks: ours bf16 {sec['ours']['bf16']['seconds']:.1f} s, fp32 {sec['ours']['fp32']['seconds']:.1f} s{two}; "
                         f"|ours - sentence-transformers' evaluator| {diff} (within 0.01: {sec['agree_within_0.01']})")
        elif name == "group_p":
            lines.append("- Group-P on the device vs the per-row loop: " + ", ".join(
                f"batch {x['batch']} {x['fast_ms']:.2f} ms vs {x['loop_ms']:.1f} ms ({x['ratio']:.0f}x)" for x in sec["rows"]))
        elif name == "compile":
            plain = sec.get("plain_compiled") or {}
            lines.append(f"- torch.compile, BERT-base batch 64: {sec['compiled']['sps']:.1f} vs eager {sec['eager']['sps']:.1f} "
                         f"sentences/s, {sec['speedup']:.2f}x ({sec['graphs']} graphs, first steps {sec['compiled']['warmup_s']:.0f} s); "
                         + (f"the plain loop compiled, padded to {MAX_LEN}: {plain['sps']:.1f}, csebench / plain "
                            f"{sec['vs_plain_compiled']:.2f}x" if plain.get("sps") else f"the plain loop compiled: {plain.get('error', 'not run')}")
                         + (f"; with training.compile: reduce-overhead (CUDA graphs) {sec['reduce_overhead']['sps']:.1f}"
                            if (sec.get("reduce_overhead") or {}).get("sps") else ""))
    if grid:
        lines += ["", "Correctness grid (last of the four losses; the composed run stopped after its checkpoint and resumed):", "", *grid]
    return "\n".join(lines) + "\n"


def report_section(res: dict) -> str:
    """BENCHMARKS.md's GPU (measured) section from merged results: the figures, which call and commit
    measured each, what an earlier call measured before a fix, and the cost model's assumption beside
    the measured utilisation."""
    sys.path.insert(0, str(HERE.parent / "src"))
    from csebench.results import plan

    lines = [render(res).split("\n", 2)[2].strip(), ""]
    calls = res.get("calls") or []
    if calls:
        lines.append("Calls (docs/gpu.md; `benchmarks/device.sh $OUT`, sections as listed), merged by "
                     "`python benchmarks/device.py --merge ...`: " + "; ".join(
                         f"commit {c['commit']}: {', '.join(c['sections'])} ({c['seconds']} s of {c['budget_s']:.0f})" for c in calls))
        lines.append("")
    old = res.get("superseded") or {}
    if "training" in old and "training" in res["sections"]:
        o = old["training"]
        lines.append(f"- Found and fixed: the first call measured ours at {o['ours']['sps']:.0f} sentences/s against "
                     f"sentence-transformers' {o['st']['sps']:.0f} (ratio {o['ratio']:.2f}), ours measured first. The attention "
                     f"kernels build a plan per new padded shape on first sight, so the side that ran first paid for both; "
                     f"the check now runs two rounds and reports the second (first round kept in the results).")
    if "compile" in old and "compile" in res["sections"]:
        o, n = old["compile"], res["sections"]["compile"]
        lines.append(f"- Found and fixed: torch.compile ran {o['speedup']:.2f}x eager ({o['compiled']['step_s']:.2f} s a step): after "
                     f"the second batch length dynamo recompiled with dynamic lengths, and inductor's dynamic-shape "
                     f"kernels were that slow. The trainer now pads a compiled step to a multiple of 8 tokens and compiles "
                     f"static graphs (one per width; tests/test_trainer.py): {n['speedup']:.2f}x eager.")
    if old.get("correctness_rows"):
        redo = {x["terms"] for x in old["correctness_rows"]}
        lines.append(f"- Found and fixed: the first call's IS-CSE rows equalled SimCSE's to the last digit: the check's buffer "
                     f"(four batches) was never full in four steps, so the term's loss never ran. With a buffer of one batch "
                     f"it runs from the second step, and a term's row now fails when its losses do not part from SimCSE's. "
                     f"Rows {', '.join(sorted(redo))} were measured again (the SimCSE rows to the same six decimals).")
    if "eval" in old and "eval" in res["sections"]:
        o = old["eval"]
        lines.append(f"- The first call's STS timing (bf16 {o['ours']['bf16']['seconds']:.1f} s, fp32 {o['ours']['fp32']['seconds']:.1f} s) "
                     f"included building kernel plans in the bf16 pass; the check now encodes once untimed first.")
    measured = plan._device_script_throughput(res)
    if measured:
        lines.append(f"- Cost model (`csebench plan`): training utilisation assumed {plan.SMALL_BATCH_MFU:.0%} at batch <= "
                     f"{plan.SMALL_BATCH} and {plan.LARGE_BATCH_MFU:.0%} above; measured here {measured['small_mfu']:.1%} (BERT-base, batch "
                     f"64, eager, padded tokens) and {measured['large_mfu']:.1%} (RoBERTa-large, batch 512), measured / assumed "
                     f"{measured['small_mfu'] / plan.SMALL_BATCH_MFU:.2f}x and {measured['large_mfu'] / plan.LARGE_BATCH_MFU:.2f}x. "
                     f"The plan now uses the measured ones (benchmarks/gpu_results.json).")
    return "\n".join(lines).rstrip() + "\n"


def merge(sources: list[str]) -> dict:
    """Results of several calls (``PATH@COMMIT``, oldest first) as one: each section from the latest call
    that ran it; a section a later call ran again is kept under ``superseded`` with the call that made it."""
    merged: dict = {"sections": {}, "calls": [], "superseded": {}}
    for source in sources:
        path, _, commit = source.partition("@")
        res = json.loads(Path(path).read_text(encoding="utf-8"))
        call = {"commit": commit or "unknown", "seconds": res.get("seconds"), "budget_s": res.get("budget_s"),
                "sections": list(res["sections"])}
        merged["calls"].append(call)
        merged["versions"] = res.get("versions", merged.get("versions"))
        for name, sec in res["sections"].items():
            if name == "correctness" and name in merged["sections"] and "rows" in sec:
                # a later call that reran some rows: those rows replace the earlier ones, the rest stay
                key = lambda x: (x["model"], x["precision"], x["terms"])  # noqa: E731
                earlier = merged["sections"][name]
                again = {key(y): {**y, "_commit": call["commit"]} for y in sec["rows"]}
                merged["superseded"].setdefault("correctness_rows", []).extend(
                    {"commit": earlier["_commit"], **x} for x in earlier["rows"] if key(x) in again)
                rows = [again.pop(key(x), x) for x in earlier["rows"]] + list(again.values())  # then rows new to the grid
                merged["sections"][name] = {**earlier, "rows": rows, "ok": all(x.get("ok") for x in rows)}
                continue
            if name in merged["sections"]:
                merged["superseded"][name] = {"commit": merged["sections"][name]["_commit"], **merged["sections"][name]}
            merged["sections"][name] = {**sec, "_commit": call["commit"]}
    merged["seconds"] = round(sum(c["seconds"] or 0 for c in merged["calls"]), 1)
    merged["budget_s"] = sum(c["budget_s"] or 0 for c in merged["calls"])
    merged["tiny"] = False
    return merged


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for gpu_results.json and gpu.md (rewritten after each section)")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all sections (default 420)")
    ap.add_argument("--tiny", action="store_true", help="CPU rehearsal: toy sizes (hidden 32, 2 layers)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"subset of {','.join(SECTIONS)}, in this order")
    ap.add_argument("--bundle", default=str(HERE / "device-bundle"), help="benchmarks/device_bundle.py's folder")
    ap.add_argument("--terms", help="correctness: only these rows (comma-separated: simcse, a term of params.yaml's "
                                    "methods such as instance_smoothing or momentum_negatives, all)")
    ap.add_argument("--merge", nargs="+", metavar="RESULTS.json@COMMIT",
                    help="instead of measuring: merge the gpu_results.json of calls made at those commits (oldest "
                         "first) into --out and, with --benchmarks, into that report's GPU (measured) section")
    ap.add_argument("--benchmarks", help="with --merge: the BENCHMARKS.md whose GPU section is replaced")
    a = ap.parse_args(argv)
    if a.merge:
        res = merge(a.merge)
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / "gpu_results.json.tmp"
        tmp.write_text(json.dumps(res, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(out / "gpu_results.json")
        if a.benchmarks:
            import run as bench

            bench.put_gpu_section(Path(a.benchmarks), "## GPU (measured)\n\n" + report_section(res))
        return res
    unknown = [s for s in a.sections.split(",") if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown sections {unknown} (valid: {','.join(SECTIONS)})")
    if not (Path(a.bundle) / "corpus.txt").is_file():
        ap.error(f"{a.bundle} is missing: run `python benchmarks/device_bundle.py` where ../shared is, and carry it (docs/gpu.md)")
    import torch

    from csebench.core.startup import frozen_imports
    from csebench.model.standins import activate

    if not torch.cuda.is_available() and not a.tiny:
        ap.error("no CUDA device: use --tiny for the CPU rehearsal")
    if a.tiny:
        torch.set_num_threads(min(2, torch.get_num_threads()))
    r = Run(a)
    r.res["versions"] = versions()  # torch, transformers and sentence-transformers imported
    print("device: " + ", ".join(f"{k} {v}" for k, v in r.res["versions"].items()), flush=True)
    # every section frees its models with a full collection (gpu.free): frozen, the imports' objects are not rescanned
    # by each (44 collections took 12 s of the CPU rehearsal's 33 without this)
    with activate(r.bundle, r.corpus, shape=TINY_SHAPE if a.tiny else None), frozen_imports():
        for i, name in enumerate(a.sections.split(","), 1):
            if r.left() < MIN_SECONDS[name] * (0.2 if a.tiny else 1):
                r.res["sections"][name] = {"skipped": f"budget: {r.left():.0f} s left"}
                print(f"[{i}] {name}: skipped ({r.left():.0f} s of the budget left)", flush=True)
            else:
                print(f"[{i}] {name} ({r.left():.0f} s left)", flush=True)
                t0 = time.time()
                try:
                    r.res["sections"][name] = FUNCS[name](r)
                except Exception as exc:  # noqa: BLE001  the next sections still run
                    traceback.print_exc()
                    r.res["sections"][name] = {"error": f"{exc.__class__.__name__}: {str(exc)[:500]}"}
                r.res["sections"][name]["seconds"] = round(time.time() - t0, 1)
            r.write()
    import shutil

    shutil.rmtree(r.tmp, ignore_errors=True)
    print(f"wrote {r.out / 'gpu_results.json'} and {r.out / 'gpu.md'} ({time.time() - r.t0:.0f} s)")
    return r.res


if __name__ == "__main__":
    res = main()
    failed = [n for n, s in res["sections"].items() if "error" in s or s.get("ok") is False]
    sys.exit(1 if failed else 0)

"""Where a training step's time goes: torch.profiler over a few steps of our unsup-SimCSE and of
sentence-transformers' recipe (same model, batch, length and sentences as benchmarks/run.py).

    python benchmarks/profile_step.py [--steps 4] [--out benchmarks/profile.txt]

Prints, for each, the share of CPU time per operator group (matrix multiplies, attention,
optimizer, embedding backward, elementwise/normalization, everything else) and the top operators.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (same setup as the benchmark)

GROUPS = [
    ("attention scores (SDPA; math path on CPU in training: bmm + softmax)", ("scaled_dot_product", "_flash_attention",
                                                                            "aten::bmm", "softmax")),
    ("matmul (linear layers)", ("aten::addmm", "aten::mm", "aten::matmul", "aten::linear")),
    ("zero fills (gradient buffers, masks)", ("aten::fill_", "aten::zero_")),
    ("dropout masks", ("bernoulli",)),
    ("optimizer (AdamW)", ("adamw", "aten::_fused_adamw", "_foreach_", "Optimizer.step")),
    ("embedding backward", ("embedding_dense_backward", "embedding_backward", "index_add", "aten::index_put")),
    ("tokenization / collation", ("tokenize", "collate")),
]


def summarize(prof, steps: int, wall: float) -> list[str]:
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    by = defaultdict(float)
    for e in events:
        name = e.key.lower()
        for g, keys in GROUPS:
            if any(k.lower() in name for k in keys):
                by[g] += e.self_cpu_time_total
                break
        else:
            by["other (elementwise, layer norm, dropout, GELU, copies, Python)"] += e.self_cpu_time_total
    lines = [f"wall time per step: {wall / steps:.3f} s; profiled CPU time per step: {total / 1e6 / steps:.3f} s"]
    for g, v in sorted(by.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {100 * v / total:5.1f}%  {g}")
    lines.append("  top operators by self CPU time:")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]:
        lines.append(f"    {100 * e.self_cpu_time_total / total:5.1f}%  {e.key}  (calls/step {e.count / steps:.0f})")
    return lines


def profile_ours(steps: int, warmup: int) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    from csebench.training.trainer import Trainer

    cfg = bench._bench_config(42, steps + warmup)
    with tempfile.TemporaryDirectory() as tmp:
        tr = Trainer(cfg, bench.corpus_path(), bench.senteval_dir(), tmp, show_progress=False)
        batches = bench.bench_batches(len(tr.tokens), steps + warmup, 42)
        for b in batches[:warmup]:
            tr.train_step(b)
            tr.state.step += 1
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for b in batches[warmup:]:
                tr.train_step(b)
                tr.state.step += 1
            wall = time.perf_counter() - t0
    return summarize(prof, steps, wall)


def profile_st(steps: int, warmup: int) -> list[str]:
    import torch
    from datasets import Dataset
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments, losses, models)
    from torch.profiler import ProfilerActivity, profile
    from transformers import TrainerCallback

    from csebench.core.corpus import read_corpus
    from csebench.model.encoder import packaged_model_dir

    sentences = read_corpus(bench.corpus_path())
    batches = bench.bench_batches(len(sentences), steps + warmup, 42)
    ordered = [sentences[i] for b in batches for i in b]
    train = Dataset.from_dict({"anchor": ordered, "positive": ordered})

    InOrder = bench.in_order_sampler()
    torch.manual_seed(42)
    word = models.Transformer(str(packaged_model_dir()), max_seq_length=bench.MAX_LEN)
    model = SentenceTransformer(modules=[word, models.Pooling(word.get_embedding_dimension(), pooling_mode="cls")],
                                device="cpu")
    loss = losses.MultipleNegativesRankingLoss(model, scale=1.0 / bench.TEMPERATURE)
    state = {"prof": None, "t0": 0.0, "wall": 0.0}

    class Prof(TrainerCallback):
        def on_step_end(self, args, st, control, **kw):
            if st.global_step == warmup:
                state["prof"] = profile(activities=[ProfilerActivity.CPU])
                state["prof"].__enter__()
                state["t0"] = time.perf_counter()
            elif st.global_step == warmup + steps:
                state["wall"] = time.perf_counter() - state["t0"]
                state["prof"].__exit__(None, None, None)

    with tempfile.TemporaryDirectory() as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=bench.BATCH, max_steps=steps + warmup,
            learning_rate=bench.LR, warmup_steps=0, seed=42, batch_sampler=InOrder, save_strategy="no",
            logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, dataloader_drop_last=True)
        SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=loss, callbacks=[Prof()]).train()
    return summarize(state["prof"], steps, state["wall"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out = ["## csebench unsup-SimCSE (Trainer.train_step)"] + profile_ours(a.steps, a.warmup)
    out += ["", "## sentence-transformers (MultipleNegativesRankingLoss, SentenceTransformerTrainer)"] + profile_st(a.steps, a.warmup)
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

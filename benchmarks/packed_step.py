"""A training step on real tokens only (csebench.model.packed) against the library's padded forward, on an
XLM-R model (multilingual-E5 and BGE-M3 are XLM-R): the step time of each, side by side in one call.

    python benchmarks/packed_step.py [--layers 4 --hidden 256 --steps 8 --trials 3 --threads 1]

The model is an XLMRobertaModel with random weights (``--layers`` x ``--hidden``, 4 heads, FFN 4 x hidden), its
tokenizer the offline byte-level BPE stand-in learnt from the demo corpus (csebench.model.standins); the run is
unsup-SimCSE through csebench's Trainer, batch 64 of demo sentences, max length 32, fp32 on the CPU. Two trainers
start from the same folder and seed; the packed forward is switched off for one (``CSEBENCH_PACKED=0``, read at
every step). Each trial times ``--steps`` steps of each, in alternating order, after warm-up steps; the ratio is
taken per trial. Writes ``--out`` (JSON) and its section of BENCHMARKS.md (between its markers, which
benchmarks/run.py keeps).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import run as report  # noqa: E402  (the report's sections: its markers, put_section)


def _shared() -> Path:
    return Path(os.environ.get("CSEBENCH_SHARED", ROOT.parent / "shared"))


def _trainer(folder: Path, corpus: Path, out: Path, a):
    from csebench.study.typed import Params
    from csebench.training.trainer import Trainer

    raw = Params.load(ROOT / "params.yaml").raw_copy()
    raw["backbones"] = {"xlmr": {"model": str(folder), "pooler": "cls"}}
    raw["data"]["bench"] = {"corpus": {"path": str(corpus)}, "senteval": {"path": str(_shared() / "senteval")}}
    raw["suites"] = {"bench": {"data": "bench", "seeds": [42], "runs": [{
        "name": "simcse", "backbone": "xlmr", "method": "simcse",
        "training": {"batch_size": a.batch, "max_seq_length": 32, "precision": "fp32"}}]}}
    cfg = Params(raw).suite("bench").resolve("simcse", 42)
    return Trainer(cfg, corpus, _shared() / "senteval", out, cache_dir=out.parent / "cache", show_progress=False)


def measure(a) -> dict:
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    from csebench.core.corpus import read_corpus
    from csebench.model.standins import train_tokenizer

    torch.set_num_threads(a.threads)
    tmp = Path(tempfile.mkdtemp(prefix="packed-bench-"))
    sentences = read_corpus(_shared() / "corpus" / "demo-sentences.txt")
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    tok = train_tokenizer("roberta", sentences, 8192)
    torch.manual_seed(0)
    config = XLMRobertaConfig(vocab_size=len(tok), hidden_size=a.hidden, num_hidden_layers=a.layers,
                              num_attention_heads=4, intermediate_size=4 * a.hidden, max_position_embeddings=34,
                              type_vocab_size=1, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                              eos_token_id=tok.eos_token_id)
    folder = tmp / "xlmr"
    XLMRobertaModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    trainers = {"packed": _trainer(folder, corpus, tmp / "packed", a), "padded": _trainer(folder, corpus, tmp / "padded", a)}
    assert trainers["padded"].packed_why is None  # both could pack: the environment decides per step
    params = sum(p.numel() for p in trainers["packed"].encoder.backbone.parameters())

    def run(mode: str, steps: int) -> tuple[float, float]:
        """(wall seconds, this process's CPU seconds) per step."""
        if mode == "padded":
            os.environ["CSEBENCH_PACKED"] = "0"
        else:
            os.environ.pop("CSEBENCH_PACKED", None)
        t0, c0 = time.perf_counter(), time.process_time()
        trainers[mode].step_losses(steps, like_run=True, past_the_end=True)
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps

    for mode in trainers:
        run(mode, a.warmup)
    per_trial, cpu_trial = [], []
    for trial in range(a.trials):
        order = ("packed", "padded") if trial % 2 == 0 else ("padded", "packed")
        both = {mode: run(mode, a.steps) for mode in order}
        per_trial.append({m: w for m, (w, _) in both.items()})
        cpu_trial.append({m: c for m, (_, c) in both.items()})
    os.environ.pop("CSEBENCH_PACKED", None)
    tr = trainers["packed"]
    real = padded = 0
    for batch in tr._local_batches(0)[:20]:  # the positions a step computes: its batch padded to its longest row
        lengths = tr.tokens.lengths()[batch]
        real, padded = real + int(lengths.sum()), padded + int(lengths.max()) * len(batch)
    ratios = [t["padded"] / t["packed"] for t in per_trial]
    cpu_ratios = [t["padded"] / t["packed"] for t in cpu_trial]
    return {"model": f"XLMRobertaModel, {a.layers} layers, hidden {a.hidden}, 4 heads, FFN {4 * a.hidden}, "
                     f"vocabulary {len(tok)} (offline BPE stand-in), random weights, {params / 1e6:.1f}M parameters",
            "step": f"unsup-SimCSE, batch {a.batch} of demo sentences (two views: {2 * a.batch} rows), max length 32, fp32",
            "padded_positions_per_real_token": round(padded / real, 2),
            "seconds_per_step": {m: round(statistics.median(t[m] for t in per_trial), 4) for m in ("packed", "padded")},
            "per_trial": [{k: round(v, 4) for k, v in t.items()} for t in per_trial],
            "speedup_per_trial": [round(r, 2) for r in ratios], "speedup_median": round(statistics.median(ratios), 2),
            "cpu_seconds_per_step": {m: round(statistics.median(t[m] for t in cpu_trial), 4) for m in ("packed", "padded")},
            "cpu_per_trial": [{k: round(v, 4) for k, v in t.items()} for t in cpu_trial],
            "cpu_speedup_per_trial": [round(r, 2) for r in cpu_ratios],
            "cpu_speedup_median": round(statistics.median(cpu_ratios), 2),
            "steps": a.steps, "trials": a.trials, "warmup": a.warmup, "threads": a.threads}


def section(res: dict, info: dict) -> str:
    s, c = res["seconds_per_step"], res["cpu_seconds_per_step"]
    trials = {m: ", ".join(f"{t[m]:.3f}" for t in res["per_trial"]) for m in s}
    cpu = {m: ", ".join(f"{t[m]:.3f}" for t in res["cpu_per_trial"]) for m in c}
    return "\n".join([
        "## Packed vs padded training step: XLM-R",
        "",
        f"_Measured {info['utc']} by `{info['command']}`, load average {info['load'][0]} -> {info['load'][1]} on "
        f"{info['cpus']} CPUs ({info['cpu']}), {res['threads']} torch thread(s); the machine was shared with other "
        "jobs while this ran, so the times are noisy and the paired ratio is what to read._",
        "",
        f"{res['model']}; {res['step']}. csebench's Trainer, the same weights and batches; the dense layers on "
        f"real tokens only (`csebench.model.packed`) or on every padded position (`CSEBENCH_PACKED=0`): a padded "
        f"batch holds {res['padded_positions_per_real_token']}x as many positions as real tokens here. "
        f"{res['steps']} timed steps per trial after {res['warmup']} warm-up steps, {res['trials']} trials, "
        "alternating which goes first.",
        "",
        "| forward | wall seconds per step (median) | per trial | CPU seconds per step (median) | per trial |",
        "|---|---|---|---|---|",
        f"| packed (real tokens only) | {s['packed']:.3f} | {trials['packed']} | {c['packed']:.3f} | {cpu['packed']} |",
        f"| padded (the library's forward) | {s['padded']:.3f} | {trials['padded']} | {c['padded']:.3f} | {cpu['padded']} |",
        "",
        f"**Packed {res['cpu_speedup_median']}x faster in CPU time** (paired per-trial ratios: "
        f"{', '.join(str(r) for r in res['cpu_speedup_per_trial'])}), {res['speedup_median']}x in wall time "
        f"({', '.join(str(r) for r in res['speedup_per_trial'])}). With one torch thread the process's CPU time is its "
        "compute, whatever else shares the machine; the wall time also holds the waits for a core.",
    ])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "packed_results.json"))
    ap.add_argument("--report", default=str(ROOT / "BENCHMARKS.md"), help="'' writes no report")
    a = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    res = measure(a)
    info = {"utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
            "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
            "command": " ".join(["python benchmarks/packed_step.py"] + list(sys.argv[1:] if argv is None else argv))}
    import torch
    import transformers

    info["versions"] = f"torch {torch.__version__}, transformers {transformers.__version__}"
    Path(a.out).write_text(json.dumps({"when": info, "result": res}, indent=2) + "\n", encoding="utf-8")
    if a.report:
        report.put_section(Path(a.report), report.PACKED_BEGIN, report.PACKED_END, section(res, info),
                           before=report.GPU_BEGIN)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()

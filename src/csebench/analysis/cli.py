"""`csebench analyze <name>` (one analysis of a model -> JSON, some also a figure/table) and
`csebench analyze-figure <name>` (suite-level figure/table from several analysis JSONs).

    csebench analyze align-uniform   --model M --senteval S --out a.json
    csebench analyze cosine-dist     --model M --senteval S --out a.json
    csebench analyze layers          --model M --senteval S --out a.json
    csebench analyze topk-negatives  --model M --corpus C --out a.json --figure f.png
    csebench analyze teacher-logits  --teacher M1 --teacher M2 --corpus C --senteval S --out a.json --figure f.png
    csebench analyze embed-dim       --model M --senteval S --out a.json
    csebench analyze neighbours      --model M --corpus C --out a.json --markdown n.md
    csebench analyze-figure align-uniform --inputs a.json ... --sts sts.json ... --out f.png
    csebench analyze-figure {cosine-dist,layers} --inputs a.json ... --out f.png
    csebench analyze-figure embed-dim --inputs a.json ... --out t.md [--csv t.csv]
    csebench analyze-figure neighbours --inputs n.md ... --out t.md
"""

from __future__ import annotations

import logging
import os
import time

from ..config import EVAL_PRECISIONS

log = logging.getLogger("csebench.analysis")


def _encoder(path: str, pooler: str | None = None, what: str = "--model"):
    from ..embeddings import load_eval_model

    return load_eval_model(path, pooler, what)


def _encode_fn(enc, batch_size: int, precision: str | None = None):
    from ..embeddings import encode_with

    return encode_with(enc, batch_size, precision or "auto")


def _root(senteval: str):
    from ..data import senteval_root

    return senteval_root(senteval)


def _corpus(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.strip() for line in fh if line.strip()]


def _finish(args, res: dict, t0: float) -> None:
    from ..io import write_json

    res["model"] = getattr(args, "model", None) or getattr(args, "teacher", None)
    res["label"] = args.label or (os.path.basename(os.path.dirname(os.path.normpath(args.model))) if getattr(args, "model", None) else "")
    res["seconds"] = round(time.perf_counter() - t0, 2)  # wall clock, model loading excluded
    res["cpu_seconds"] = round(time.process_time() - args._cpu0, 2)  # CPU time of all threads
    write_json(args.out, res)
    log.info("%s: %.1f s -> %s", res["analysis"], res["seconds"], args.out)


def cmd_analyze(args) -> None:
    from . import core, plots

    t0 = time.perf_counter()
    args._cpu0 = time.process_time()
    name = args.analysis
    if name == "teacher-logits":
        from ..evaluation.sts import load_stsb

        from pathlib import Path

        encs = [_encode_fn(_encoder(p, args.pooler, "--teacher"), args.batch_size) for p in args.teacher]
        res = core.teacher_logit_stats(encs, _corpus(args.corpus), load_stsb(Path(_root(args.senteval)), "dev"),
                                       batch_size=args.logit_batch_size, n_batches=args.n_batches,
                                       temperature=args.temperature, seed=args.seed)
        res["teachers_paths"] = list(args.teacher)
        if args.figure:
            plots.plot_teacher_logits(res, args.figure, title=f"Teacher logits ({len(args.teacher)} teacher(s)), batch size {args.logit_batch_size}")
        _finish(args, res, t0)
        return
    if name in TABLE_ANALYSES:  # sentence embeddings only: served by the model's embeddings table when given
        from ..embeddings import evaluation_encoder

        enc = None
        encode = evaluation_encoder(args.model, args.pooler, args.batch_size, args.precision, args.embeddings)
    else:
        enc = _encoder(args.model, args.pooler)
        encode = _encode_fn(enc, args.batch_size, args.precision)
    if name == "align-uniform":
        res = core.align_uniform(encode, _root(args.senteval), split=args.split)
    elif name == "cosine-dist":
        res = core.cosine_distribution(encode, _root(args.senteval), split=args.split)
    elif name == "layers":
        res = core.layer_similarities(enc, core.stsb_sentences(_root(args.senteval), args.split), batch_size=args.batch_size,
                                      exclude_special=not args.include_special)
        res["data"] = f"STS-B {args.split}"
    elif name == "topk-negatives":
        res = core.topk_negatives(encode, _corpus(args.corpus), batch_sizes=args.batch_sizes, k=args.k, repeats=args.repeats,
                                  pool_size=args.pool_size, seed=args.seed)
        if args.figure:
            plots.plot_topk_negatives(res, args.figure, model_label=args.label or os.path.basename(os.path.normpath(args.model)))
    elif name == "embed-dim":
        res = core.projected_sts(encode, _root(args.senteval), dims=args.dims, methods=args.methods, seed=args.seed)
        from ..encoder import read_encoder_meta

        res["trained_projection"] = read_encoder_meta(args.model).get("projection_dim")  # SSCL Table 5
    elif name == "neighbours":
        res = core.retrieve_neighbours(encode, _corpus(args.corpus), queries=args.query, buffer_size=args.buffer_size,
                                       k=args.k, n_queries=args.n_queries, seed=args.seed)
        if args.markdown:
            from ..io import write_text

            write_text(args.markdown, core.neighbours_markdown(res, f"Retrieved neighbours ({args.label or args.model})"))
    else:  # pragma: no cover - argparse restricts the choices
        raise ValueError(name)
    _finish(args, res, t0)


def _label_of(path: str, res: dict) -> str:
    if res.get("label"):
        return res["label"]
    parts = os.path.normpath(path).split(os.sep)
    return "/".join(parts[-3:-1]) if len(parts) >= 3 else os.path.basename(path)


def cmd_analyze_figure(args) -> None:
    from ..errors import ConfigError
    from ..io import read_json
    from . import plots

    if args.kind == "neighbours":  # concatenate the per-model Markdown tables
        from ..io import write_text

        parts = ["# Retrieved neighbours (IS-CSE Table 9 case study)", ""]
        parts += [open(p, encoding="utf-8").read().strip() + "\n" for p in args.inputs]
        write_text(args.out, "\n".join(parts))
        return
    items = {}
    for path in args.inputs:
        res = read_json(path)
        label = _label_of(path, res)
        while label in items:
            label += "'"
        items[label] = res
    if args.kind == "align-uniform":
        sts = args.sts or []
        if sts and len(sts) != len(args.inputs):
            raise ConfigError("--sts needs one sts.json per --inputs file, in the same order")
        points = []
        for i, (label, res) in enumerate(items.items()):
            avg = read_json(sts[i]).get("avg") if sts else None
            points.append({"label": label, "alignment": res["alignment"], "uniformity": res["uniformity"], "sts_avg": avg})
        plots.plot_align_uniform(points, args.out, title=args.title)
    elif args.kind == "cosine-dist":
        plots.plot_cosine_dist(items, args.out, title=args.title)
    elif args.kind == "layers":
        plots.plot_layers(items, args.out, title=args.title)
    elif args.kind == "embed-dim":
        plots.embed_dim_table(items, args.out, args.csv)


TABLE_ANALYSES = ("align-uniform", "cosine-dist", "embed-dim")  # sentence embeddings only (analysis.smk reads this)
ANALYSES = ["align-uniform", "cosine-dist", "layers", "topk-negatives", "teacher-logits", "embed-dim", "neighbours"]


def add_parsers(sub, common) -> None:
    sp = common(sub.add_parser("analyze", help="one of the papers' analyses of a model (JSON; some also PNG/Markdown)"))
    sp.add_argument("analysis", choices=ANALYSES)
    sp.add_argument("--model", help="model folder (or packaged:minilm)")
    sp.add_argument("--teacher", action="append", default=[], help="teacher model folder (teacher-logits; repeatable)")
    sp.add_argument("--senteval", help="SentEval folder or prepared pointer folder")
    sp.add_argument("--corpus", help="training corpus (one sentence per line)")
    sp.add_argument("--out", required=True, help="JSON result")
    sp.add_argument("--figure", help="PNG (topk-negatives, teacher-logits)")
    sp.add_argument("--markdown", help="Markdown table (neighbours)")
    sp.add_argument("--label", default="", help="model name in figures (default: the run folder)")
    sp.add_argument("--pooler", default=None, help="override the saved evaluation pooler")
    sp.add_argument("--batch-size", type=int, default=128, help="encoding batch size")
    sp.add_argument("--embeddings", default=None,
                    help="align-uniform, cosine-dist, embed-dim: the model's embeddings table (`csebench embed`)")
    sp.add_argument("--precision", default=None, choices=EVAL_PRECISIONS,
                    help="encoding precision (default: the table's, else auto = bf16 on bf16 GPUs, fp32 on CPU)")
    sp.add_argument("--split", default="test", choices=["dev", "test"], help="STS-B split (default test)")
    sp.add_argument("--seed", type=int, default=0, help="sampling seed")
    sp.add_argument("--include-special", action="store_true", help="layers: count [CLS]/[SEP] in TokSim")
    sp.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024], help="topk-negatives")
    sp.add_argument("--repeats", type=int, default=100, help="topk-negatives: batches per size")
    sp.add_argument("--pool-size", type=int, default=4096, help="topk-negatives: corpus sentences embedded")
    sp.add_argument("--k", type=int, default=None, help="top-k (topk-negatives: 4) / neighbours (neighbours: 3)")
    sp.add_argument("--logit-batch-size", type=int, default=64, help="teacher-logits: in-batch size N")
    sp.add_argument("--n-batches", type=int, default=20, help="teacher-logits: training batches")
    sp.add_argument("--temperature", type=float, default=0.05, help="teacher-logits: softmax temperature of sharpness")
    sp.add_argument("--dims", type=int, nargs="+", default=[128, 256], help="embed-dim: projection sizes")
    sp.add_argument("--methods", nargs="+", default=["random", "pca"], choices=["random", "pca"], help="embed-dim")
    sp.add_argument("--buffer-size", type=int, default=1024, help="neighbours: buffer length L")
    sp.add_argument("--n-queries", type=int, default=4, help="neighbours: random queries when no --query")
    sp.add_argument("--query", action="append", default=[], help="neighbours: query sentence (repeatable)")
    sp.set_defaults(func=_checked)

    sp = sub.add_parser("analyze-figure", help="suite-level figure/table from analysis JSONs")
    sp.add_argument("kind", choices=["align-uniform", "cosine-dist", "layers", "embed-dim", "neighbours"])
    sp.add_argument("--inputs", nargs="+", required=True)
    sp.add_argument("--sts", nargs="*", default=[], help="align-uniform: sts.json per input (average STS colour)")
    sp.add_argument("--out", required=True, help="PNG (Markdown for embed-dim)")
    sp.add_argument("--csv", default=None, help="embed-dim: also a CSV table")
    sp.add_argument("--title", default="")
    sp.set_defaults(func=cmd_analyze_figure)


def _checked(args) -> None:
    from ..errors import ConfigError

    need = {"align-uniform": ["model", "senteval"], "cosine-dist": ["model", "senteval"], "layers": ["model", "senteval"],
            "topk-negatives": ["model", "corpus"], "teacher-logits": ["teacher", "corpus", "senteval"],
            "embed-dim": ["model", "senteval"], "neighbours": ["model", "corpus"]}[args.analysis]
    missing = [f"--{n}" for n in need if not getattr(args, n)]
    if missing:
        raise ConfigError(f"analyze {args.analysis} needs {', '.join(missing)}")
    if args.k is None:
        args.k = 3 if args.analysis == "neighbours" else 4
    cmd_analyze(args)

"""`csebench analyze <name>` (one analysis of a model -> JSON, some also a figure/table) and
`csebench analyze-figure <name>` (suite-level figure/table from several analysis JSONs).

    csebench analyze align-uniform   --model M --senteval S --out a.json
    csebench analyze cosine-dist     --model M --senteval S --out a.json
    csebench analyze layers          --model M --senteval S --out a.json
    csebench analyze topk-negatives  --model M --corpus C --out a.json --figure f.png
    csebench analyze teacher-logits  --teacher M1 --teacher M2 --corpus C --senteval S --out a.json --figure f.png
    csebench analyze embed-dim       --model M --senteval S --out a.json
    csebench analyze neighbours      --model M --corpus C --out a.json --markdown n.md
    csebench analyze model-correlation --model STUDENT --senteval S [--self-teacher M ...] [--other-teachers M ...]
                                     [--other-students M ...] [--embeddings T ...] --out a.json
    csebench analyze distill-loss    --model STUDENT --teacher T1 [--teacher T2 ...] --corpus C --senteval S --out a.json
    csebench analyze token-matrix    --models M1 M2 [--labels A B] (--senteval S | --sentence "...") --out a.json --figure f.png
    csebench analyze ensemble-sts    --embeddings T1 T2 ... --senteval S --out sts.json
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


def _encode_fn(enc, batch_size: int | None, precision: str | None = None):
    from ..embeddings import encode_with

    return encode_with(enc, batch_size, precision or "auto")


def _root(senteval: str):
    from ..data import senteval_root

    return senteval_root(senteval)


def _finish(args, res: dict, t0: float, tables=()) -> None:
    """Write the analysis JSON (timing, provenance; ``tables``: the embeddings tables that served it)."""
    from ..io import write_json
    from ..provenance import for_evaluation

    res["model"] = getattr(args, "model", None) or getattr(args, "teacher", None) or getattr(args, "models", None)
    if "pooler" not in res:  # which pooler made the vectors (resolved); per model where they differ
        from ..encoder import eval_pooler_of

        models = res["model"] if isinstance(res["model"], list) else [res["model"]]
        poolers = {m: eval_pooler_of(m, getattr(args, "pooler", None)) for m in models if m}
        res["pooler"] = next(iter(poolers.values())) if len(set(poolers.values())) == 1 else (poolers or None)
    res["label"] = args.label or (os.path.basename(os.path.dirname(os.path.normpath(args.model))) if getattr(args, "model", None) else "")
    res["seconds"] = round(time.perf_counter() - t0, 2)  # wall clock, model loading excluded
    res["cpu_seconds"] = round(time.process_time() - args._cpu0, 2)  # CPU time of all threads
    res["provenance"] = for_evaluation(args.precision, tables)
    write_json(args.out, res, undefined_ok=True)  # e.g. a Spearman correlation of constant cosines
    log.info("%s: %.1f s -> %s", res["analysis"], res["seconds"], args.out)


def _footer(args) -> str:
    """The provenance line under a figure or table this command draws from its own results."""
    from ..provenance import for_evaluation, summary_line

    return summary_line([for_evaluation(args.precision)])


def _model_label(path: str) -> str:
    """runs/NAME/seedS/model -> NAME/seedS; other paths: their last component."""
    parts = os.path.normpath(path).split(os.sep)
    return "/".join(parts[-3:-1]) if parts[-1] == "model" and len(parts) >= 3 else parts[-1]


def _unique_labels(labels: list[str]) -> list[str]:
    out: list[str] = []
    for label in labels:
        while label in out:
            label += "'"
        out.append(label)
    return out


def _one_table(args) -> str | None:
    from ..errors import ConfigError

    if args.embeddings and len(args.embeddings) > 1:
        raise ConfigError(f"analyze {args.analysis} takes one --embeddings table (the model's)")
    return args.embeddings[0] if args.embeddings else None


def _table_encoders(args, models: list[str]) -> dict:
    """model path -> encode function: served by the --embeddings table made from that model (matched
    by the weights' fingerprint, else by the recorded model path), else by the model itself. The
    function's ``table`` attribute is the table used (None: encoded)."""
    from ..embeddings import EmbeddingTable, model_encoder, model_fingerprint, table_encode
    from ..errors import ConfigError

    tables = [EmbeddingTable(t) for t in args.embeddings or []]
    used, out = set(), {}
    for m in models:
        fp = model_fingerprint(m) if tables else None  # folders, packaged:minilm and hub ids alike
        match = [t for t in tables if (fp is not None and t.meta.get("model_fingerprint") == fp)
                 or os.path.normpath(str(t.meta.get("model", ""))) == os.path.normpath(m)]
        if match:
            t = match[0]
            used.add(t.path)
            use = args.precision or t.meta.get("precision") or "auto"
            out[m] = table_encode(t, m, lambda m=m, use=use: model_encoder(m, args.pooler, args.batch_size, use),
                                  settings={"precision": args.precision}, pooler=args.pooler)
        else:
            enc = _encoder(m, args.pooler)
            out[m] = _encode_fn(enc, args.batch_size, args.precision)
            out[m].table, out[m].pooler = None, enc.pooler
    unused = [str(t.path) for t in tables if t.path not in used]
    if unused:
        raise ConfigError(f"--embeddings {', '.join(unused)}: made from none of the models given")
    return out


def _backbone_of(model_dir) -> str | None:
    import json

    cfg = os.path.join(str(model_dir), "training_config.json")
    if not os.path.isfile(cfg):
        return None
    with open(cfg, encoding="utf-8") as fh:
        return json.load(fh).get("backbone_name")


def _cmd_distillcse(args, t0: float) -> None:
    """model-correlation, distill-loss, token-matrix, ensemble-sts."""
    from pathlib import Path

    from ..evaluation.sts import load_stsb
    from . import core, distill, plots

    name = args.analysis
    tables: list = []  # the embeddings tables that served the analysis (their provenance goes with it)
    if name == "model-correlation":
        groups = {"self_teacher": args.self_teacher, "other_teachers": args.other_teachers, "other_students": args.other_students}
        paths = [args.model] + [m for ms in groups.values() for m in ms]
        encoders = _table_encoders(args, list(dict.fromkeys(paths)))
        others = list(dict.fromkeys(paths[1:]))
        labels = dict(zip(others, _unique_labels([_model_label(p) for p in others])))
        res = distill.model_correlation(encoders[args.model], {k: [(labels[m], encoders[m]) for m in ms] for k, ms in groups.items()},
                                        load_stsb(Path(_root(args.senteval)), "dev"))
        res["data"] = "STS-B dev"
        res["paths"] = {k: {labels[m]: m for m in ms} for k, ms in groups.items()}
        res["tables"] = {p: str(encoders[p].table.path) if encoders[p].table is not None else None for p in encoders}
        res["pooler"] = {p: encoders[p].pooler for p in encoders}
        tables = [e.table for e in encoders.values()]
    elif name == "distill-loss":
        from ..data import read_corpus

        settings, trained_len = distill.run_settings(args.model)
        max_len = args.max_seq_length or trained_len or 32
        student = _encoder(args.model, args.pooler)
        head = distill.attach_training_head(student, args.model) if args.student_representation == "training" else False
        train_head = head or bool(student.projection_dim)
        teachers = [distill.batch_embedder(_encoder(t), max_len, train_head=False) for t in args.teacher]
        res = distill.distillation_loss(
            distill.batch_embedder(student, max_len, train_head=train_head), teachers,
            {"train": read_corpus(args.corpus), "test": core.stsb_sentences(_root(args.senteval), "test")},
            settings=distill.measurement_settings(settings, student_temperature=args.student_temperature,
                                                  teacher_temperature=args.teacher_temperature, reduction=args.reduction),
            batch_size=args.logit_batch_size, n_batches=args.n_batches, seed=args.seed)
        res.update({"data": {"train": args.corpus, "test": "STS-B test sentences"}, "max_seq_length": max_len,
                    "student_representation": args.student_representation, "student_head": train_head,
                    "settings_source": "training_config.json" if settings else "defaults", "teachers_paths": list(args.teacher)})
    elif name == "token-matrix":
        models = args.models or [args.model]
        labels = _unique_labels(args.labels or [_model_label(m) for m in models])
        sentence = args.sentence or load_stsb(Path(_root(args.senteval)), "test").sent1[0]
        res = core.token_matrices({lb: _encoder(m, args.pooler) for lb, m in zip(labels, models)}, sentence,
                                  layer=args.layer, exclude_special=not args.include_special)
        res["paths"] = dict(zip(labels, models))
        if args.figure:
            plots.plot_token_matrices(res, args.figure, title=args.title, footer=_footer(args))
    elif name == "ensemble-sts":
        from ..embeddings import EmbeddingTable, model_encoder, table_encode
        from ..errors import DataError
        from ..evaluation.sts import evaluate_sts

        def member(path):
            t = EmbeddingTable(path)
            m = t.meta.get("model")

            def fallback():
                if not m or not os.path.exists(m):
                    raise DataError(f"{path} lacks sentences of the STS tasks and its model {m!r} is not available")
                return model_encoder(m, t.meta.get("pooler"), args.batch_size, t.meta.get("precision") or "auto")

            return table_encode(t, m if m and os.path.isdir(m) else None, fallback)

        members = [member(p) for p in args.embeddings]
        tables = [e.table for e in members]
        res = evaluate_sts(distill.ensemble_encode(members), _root(args.senteval), keep_pairs=bool(args.pairs_out))
        if args.pairs_out:
            from ..evaluation.sts import save_pairs

            save_pairs(args.pairs_out, res.pop("pairs"))
        backbones = {_backbone_of(e.table.meta.get("model", "")) for e in members}
        res.update({"analysis": "ensemble_sts", "eval_seconds": round(time.perf_counter() - t0, 2),
                    "members": [e.table.meta.get("model") for e in members],
                    "pooler": [e.pooler for e in members],
                    "encoding": {"embeddings": list(args.embeddings), "ensemble": "mean of L2-normalized member embeddings",
                                 "missing_from_table": sum(e.missing for e in members)},
                    "run_info": {"name": args.label or "ensemble", "method": "ensemble", "method_label": "Ensemble of teacher comp.",
                                 "backbone": backbones.pop() if len(backbones) == 1 else None, "seed": args.seed}})
    else:  # pragma: no cover - argparse restricts the choices
        raise ValueError(name)
    _finish(args, res, t0, tables)


def cmd_analyze(args) -> None:
    from ..data import read_corpus  # its checks, and the corpus sha256 in the provenance
    from . import core, plots

    t0 = time.perf_counter()
    args._cpu0 = time.process_time()
    name = args.analysis
    if name in DISTILLCSE_ANALYSES:
        _cmd_distillcse(args, t0)
        return
    if name == "teacher-logits":
        from ..evaluation.sts import load_stsb

        from pathlib import Path

        encs = [_encode_fn(_encoder(p, args.pooler, "--teacher"), args.batch_size) for p in args.teacher]
        res = core.teacher_logit_stats(encs, read_corpus(args.corpus), load_stsb(Path(_root(args.senteval)), "dev"),
                                       batch_size=args.logit_batch_size, n_batches=args.n_batches,
                                       temperature=args.temperature, seed=args.seed)
        res["teachers_paths"] = list(args.teacher)
        if args.figure:
            plots.plot_teacher_logits(res, args.figure, title=f"Teacher logits ({len(args.teacher)} teacher(s)), batch size {args.logit_batch_size}",
                                      footer=_footer(args))
        _finish(args, res, t0)
        return
    if name in TABLE_ANALYSES:  # sentence embeddings only: served by the model's embeddings table when given
        from ..embeddings import evaluation_encoder

        enc = None
        encode = evaluation_encoder(args.model, args.pooler, args.batch_size, args.precision, _one_table(args))
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
        res = core.topk_negatives(encode, read_corpus(args.corpus), batch_sizes=args.batch_sizes, k=args.k, repeats=args.repeats,
                                  pool_size=args.pool_size, seed=args.seed)
        if args.figure:
            plots.plot_topk_negatives(res, args.figure, model_label=args.label or os.path.basename(os.path.normpath(args.model)),
                                      footer=_footer(args))
    elif name == "embed-dim":
        res = core.projected_sts(encode, _root(args.senteval), dims=args.dims, methods=args.methods, seed=args.seed,
                                 max_pairs=args.max_sts_pairs)
        from ..encoder import read_encoder_meta

        res["trained_projection"] = read_encoder_meta(args.model).get("projection_dim")  # SSCL Table 5
    elif name == "neighbours":
        res = core.retrieve_neighbours(encode, read_corpus(args.corpus), queries=args.query, buffer_size=args.buffer_size,
                                       k=args.k, n_queries=args.n_queries, seed=args.seed)
        if args.markdown:
            from ..io import write_text

            write_text(args.markdown, core.neighbours_markdown(res, f"Retrieved neighbours ({args.label or args.model})")
                       + f"\n{_footer(args)}\n")
    else:  # pragma: no cover - argparse restricts the choices
        raise ValueError(name)
    _finish(args, res, t0, [getattr(encode, "table", None)])


def _label_of(path: str, res: dict) -> str:
    if res.get("label"):
        return res["label"]
    parts = os.path.normpath(path).split(os.sep)
    return "/".join(parts[-3:-1]) if len(parts) >= 3 else os.path.basename(path)


def cmd_analyze_figure(args) -> None:
    from ..errors import ConfigError
    from ..io import read_json
    from ..provenance import blocks_of, result_json, summary_line
    from . import plots

    # the footer: the provenance of every result drawn (an input .md stands for its .json sibling)
    results = dict.fromkeys(j for f in [*args.inputs, *(args.sts or [])] if (j := result_json(f)) is not None)
    footer = summary_line([b for f in results for b in blocks_of(read_json(f))])
    if args.kind == "neighbours":  # concatenate the per-model Markdown tables
        from ..io import write_text

        parts = ["# Retrieved neighbours (IS-CSE Table 9 case study)", ""]
        parts += [open(p, encoding="utf-8").read().strip() + "\n" for p in args.inputs]
        write_text(args.out, "\n".join(parts + [footer, ""]))
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
        plots.plot_align_uniform(points, args.out, title=args.title, footer=footer)
    elif args.kind == "cosine-dist":
        plots.plot_cosine_dist(items, args.out, title=args.title, footer=footer)
    elif args.kind == "layers":
        plots.plot_layers(items, args.out, title=args.title, footer=footer)
    elif args.kind == "embed-dim":
        plots.embed_dim_table(items, args.out, args.csv, footer=footer)


TABLE_ANALYSES = ("align-uniform", "cosine-dist", "embed-dim")  # sentence embeddings only (analysis.smk reads this)
DISTILLCSE_ANALYSES = ("model-correlation", "distill-loss", "token-matrix", "ensemble-sts")
ANALYSES = ["align-uniform", "cosine-dist", "layers", "topk-negatives", "teacher-logits", "embed-dim", "neighbours",
            *DISTILLCSE_ANALYSES]


def add_parsers(sub, common) -> None:
    from ..argtypes import positive_int

    sp = common(sub.add_parser("analyze", help="one of the papers' analyses of a model (JSON; some also PNG/Markdown)"))
    sp.add_argument("analysis", choices=ANALYSES)
    sp.add_argument("--model", help="model folder (or packaged:minilm)")
    sp.add_argument("--teacher", action="append", default=[], help="teacher model folder (teacher-logits, distill-loss; repeatable)")
    sp.add_argument("--senteval", help="SentEval folder or prepared pointer folder")
    sp.add_argument("--corpus", help="training corpus (one sentence per line)")
    sp.add_argument("--out", required=True, help="JSON result")
    sp.add_argument("--figure", help="PNG (topk-negatives, teacher-logits, token-matrix)")
    sp.add_argument("--markdown", help="Markdown table (neighbours)")
    sp.add_argument("--label", default="", help="model name in figures (default: the run folder)")
    sp.add_argument("--pooler", default=None, help="override the saved evaluation pooler")
    sp.add_argument("--batch-size", type=positive_int, default=None, help="encoding batch size (default: 128 on a GPU, 64 on CPU, the faster there)")
    sp.add_argument("--embeddings", nargs="+", default=None,
                    help="embeddings table(s) (`csebench embed`): align-uniform, cosine-dist, embed-dim: the model's; "
                         "model-correlation: any of the models' (matched to them); ensemble-sts: the members'")
    sp.add_argument("--precision", default=None, choices=EVAL_PRECISIONS,
                    help="encoding precision (default: the table's, else auto = bf16 on bf16 GPUs, fp32 on CPU)")
    sp.add_argument("--max-sts-pairs", type=int, default=None,
                    help="embed-dim: score each STS task on the seeded subset eval-sts uses (CPU demo scale; default all pairs)")
    sp.add_argument("--split", default="test", choices=["dev", "test"], help="STS-B split (default test)")
    sp.add_argument("--seed", type=int, default=0, help="sampling seed (ensemble-sts: the seed recorded in run_info)")
    sp.add_argument("--include-special", action="store_true", help="layers: count [CLS]/[SEP] in TokSim")
    sp.add_argument("--batch-sizes", type=positive_int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024], help="topk-negatives")
    sp.add_argument("--repeats", type=positive_int, default=100, help="topk-negatives: batches per size")
    sp.add_argument("--pool-size", type=positive_int, default=4096, help="topk-negatives: corpus sentences embedded")
    sp.add_argument("--k", type=int, default=None, help="top-k (topk-negatives: 4) / neighbours (neighbours: 3)")
    sp.add_argument("--logit-batch-size", type=positive_int, default=64, help="teacher-logits, distill-loss: in-batch size N")
    sp.add_argument("--n-batches", type=positive_int, default=20, help="teacher-logits: training batches; distill-loss: batches per split")
    sp.add_argument("--temperature", type=float, default=0.05, help="teacher-logits: softmax temperature of sharpness")
    sp.add_argument("--dims", type=int, nargs="+", default=[128, 256], help="embed-dim: projection sizes")
    sp.add_argument("--methods", nargs="+", default=["random", "pca"], choices=["random", "pca"], help="embed-dim")
    sp.add_argument("--buffer-size", type=int, default=1024, help="neighbours: buffer length L")
    sp.add_argument("--n-queries", type=int, default=4, help="neighbours: random queries when no --query")
    sp.add_argument("--query", action="append", default=[], help="neighbours: query sentence (repeatable)")
    sp.add_argument("--self-teacher", nargs="+", default=[], help="model-correlation: the student's own teacher(s) (S.T.)")
    sp.add_argument("--other-teachers", nargs="+", default=[], help="model-correlation: teachers not used by the student (O.T.)")
    sp.add_argument("--other-students", nargs="+", default=[], help="model-correlation: students of other teachers (O.S.)")
    sp.add_argument("--student-temperature", type=float, default=None, help="distill-loss: tau_s (default: the student's run)")
    sp.add_argument("--teacher-temperature", type=float, default=None, help="distill-loss: tau_t (default: the student's run)")
    sp.add_argument("--reduction", default=None, choices=["mean", "sum"], help="distill-loss: over anchors (default: the run's)")
    sp.add_argument("--max-seq-length", type=int, default=None, help="distill-loss: truncation (default: the run's, else 32)")
    sp.add_argument("--student-representation", default="training", choices=["training", "eval"],
                    help="distill-loss: training = pooler + MLP head as in training (default); eval = evaluation embedding")
    sp.add_argument("--models", nargs="+", default=[], help="token-matrix: models side by side")
    sp.add_argument("--labels", nargs="+", default=[], help="token-matrix: their names (default: run/seed folders)")
    sp.add_argument("--sentence", default=None, help="token-matrix: the sentence (default: the first STS-B test sentence)")
    sp.add_argument("--layer", type=int, default=-1, help="token-matrix: hidden_states index (-1 = last layer)")
    sp.add_argument("--title", default="", help="token-matrix: figure title")
    sp.add_argument("--pairs-out", default=None, help="ensemble-sts: per-pair cosines .npz (as eval-sts --pairs-out)")
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
            "embed-dim": ["model", "senteval"], "neighbours": ["model", "corpus"],
            "model-correlation": ["model", "senteval"], "distill-loss": ["model", "teacher", "corpus", "senteval"],
            "token-matrix": [], "ensemble-sts": ["embeddings", "senteval"]}[args.analysis]
    missing = [f"--{n}" for n in need if not getattr(args, n)]
    if missing:
        raise ConfigError(f"analyze {args.analysis} needs {', '.join(missing)}")
    if args.analysis == "token-matrix" and not (args.models or args.model):
        raise ConfigError("analyze token-matrix needs --models (or --model)")
    if args.analysis == "token-matrix" and not (args.sentence or args.senteval):
        raise ConfigError("analyze token-matrix needs --sentence or --senteval (its first STS-B test sentence)")
    if args.labels and len(args.labels) != len(args.models or [args.model]):
        raise ConfigError("--labels needs one label per --models entry")
    if args.analysis == "model-correlation" and not (args.self_teacher or args.other_teachers or args.other_students):
        raise ConfigError("analyze model-correlation needs --self-teacher, --other-teachers and/or --other-students")
    if args.k is None:
        args.k = 3 if args.analysis == "neighbours" else 4
    cmd_analyze(args)

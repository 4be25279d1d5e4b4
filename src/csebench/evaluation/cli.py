"""`csebench embed`, `eval-sts`, `eval-transfer`, `eval-probing`, `eval-mteb`: a model's evaluations, each
written with its provenance and the run it is booked to.
"""

from __future__ import annotations

import logging
import os
import time

from csebench.core.commands import (BATCH_SIZE, EVAL_ENCODING, EVALUATED_RUN, MODEL, NO_PROGRESS, NO_VERIFY, OUT,
                                    PARAMS, POOLER, PREFIX, SENTEVAL, Commands, option)
from csebench.core.argtypes import seed_int
from csebench.core.choices import EVAL_PRECISIONS
from csebench.core.errors import ConfigError, DataError
from csebench.study.cli import name_run, params_of

COMMANDS = Commands(stage=30)


def classifier_options(cap: str) -> tuple:
    """eval-transfer and eval-probing: SentEval's classifiers on embeddings (``cap``: what the training cap does)."""
    return (option("--max-train-sentences", type=int, default=None, help=f"CPU demo only: {cap} (recorded as protocol=capped)"),
            option("--max-test-sentences", type=int, default=None,
                   help="CPU demo only: subsample each held-out dev/test split to about N items (recorded as protocol=capped)"),
            option("--senteval-seed", type=seed_int, default=1111, help="SentEval's classifier seed (default: 1111)"),
            *EVALUATED_RUN, option("--seed", type=int, default=0, help="run seed (names the run; see --senteval-seed)"))


# embed and eval-sts must agree on the pairs (the table holds what eval-sts scores)
STS_CAP = (option("--max-sts-pairs", type=int, default=None,
                  help="CPU demo only: score each STS task on a seeded subset of about N pairs (recorded as protocol=capped)"),
           option("--sts-pairs", nargs="+", default=[], metavar="[NAME=]FILE",
                  help="your own STS sets, .tsv or .csv with columns sentence1, sentence2, score[, split]: their test "
                       "rows (all rows without a split column) are scored beside the 7 tasks, never in their average"))


def _eval_encode_fn(args):
    """The saved model's (or its embeddings table's) encode function for an evaluator."""
    from csebench.evaluation.embeddings import evaluation_encoder

    return evaluation_encoder(args.model, args.pooler, args.batch_size, args.precision, args.embeddings,
                              progress=not args.no_progress, prefix=getattr(args, "prefix", None))


@COMMANDS.command("embed", "encode every evaluation sentence of a model once (STS, transfer, analyses)", PARAMS, MODEL,
                  SENTEVAL, OUT.but(help="embeddings table (.npz)"), POOLER, PREFIX, BATCH_SIZE,
                  option("--precision", default="fp32", choices=EVAL_PRECISIONS,
                help="fp32 (default: SentEval's numbers), bf16, auto (bf16 on bf16 GPUs), fast (bf16 where native: bf16 "
                     "GPUs, AVX512-BF16/AMX CPUs), int8 (CPU: Linear layers quantized; faster, not exact: "
                     "docs/senteval-agreement.md)"),
                  option("--no-transfer", action="store_true", help="STS sentences only"),
                  option("--max-train-sentences", type=int, default=None, help="the transfer cap eval-transfer will use"),
                  option("--max-test-sentences", type=int, default=None, help="the held-out split cap eval-transfer will use"),
                  option("--senteval-seed", type=seed_int, default=1111, help="the transfer (and STS cap) seed eval-transfer/eval-sts will use"),
                  option("--stsb-whole", nargs="*", choices=("dev", "test"), default=None,
                help="STS-B splits encoded in full for the analyses of STS-B sentences (default: test, their default "
                     "split; none with --max-sts-pairs, whose analyses read the capped pairs eval-sts scores; a "
                     "sentence the table lacks is encoded when an analysis asks for it)"),
                  STS_CAP, NO_PROGRESS, NO_VERIFY)
def cmd_embed(args) -> None:
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.embeddings import evaluation_sentences, model_encoder, model_fingerprint, write_embeddings
    from csebench.model.encoder import eval_pooler_of
    from csebench.evaluation.sts import load_extra_sets
    from csebench.model.encoder import autocast_name
    from csebench.core.provenance import collect

    t0 = time.perf_counter()
    if args.stsb_whole is None:  # a capped evaluation's analyses read the capped STS-B pairs (analysis.core.stsb_pairs)
        args.stsb_whole = [] if args.max_sts_pairs else ["test"]
    extra = load_extra_sets(args.sts_pairs, args.max_sts_pairs, args.senteval_seed)
    sentences = evaluation_sentences(senteval_root(args.senteval), transfer=not args.no_transfer,
                                     max_train_sentences=args.max_train_sentences, seed=args.senteval_seed,
                                     max_sts_pairs=args.max_sts_pairs, max_test_sentences=args.max_test_sentences,
                                     extra_sets=extra, stsb_whole=tuple(args.stsb_whole))
    log = logging.getLogger("csebench")
    log.info("encoding %d distinct evaluation sentences (%s precision)", len(sentences), args.precision)
    encode = model_encoder(args.model, args.pooler, args.batch_size, args.precision, progress=not args.no_progress,
                           prefix=args.prefix)
    emb = encode(sentences)
    autocast = autocast_name(args.precision)
    meta = {"model": args.model, "model_fingerprint": model_fingerprint(args.model),  # packaged and hub ids too
            "pooler": getattr(encode, "pooler", None) or eval_pooler_of(args.model, args.pooler),  # resolved, never null
            "prefix": getattr(encode, "prefix", ""),  # put before every sentence (table_encode checks it)
            "precision": args.precision, "autocast": autocast,
            "transfer": not args.no_transfer, "max_train_sentences": args.max_train_sentences,
            "max_test_sentences": args.max_test_sentences,
            "max_sts_pairs": args.max_sts_pairs, "stsb_whole": list(args.stsb_whole),
            "senteval_seed": args.senteval_seed, "seconds": round(time.perf_counter() - t0, 2),
            "provenance": collect(precision=args.precision, autocast=autocast)}
    write_embeddings(args.out, sentences, emb, meta)
    log.info("embedded %d sentences in %.1f s -> %s", len(sentences), meta["seconds"], args.out)


@COMMANDS.command("eval-sts", "STS12-16, STS-B, SICK-R (Spearman x100)", PARAMS, EVAL_ENCODING, PREFIX, MODEL, SENTEVAL,
                  OUT.but(required=False, default=None, help="result JSON (default: printed to standard output)"),
                  option("--pairs-out", default=None, help="also write per-pair cosine and gold scores (.npz) for the paired bootstrap "
                                                  "of the suite tables (`results render --item suite/SUITE`)"),
                  STS_CAP, option("--senteval-seed", type=seed_int, default=1111, help="seed of the --max-sts-pairs subsets (default: 1111)"),
                  EVALUATED_RUN)
def cmd_eval_sts(args) -> None:
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts, load_extra_sets

    run_info = _run_info(args)  # first: a mistake in --config or --suite stops before minutes of encoding
    extra = load_extra_sets(args.sts_pairs, args.max_sts_pairs, args.senteval_seed)  # a bad file too
    encode = _eval_encode_fn(args)
    t0 = time.perf_counter()
    res = evaluate_sts(encode, senteval_root(args.senteval), keep_pairs=bool(args.pairs_out),
                       max_pairs=args.max_sts_pairs, seed=args.senteval_seed, extra=extra)
    _refuse_undefined("STS", res, args)
    if args.pairs_out:
        from csebench.evaluation.sts import save_pairs

        save_pairs(args.pairs_out, res.pop("pairs"))
    info = _encoding_info(args, encode)
    pooler, prefix = info["pooler"], ({"prefix": info["prefix"]} if info.get("prefix") else {})
    if args.out:
        _write_evaluation(args, res, encode, run_info, t0)
    else:
        from csebench.core.io import dumps_json

        printed = {"tasks": res["tasks"], "avg": res.get("avg"), "protocol": res.get("protocol"), "model": args.model,
                   "pooler": pooler, **prefix}
        for key in ("warning", "extra_sets"):  # a capped run's caveat; your own STS sets (--sts-pairs), beside the 7
            if res.get(key):
                printed[key] = res[key]
        print(dumps_json(printed, indent=2))
    logging.getLogger("csebench").info("STS avg %.2f (pooler %s): %s%s", res.get("avg", float("nan")), pooler,
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()),
                                       "".join(f"; {k} {v['spearman']:.2f} (own set)" for k, v in (res.get("extra_sets") or {}).items()))


@COMMANDS.command("eval-transfer", "SentEval transfer tasks MR CR SUBJ MPQA SST2 TREC MRPC (accuracy x100)", PARAMS,
                  EVAL_ENCODING, PREFIX, MODEL, SENTEVAL, OUT,
                  option("--tasks", nargs="+", default=None, help="subset of MR CR SUBJ MPQA SST2 TREC MRPC (default: all)"),
                  option("--no-transfer", action="store_true",
                help="the suite switched the transfer tasks off (transfer: false): write a result that says so, "
                     "load and encode nothing"),
                  classifier_options("subsample each classifier training set to N items"))
def cmd_eval_transfer(args) -> None:
    from csebench.evaluation.locate import senteval_root
    from csebench.model.encoder import eval_pooler_of
    from csebench.evaluation.transfer import TASKS, evaluate_transfer, load_transfer_task

    if args.no_transfer:
        from csebench.evaluation.envelope import write_result

        run_info = _run_info(args)
        write_result(args.out, {"tasks": {}, "protocol": "off",
                                "warning": "transfer tasks switched off for this suite (transfer: false in params.yaml): no scores"},
                     {"eval_seconds": 0.0, "run_info": run_info}, args.precision, [])
        logging.getLogger("csebench").info("transfer: off for this suite (transfer: false); %s says so", args.out)
        return

    root = senteval_root(args.senteval)
    data = {t: load_transfer_task(root, t) for t in args.tasks or TASKS}  # bad data fails before the model loads
    res = _classifier_eval(args, evaluate_transfer, root, data)
    if "avg" in res:
        avg = f"avg {res['avg']:.2f}"
    else:
        n = len(res["avg_tasks"])
        avg = f"avg of {n} task{'' if n == 1 else 's'} {res['avg_subset']:.2f}, not the 7-task average"
    logging.getLogger("csebench").info("transfer %s (%s, pooler %s): %s", avg, res["protocol"], eval_pooler_of(args.model, args.pooler),
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()))


@COMMANDS.command("eval-probing", "SentEval probing tasks, e.g. SentLen TreeDepth CoordInv (accuracy x100)", PARAMS,
                  EVAL_ENCODING, PREFIX, MODEL,
                  option("--probing", required=True, help="folder of SentEval's probing files, or the prepared pointer folder"), OUT,
                  option("--tasks", nargs="+", default=None,
                help="SentLen WC TreeDepth TopConst BShift Tense SubjNum ObjNum SOMO CoordInv, or SentEval's names "
                     "(default: SSCL Table 4's SentLen TreeDepth CoordInv)"),
                  classifier_options("subsample each train split to N sentences"))
def cmd_eval_probing(args) -> None:
    from csebench.evaluation.locate import probing_root
    from csebench.evaluation.probing import SSCL_TASKS, evaluate_probing, load_probing_task, resolve_tasks

    root = probing_root(args.probing)
    data = {t: load_probing_task(root, t) for t in resolve_tasks(args.tasks or SSCL_TASKS)}  # bad data fails first
    res = _classifier_eval(args, evaluate_probing, root, data)
    logging.getLogger("csebench").info("probing (%s): %s", res["protocol"],
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()))


def _classifier_eval(args, evaluate, root, data: dict) -> dict:
    """Transfer or probing: encode, fit the classifiers, write the JSON (with timing, run info, provenance)."""
    run_info = _run_info(args)  # first: a mistake in --config or --suite stops before minutes of encoding
    encode = _eval_encode_fn(args)
    t0 = time.perf_counter()
    res = evaluate(encode, root, tasks=list(data), seed=args.senteval_seed,
                   max_train_sentences=args.max_train_sentences, task_data=data, max_test_sentences=args.max_test_sentences)
    _refuse_undefined(args.command.removeprefix("eval-"), res, args)
    _write_evaluation(args, res, encode, run_info, t0)
    return res


def _write_evaluation(args, res: dict, encode, run_info: dict, t0: float) -> None:
    """An eval-* result in its envelope (csebench.evaluation.envelope): timing, how the vectors were made, the run."""
    from csebench.evaluation.envelope import write_result

    write_result(args.out, res, {"eval_seconds": round(time.perf_counter() - t0, 2), "encoding": _encoding_info(args, encode),
                                 "run_info": run_info}, args.precision, [getattr(encode, "table", None)])


def _refuse_undefined(what: str, res: dict, args) -> None:
    """An evaluation whose scores are all undefined, or whose average is, is an error, not a result:
    constant or non-finite embeddings (damaged weights) would otherwise give an all-null file and exit 0."""
    import math

    def bad(v) -> bool:
        return not (isinstance(v, (int, float)) and math.isfinite(v))

    tasks = res.get("tasks") or {}
    avg = res.get("avg", res.get("avg_subset"))
    if tasks and (all(bad(v) for v in tasks.values()) or (avg is not None and bad(avg))):
        undefined = [k for k, v in tasks.items() if bad(v)]
        raise DataError(f"the {what} average of {args.model} is undefined ({', '.join(undefined)}: not a finite number): "
                        f"its embeddings are constant or not finite; {args.out} not written. Check the model's weights")


def _encoding_info(args, encode) -> dict:
    from csebench.evaluation.envelope import encoding_info

    return encoding_info(args.model, args.pooler, args.precision, args.embeddings, encode)


def _run_info(args) -> dict:
    params = params_of(args) if args.suite or args.key or args.config else None  # checked as every command checks them
    if args.key:
        name_run(args, params)
    if not (args.suite and args.run):
        return {"name": os.path.basename(os.path.normpath(args.model)), "method": "external", "backbone": args.model}
    suite = params.suite(args.suite)
    suite.resolve(args.run, args.seed)  # the whole run checked, as training checks it
    return suite.run_info(args.run, args.seed)


@COMMANDS.command("eval-mteb", "MTEB tasks with the mteb package (MTEB protocol; pip install -e '.[mteb]')", PARAMS,
                  EVAL_ENCODING, MODEL.but(required=False, default=None),
                  option("--out", default=None, help="folder for MTEB's result files (<Task>.json), model_meta.json and mteb.json"),
                  option("--tasks", nargs="+", default=None,
                help="MTEB task names (default: the STS tasks of MTEB(eng, v2) and STS16, Banking77Classification, "
                     "AmazonCounterfactualClassification, ArguAna, SciFact)"),
                  option("--download-only", action="store_true",
                help="fetch the tasks' datasets into the Hugging Face datasets cache (needs network) and stop"),
                  EVALUATED_RUN, build=lambda parser: parser.set_defaults(embeddings=None), out_folder=True)  # MTEB's sentences are in no SentEval table
def cmd_eval_mteb(args) -> None:
    from csebench.evaluation.embeddings import model_dim, model_fingerprint
    from csebench.evaluation.mteb_eval import DEFAULT_TASKS, PROTOCOL, evaluate_mteb, load_task_data, resolve_tasks
    from csebench.evaluation.envelope import envelope

    tasks = resolve_tasks(args.tasks or DEFAULT_TASKS)
    if args.no_progress:  # datasets' bars while MTEB's data loads
        import datasets

        datasets.disable_progress_bars()
    log = logging.getLogger("csebench")
    if args.download_only:
        for task in tasks:
            load_task_data(task)
        log.info("MTEB data of %d tasks in the local datasets cache: %s", len(tasks), ", ".join(t.metadata.name for t in tasks))
        return
    if not (args.model and args.out):
        raise ConfigError("eval-mteb: --model and --out are required (only --download-only runs without them)")
    run_info = _run_info(args)  # first: a mistake in --config or --suite stops before any data is read
    for task in tasks:  # every dataset before the model: a missing one stops the command at once
        load_task_data(task)
    encode = _eval_encode_fn(args)
    fingerprint = model_fingerprint(args.model)
    name = "csebench/" + (f"{run_info['suite']}__{run_info['name']}__seed{run_info['seed']}" if "suite" in run_info
                          else run_info["name"])
    res = evaluate_mteb(encode, tasks, args.out, name=name, revision=fingerprint, dim=model_dim(args.model),
                        batch_size=args.batch_size or 64,
                        extra=envelope({"model": args.model, "model_fingerprint": fingerprint, "run_info": run_info,
                                        "encoding": _encoding_info(args, encode)}, args.precision))
    log.info("%s: %s", PROTOCOL, ", ".join(f"{k} {v['score']:.2f}" for k, v in res["tasks"].items()))

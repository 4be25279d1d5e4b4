"""Command-line interface: the thin layer the Snakemake rules (and users) call.

    csebench prepare-corpus   --data demo --out data/demo/corpus.txt
    csebench prepare-senteval --data demo --out data/demo/senteval
    csebench train            --suite demo --run minilm-simcse --seed 42 --corpus ... --senteval ... --out DIR
    csebench runs             [--suites demo paper]    each suite's runs, their folders, which are shared
    csebench teacher-cache    --model DIR/model --corpus data/demo/corpus.txt --out results/runs/KEY/seed42/teacher/embeddings.npy
    csebench eval-sts         --model DIR/model --senteval ... --out DIR/sts.json
    csebench eval-transfer    --model DIR/model --senteval ... --out DIR/transfer.json
    csebench prepare-probing  --data wiki1m --out data/wiki1m/probing
    csebench eval-probing     --model DIR/model --probing data/wiki1m/probing --out DIR/probing.json
    csebench eval-mteb        --model DIR/model --tasks STS12 STSBenchmark --out DIR/mteb
    csebench results render   --item suite/demo is-cse/table-4   (a suite's report, a paper table)
    csebench model-card       --run results/demo/runs/simcse/seed42
    csebench push             --run results/demo/runs/simcse/seed42 --repo-id ORG/NAME [--public] [--dry-run]
    csebench show-config      --suite demo --run minilm-simcse --seed 42
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time

from .argtypes import positive_int
from .errors import ConfigError, CsebenchError, TrainingError


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:  # transformers prints load reports (e.g. the unused BERT pooler) and shard-writing bars
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _params(args):
    from .config import load_params

    return load_params(args.params, args.config)


def cmd_prepare_corpus(args) -> None:
    from .config import data_config
    from .data import prepare_corpus

    prepare_corpus(data_config(_params(args), args.data).corpus, args.out)


def cmd_prepare_senteval(args) -> None:
    from .config import data_config
    from .data import prepare_senteval

    prepare_senteval(data_config(_params(args), args.data).senteval, args.out)


def cmd_prepare_probing(args) -> None:
    from .config import probing_source
    from .data import prepare_probing

    prepare_probing(probing_source(_params(args), args.data), args.out, args.tasks)


def _name_run(args, params: dict) -> None:
    """--key KEY (a run's folder under results/runs, what Snakemake passes) stands for the first suite
    and run of params.yaml that list it at --seed (docs/runs.md); else --suite and --run name it."""
    if getattr(args, "key", None):
        if args.suite or args.run:
            raise ConfigError("give either --key or --suite and --run, not both")
        from .workflow import runs_of

        args.suite, args.run = runs_of(params).first(args.key, args.seed)
    elif not (args.suite and args.run):
        raise ConfigError("name the run: --suite SUITE --run RUN (or --key KEY, its folder under results/runs)")


def cmd_show_config(args) -> None:
    from .config import resolve_run
    from .io import dumps_json

    params = _params(args)
    _name_run(args, params)
    print(dumps_json(resolve_run(params, args.suite, args.run, args.seed).record(), default=str))


def cmd_runs(args) -> None:
    from .workflow import jobs, runs_of

    params = _params(args)
    runs = runs_of(params)
    listed = [(suite, run, seed) for suite in args.suites or list((params.get("suites") or {})) for run, seed in jobs(params, suite)]
    for suite, run, seed in listed:
        same = runs.same_run_as(suite, run, seed)
        print(f"{suite + '/' + run + ' seed ' + str(seed):<60} {runs.folder(suite, run, seed)}" + (f"  same run as {same}" if same else ""))
    distinct = {runs.folder(*job) for job in listed}
    print(f"{len(listed)} runs listed, {len(distinct)} distinct (each trained once; docs/runs.md)")


def _refuse_view(out: str, params: dict, suite: str, run: str, seed: int) -> None:
    """A suite's folder of a run is a view (links and relabelled copies, docs/runs.md): training there
    would leave the run's own folder, which every suite listing the run reads, behind."""
    from .workflow import run_dir, run_folder

    view = os.path.join(out, "train.json")
    if os.path.islink(os.path.join(out, "model")) and os.path.isfile(view):
        from .io import read_json

        folder = read_json(view).get("run_folder", "the run's folder under results/runs")
    elif os.path.normpath(out) == os.path.normpath(run_dir(params, suite, run, seed)):  # the view, not made yet
        folder = run_folder(params, suite, run, seed)
    else:
        return
    raise TrainingError(f"{out} is a suite's view of the run in {folder}: train there (--out {folder}), "
                        "or let Snakemake do it (docs/runs.md)")


def cmd_train(args) -> None:
    from . import distributed
    from .config import resolve_run
    from .io import dumps_json
    from .runlock import run_lock

    params = _params(args)
    _name_run(args, params)
    cfg = resolve_run(params, args.suite, args.run, args.seed)
    _refuse_view(args.out, params, args.suite, args.run, args.seed)
    # one process per run folder (under torchrun rank 0 holds the lock: the other ranks write nothing there)
    with run_lock(args.out) if int(os.environ.get("RANK", 0)) == 0 else contextlib.nullcontext():
        if os.path.isfile(os.path.join(args.out, "train.json")) and not args.force:
            raise TrainingError(f"run folder {args.out} holds a finished run (train.json); pass --force to train it "
                                "again (the finished run stays until the new one has completed) or choose another --out")
        if not cfg.train:  # an evaluation-only run: the backbone itself is the model, no corpus is read
            from .evalonly import write_untrained_run

            summary = write_untrained_run(cfg, args.senteval, args.out, cfg.dev_file)
        else:
            if not args.corpus:
                raise ConfigError(f"train: --corpus is required for run {args.suite}/{args.run} "
                                  "(only runs with train: false read none)")
            from .trainer import Trainer

            distributed.init_from_env()
            try:
                trainer = Trainer(cfg, args.corpus, args.senteval, args.out, cache_dir=args.cache_dir,
                                  show_progress=not args.no_progress, teacher_cache=args.teacher_cache, dev_file=cfg.dev_file)
                summary = trainer.run()
            finally:
                distributed.shutdown()
    if distributed.local_rank() == 0:
        logging.getLogger("csebench").info("done: %s", dumps_json(summary, indent=None))


def _eval_encode_fn(args):
    """The saved model's (or its embeddings table's) encode function for an evaluator."""
    from .embeddings import evaluation_encoder

    return evaluation_encoder(args.model, args.pooler, args.batch_size, args.precision, args.embeddings,
                              progress=not args.no_progress)


def cmd_embed(args) -> None:
    from .data import senteval_root
    from .embeddings import evaluation_sentences, model_encoder, model_fingerprint, write_embeddings
    from .evaluation.sts import load_extra_sets
    from .provenance import autocast_name, collect

    t0 = time.perf_counter()
    extra = load_extra_sets(args.sts_pairs, args.max_sts_pairs, args.senteval_seed)
    sentences = evaluation_sentences(senteval_root(args.senteval), transfer=not args.no_transfer,
                                     max_train_sentences=args.max_train_sentences, seed=args.senteval_seed,
                                     max_sts_pairs=args.max_sts_pairs, max_test_sentences=args.max_test_sentences,
                                     extra_sets=extra)
    log = logging.getLogger("csebench")
    log.info("encoding %d distinct evaluation sentences (%s precision)", len(sentences), args.precision)
    emb = model_encoder(args.model, args.pooler, args.batch_size, args.precision, progress=not args.no_progress)(sentences)
    autocast = autocast_name(args.precision)
    meta = {"model": args.model, "model_fingerprint": model_fingerprint(args.model),  # packaged and hub ids too
            "pooler": args.pooler, "precision": args.precision, "autocast": autocast,
            "transfer": not args.no_transfer, "max_train_sentences": args.max_train_sentences,
            "max_test_sentences": args.max_test_sentences,
            "max_sts_pairs": args.max_sts_pairs,
            "senteval_seed": args.senteval_seed, "seconds": round(time.perf_counter() - t0, 2),
            "provenance": collect(precision=args.precision, autocast=autocast)}
    write_embeddings(args.out, sentences, emb, meta)
    log.info("embedded %d sentences in %.1f s -> %s", len(sentences), meta["seconds"], args.out)


def cmd_eval_sts(args) -> None:
    from .data import senteval_root
    from .evaluation.sts import evaluate_sts, load_extra_sets
    from .io import write_json
    from .provenance import for_evaluation

    run_info = _run_info(args)  # first: a mistake in --config or --suite stops before minutes of encoding
    extra = load_extra_sets(args.sts_pairs, args.max_sts_pairs, args.senteval_seed)  # a bad file too
    encode = _eval_encode_fn(args)
    t0 = time.perf_counter()
    res = evaluate_sts(encode, senteval_root(args.senteval), keep_pairs=bool(args.pairs_out),
                       max_pairs=args.max_sts_pairs, seed=args.senteval_seed, extra=extra)
    if args.pairs_out:
        from .evaluation.sts import save_pairs

        save_pairs(args.pairs_out, res.pop("pairs"))
    res["eval_seconds"] = round(time.perf_counter() - t0, 2)
    res["encoding"] = _encoding_info(args, encode)
    res["run_info"] = run_info
    res["provenance"] = for_evaluation(args.precision, [getattr(encode, "table", None)])
    write_json(args.out, res, undefined_ok=True)
    logging.getLogger("csebench").info("STS avg %.2f: %s%s", res.get("avg", float("nan")),
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()),
                                       "".join(f"; {k} {v['spearman']:.2f} (own set)" for k, v in (res.get("extra_sets") or {}).items()))


def cmd_eval_transfer(args) -> None:
    from .data import senteval_root
    from .evaluation.transfer import TASKS, evaluate_transfer, load_transfer_task

    root = senteval_root(args.senteval)
    data = {t: load_transfer_task(root, t) for t in args.tasks or TASKS}  # bad data fails before the model loads
    res = _classifier_eval(args, evaluate_transfer, root, data)
    if "avg" in res:
        avg = f"avg {res['avg']:.2f}"
    else:
        n = len(res["avg_tasks"])
        avg = f"avg of {n} task{'' if n == 1 else 's'} {res['avg_subset']:.2f}, not the 7-task average"
    logging.getLogger("csebench").info("transfer %s (%s): %s", avg, res["protocol"],
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()))


def cmd_eval_probing(args) -> None:
    from .data import probing_root
    from .evaluation.probing import SSCL_TASKS, evaluate_probing, load_probing_task, resolve_tasks

    root = probing_root(args.probing)
    data = {t: load_probing_task(root, t) for t in resolve_tasks(args.tasks or SSCL_TASKS)}  # bad data fails first
    res = _classifier_eval(args, evaluate_probing, root, data)
    logging.getLogger("csebench").info("probing (%s): %s", res["protocol"],
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()))


def _classifier_eval(args, evaluate, root, data: dict) -> dict:
    """Transfer or probing: encode, fit the classifiers, write the JSON (with timing, run info, provenance)."""
    from .io import write_json
    from .provenance import for_evaluation

    run_info = _run_info(args)  # first: a mistake in --config or --suite stops before minutes of encoding
    encode = _eval_encode_fn(args)
    t0 = time.perf_counter()
    res = evaluate(encode, root, tasks=list(data), seed=args.senteval_seed,
                   max_train_sentences=args.max_train_sentences, task_data=data, max_test_sentences=args.max_test_sentences)
    res["eval_seconds"] = round(time.perf_counter() - t0, 2)
    res["encoding"] = _encoding_info(args, encode)
    res["run_info"] = run_info
    res["provenance"] = for_evaluation(args.precision, [getattr(encode, "table", None)])
    write_json(args.out, res, undefined_ok=True)
    return res


def _encoding_info(args, encode) -> dict:
    table = getattr(encode, "table", None)
    if table is None:
        return {"embeddings": None, "precision": args.precision or "auto"}
    return {"embeddings": args.embeddings, "precision": table.meta.get("precision"), "autocast": table.meta.get("autocast"),
            "sentences_in_table": len(table.row), "missing_from_table": encode.missing}


def _run_info(args) -> dict:
    params = _params(args) if args.suite or args.key or args.config else None  # checked as every command checks them
    if args.key:
        _name_run(args, params)
    if not (args.suite and args.run):
        return {"name": os.path.basename(os.path.normpath(args.model)), "method": "external", "backbone": args.model}
    from .config import resolve_run, run_info

    resolve_run(params, args.suite, args.run, args.seed)  # the whole run checked, as training checks it
    return run_info(params, args.suite, args.run, args.seed)


def cmd_eval_mteb(args) -> None:
    from .embeddings import model_dim, model_fingerprint
    from .evaluation.mteb_eval import DEFAULT_TASKS, PROTOCOL, evaluate_mteb, load_task_data, resolve_tasks
    from .provenance import for_evaluation

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
                        extra={"model": args.model, "model_fingerprint": fingerprint, "run_info": run_info,
                               "encoding": _encoding_info(args, encode),
                               "provenance": for_evaluation(args.precision)})
    log.info("%s: %s", PROTOCOL, ", ".join(f"{k} {v['score']:.2f}" for k, v in res["tasks"].items()))


def cmd_teacher_cache(args) -> None:
    from .teachers import build_teacher_cache

    build_teacher_cache(args.model, args.corpus, args.out, max_seq_length=args.max_seq_length,
                        batch_size=args.batch_size, cache_dir=args.cache_dir)


def cmd_plan(args) -> None:
    from .plan import plan, render_plan
    from .results.registry import default_suites

    params = _params(args)
    print(render_plan(plan(params, args.suites or default_suites(params))))


def _depth(text: str) -> int | None:
    if text == "published":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of layers >= 1 or 'published', got {text!r}")
    return value


def cmd_rehearse(args) -> None:
    from pathlib import Path

    from .rehearse import rehearse, report

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    quiet = logging.Filter()  # the console shows the rehearsal's lines and errors; every command's log goes to the file
    quiet.filter = lambda rec: rec.name == "csebench.rehearse" or rec.levelno >= logging.ERROR
    for h in root.handlers:
        h.addFilter(quiet)
    fh = logging.FileHandler(out / "rehearse.log", mode="w", encoding="utf-8")
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(fh)
    try:
        outcome = rehearse(args.params, args.config, args.suites, out, limit=args.limit, only=args.only,
                           keep_going=not args.stop, keep_models=args.keep_models, depth=args.depth)
    finally:
        root.removeHandler(fh)
        fh.close()
        for h in root.handlers:
            h.removeFilter(quiet)
    print(report(outcome))
    if outcome.failed:
        raise TrainingError(f"{len(outcome.failed)} rehearsal(s) failed (listed above; {out / 'rehearse.log'} has each traceback)")


def cmd_view_run(args) -> None:
    from .config import run_info
    from .runviews import write_view

    params = _params(args)
    first = args.first
    if first is None:  # by hand: resolve every run of params.yaml (Snakemake passes --first)
        from .workflow import runs_of

        runs = runs_of(params)
        first = "/".join(runs.first(runs.key(args.suite, args.run), args.seed))
    write_view(run_info(params, args.suite, args.run, args.seed), first, args.source, args.out, args.names)


def cmd_model_card(args) -> None:
    from .modelcard import write_card

    path = write_card(args.run)
    logging.getLogger("csebench").info("model card: %s (and %s)", path, os.path.join(args.run, "model_card.md"))


def cmd_push(args) -> None:
    from .push import push

    files = push(args.run, args.repo_id, public=args.public, dry_run=args.dry_run)
    folder = os.path.join(args.run, "model")
    if args.dry_run:
        print(f"would upload {len(files)} files from {folder} to {args.repo_id} "
              f"({'public' if args.public else 'private'}); the card is {os.path.join(folder, 'README.md')}:")
        print("\n".join(f"  {f}" for f in files))
    else:
        logging.getLogger("csebench").info("pushed %d files from %s to https://huggingface.co/%s", len(files), folder, args.repo_id)


def cmd_suite_metrics(args) -> None:
    from .io import write_json
    from .results.tidy import suite_metrics

    write_json(args.out, suite_metrics(_params(args), args.suite, args.results))


def cmd_dvc_yaml(args) -> None:
    from .dvcgen import main_dvc_yaml

    rc = main_dvc_yaml(args.params, args.out, args.check)
    if rc:
        raise SystemExit(rc)


def build_parser() -> argparse.ArgumentParser:
    from .config import EVAL_PRECISIONS

    p = argparse.ArgumentParser(prog="csebench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch (default: torch's choice)")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, run: bool = False):
        sp.add_argument("--params", default="params.yaml", help="hyperparameter file (default: params.yaml)")
        sp.add_argument("--config", action="append", default=[], help="YAML file merged over params (repeatable)")
        if run:
            sp.add_argument("--suite")
            # --run-name: the same option for torchrun, whose own parser takes --run for an
            # abbreviation of its --run-path and stops
            sp.add_argument("--run", "--run-name", dest="run", help="run name within the suite")
            sp.add_argument("--seed", type=int, required=True)
            run_key_option(sp)
        return sp

    def run_key_option(sp):
        sp.add_argument("--key", help="instead of --suite/--run: the run's key (its folder results/runs/KEY), named "
                                      "by the first suite and run of params.yaml that list it")

    def evaluated_run_options(sp, seed_help=None):
        """The run a result is booked to (its run_info), for the eval commands."""
        sp.add_argument("--suite")
        sp.add_argument("--run")
        sp.add_argument("--seed", type=int, default=0, help=seed_help)
        run_key_option(sp)
        sp.add_argument("--no-progress", action="store_true")

    sp = common(sub.add_parser("prepare-corpus", help="write the (sampled) training corpus"))
    sp.add_argument("--data", required=True, help="data source name in params.yaml")
    sp.add_argument("--out", required=True)
    sp.set_defaults(func=cmd_prepare_corpus)

    sp = common(sub.add_parser("prepare-senteval", help="locate or download the SentEval data"))
    sp.add_argument("--data", required=True)
    sp.add_argument("--out", required=True, help="folder for the pointer file ROOT (and the extracted tarball)")
    sp.set_defaults(func=cmd_prepare_senteval)

    sp = common(sub.add_parser("prepare-probing", help="locate or download SentEval's probing-task files"))
    sp.add_argument("--data", required=True, help="data source name in params.yaml (its 'probing' entry)")
    sp.add_argument("--out", required=True, help="folder for the pointer file ROOT")
    sp.add_argument("--tasks", nargs="+", default=None, help="probing tasks (default: SentLen TreeDepth CoordInv)")
    sp.set_defaults(func=cmd_prepare_probing)

    sp = common(sub.add_parser("show-config", help="print a run's resolved configuration, key and fingerprint"), run=True)
    sp.set_defaults(func=cmd_show_config)

    sp = common(sub.add_parser("runs", help="each suite's runs, the folder each is trained in, and which are shared"))
    sp.add_argument("--suites", nargs="+", help="default: every suite of params.yaml")
    sp.set_defaults(func=cmd_runs)

    sp = common(sub.add_parser("view-run", help="a suite's view of a shared run: relabelled JSON results, links to the rest"))
    sp.add_argument("--suite", required=True)
    sp.add_argument("--run", required=True)
    sp.add_argument("--seed", type=int, required=True)
    sp.add_argument("--from", dest="source", required=True, help="the run's folder (or its evaluation/analysis folder)")
    sp.add_argument("--out", required=True, help="the suite's folder, e.g. results/SUITE/runs/RUN/seedN")
    sp.add_argument("--first", help="SUITE/RUN: the first suite and run of params.yaml listing this run (default: worked out)")
    sp.add_argument("names", nargs="+", help="entries of --from to show in --out")
    sp.set_defaults(func=cmd_view_run)

    sp = common(sub.add_parser("train", help="train one run; resumes from its checkpoint if present"), run=True)
    sp.add_argument("--corpus", default=None, help="training corpus (required unless the run has train: false)")
    sp.add_argument("--senteval", required=True, help="SentEval folder or prepared pointer folder")
    sp.add_argument("--out", required=True, help="run folder: model/, train.json, curves")
    sp.add_argument("--cache-dir", default="data/cache", help="tokenized-corpus cache (default: data/cache)")
    sp.add_argument("--teacher-cache", action="append", default=[], help="cached teacher embeddings (DistillCSE)")
    sp.add_argument("--no-progress", action="store_true")
    sp.add_argument("--force", action="store_true",
                    help="train again into a folder holding a finished run (it is replaced only when the new run completes)")
    sp.set_defaults(func=cmd_train)

    sp = common(sub.add_parser("teacher-cache", help="DistillCSE: a frozen teacher's normalized corpus embeddings"))
    sp.add_argument("--model", required=True, help="the teacher's saved model folder (RUN_DIR/model)")
    sp.add_argument("--corpus", required=True, help="the students' training corpus (data/X/corpus.txt)")
    sp.add_argument("--out", required=True, help="embeddings .npy (metadata goes beside it as .json)")
    sp.add_argument("--max-seq-length", type=positive_int, default=None,
                    help="training max length (default: the teacher run's own, from its training_config.json)")
    sp.add_argument("--batch-size", type=positive_int, default=None, help="encoding batch size (default: 128 on a GPU, 64 on CPU, the faster there)")
    sp.add_argument("--cache-dir", default=None, help="tokenized-corpus cache folder (e.g. data/cache)")
    sp.set_defaults(func=cmd_teacher_cache)

    def eval_encoding(sp, table: bool = True):
        sp.add_argument("--pooler", default=None, help="override the saved evaluation pooler")
        sp.add_argument("--batch-size", type=positive_int, default=None, help="encoding batch size (default: 128 on a GPU, 64 on CPU, the faster there)")
        if table:
            sp.add_argument("--embeddings", default=None,
                            help="embeddings table from `csebench embed` (RUN_DIR/embeddings.npz): look sentences up instead of encoding")
        else:  # MTEB's sentences are not in the SentEval table
            sp.set_defaults(embeddings=None)
        sp.add_argument("--precision", default=None, choices=EVAL_PRECISIONS,
                        help="encoding precision (default: the table's, else auto = bf16 on bf16 GPUs, fp32 on CPU)")
        return sp

    def classifier_options(sp, cap: str):  # eval-transfer and eval-probing: SentEval classifiers on embeddings
        sp.add_argument("--max-train-sentences", type=int, default=None,
                        help=f"CPU demo only: {cap} (recorded as protocol=capped)")
        sp.add_argument("--max-test-sentences", type=int, default=None,
                        help="CPU demo only: subsample each held-out dev/test split to about N items (recorded as protocol=capped)")
        sp.add_argument("--senteval-seed", type=int, default=1111, help="SentEval's classifier seed (default: 1111)")
        evaluated_run_options(sp, "run seed (names the run; see --senteval-seed)")

    def sts_cap_option(sp):  # embed and eval-sts must agree on the pairs (the table holds what eval-sts scores)
        sp.add_argument("--max-sts-pairs", type=int, default=None,
                        help="CPU demo only: score each STS task on a seeded subset of about N pairs (recorded as protocol=capped)")
        sp.add_argument("--sts-pairs", nargs="+", default=[], metavar="[NAME=]FILE",
                        help="your own STS sets, .tsv or .csv with columns sentence1, sentence2, score[, split]: their test "
                             "rows (all rows without a split column) are scored beside the 7 tasks, never in their average")

    sp = common(sub.add_parser("embed", help="encode every evaluation sentence of a model once (STS, transfer, analyses)"))
    sp.add_argument("--model", required=True, help="saved model folder (or HF id / local encoder)")
    sp.add_argument("--senteval", required=True)
    sp.add_argument("--out", required=True, help="embeddings table (.npz)")
    sp.add_argument("--pooler", default=None, help="override the saved evaluation pooler")
    sp.add_argument("--batch-size", type=positive_int, default=None, help="encoding batch size (default: 128 on a GPU, 64 on CPU, the faster there)")
    sp.add_argument("--precision", default="fp32", choices=EVAL_PRECISIONS,
                    help="fp32 (default: SentEval's numbers), bf16, auto (bf16 on bf16 GPUs), fast (bf16 where native: bf16 GPUs, AVX512-BF16/AMX CPUs)")
    sp.add_argument("--no-transfer", action="store_true", help="STS sentences only")
    sp.add_argument("--max-train-sentences", type=int, default=None, help="the transfer cap eval-transfer will use")
    sp.add_argument("--max-test-sentences", type=int, default=None, help="the held-out split cap eval-transfer will use")
    sp.add_argument("--senteval-seed", type=int, default=1111, help="the transfer (and STS cap) seed eval-transfer/eval-sts will use")
    sts_cap_option(sp)
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(func=cmd_embed)

    sp = eval_encoding(common(sub.add_parser("eval-sts", help="STS12-16, STS-B, SICK-R (Spearman x100)")))
    sp.add_argument("--model", required=True, help="saved model folder (or HF id / local encoder)")
    sp.add_argument("--senteval", required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--pairs-out", default=None,
                    help="also write per-pair cosine and gold scores (.npz) for the paired bootstrap of the suite tables (`results render --item suite/SUITE`)")
    sts_cap_option(sp)
    sp.add_argument("--senteval-seed", type=int, default=1111, help="seed of the --max-sts-pairs subsets (default: 1111)")
    evaluated_run_options(sp)
    sp.set_defaults(func=cmd_eval_sts)

    sp = eval_encoding(common(sub.add_parser("eval-transfer", help="SentEval transfer tasks MR CR SUBJ MPQA SST2 TREC MRPC (accuracy x100)")))
    sp.add_argument("--model", required=True, help="saved model folder (or HF id / local encoder)")
    sp.add_argument("--senteval", required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--tasks", nargs="+", default=None, help="subset of MR CR SUBJ MPQA SST2 TREC MRPC (default: all)")
    classifier_options(sp, "subsample each classifier training set to N items")
    sp.set_defaults(func=cmd_eval_transfer)

    sp = eval_encoding(common(sub.add_parser("eval-probing", help="SentEval probing tasks, e.g. SentLen TreeDepth CoordInv (accuracy x100)")))
    sp.add_argument("--model", required=True, help="saved model folder (or HF id / local encoder)")
    sp.add_argument("--probing", required=True, help="folder of SentEval's probing files, or the prepared pointer folder")
    sp.add_argument("--out", required=True)
    sp.add_argument("--tasks", nargs="+", default=None,
                    help="SentLen WC TreeDepth TopConst BShift Tense SubjNum ObjNum SOMO CoordInv, or SentEval's names "
                         "(default: SSCL Table 4's SentLen TreeDepth CoordInv)")
    classifier_options(sp, "subsample each train split to N sentences")
    sp.set_defaults(func=cmd_eval_probing)

    sp = eval_encoding(common(sub.add_parser("eval-mteb", help="MTEB tasks with the mteb package (MTEB protocol; pip install -e '.[mteb]')")),
                       table=False)
    sp.add_argument("--model", default=None, help="saved model folder (or HF id / local encoder)")
    sp.add_argument("--out", default=None, help="folder for MTEB's result files (<Task>.json), model_meta.json and mteb.json")
    sp.add_argument("--tasks", nargs="+", default=None,
                    help="MTEB task names (default: the STS tasks of MTEB(eng, v2) and STS16, Banking77Classification, "
                         "AmazonCounterfactualClassification, ArguAna, SciFact)")
    sp.add_argument("--download-only", action="store_true",
                    help="fetch the tasks' datasets into the Hugging Face datasets cache (needs network) and stop")
    evaluated_run_options(sp)
    sp.set_defaults(func=cmd_eval_mteb)

    sp = sub.add_parser("model-card", help="write a run's model card: RUN/model_card.md and RUN/model/README.md")
    sp.add_argument("--run", required=True, help="a finished run folder, RESULTS/SUITE/runs/RUN/seedN")
    sp.set_defaults(func=cmd_model_card)

    sp = sub.add_parser("push", help="upload a run's model/ folder with its model card to the Hugging Face hub")
    sp.add_argument("--run", required=True, help="a finished run folder, RESULTS/SUITE/runs/RUN/seedN")
    sp.add_argument("--repo-id", required=True, help="hub model repo, ORG/NAME (created if missing)")
    sp.add_argument("--public", action="store_true", help="create the repo public (default: private)")
    sp.add_argument("--dry-run", action="store_true",
                    help="write the card and list the files that would be uploaded; no network access")
    sp.set_defaults(func=cmd_push)

    sp = common(sub.add_parser("suite-metrics", help="a suite's tidy metrics.json (run -> seed -> metric): DVC's metrics"))
    sp.add_argument("--suite", required=True)
    sp.add_argument("--results", default="results", help="results folder (default: results)")
    sp.add_argument("--out", required=True, help="output file, RESULTS/SUITE/metrics.json")
    sp.set_defaults(func=cmd_suite_metrics)

    sp = common(sub.add_parser("dvc-yaml", help="generate dvc.yaml: a stage per suite and per paper item (docs/dvc.md)"))
    sp.add_argument("--out", default="dvc.yaml", help="output file, '-' for stdout")
    sp.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    sp.set_defaults(func=cmd_dvc_yaml)

    from .analysis.cli import add_parsers as add_analysis_parsers

    add_analysis_parsers(sub, common)
    from .results.cli import add_parsers as add_results_parsers

    add_results_parsers(sub, common)
    sp = common(sub.add_parser("rehearse", help="every distinct run of the default target through the real code, offline: "
                                                "random-weight BERT/RoBERTa of the published shapes, 2 steps (docs/reproduction.md)"))
    sp.add_argument("--suites", nargs="+", default=None, help="default: every suite of the default target")
    sp.add_argument("--out", default="results/rehearsal", help="the rehearsal's folder (default: results/rehearsal)")
    sp.add_argument("--only", default=None, help="only the distinct runs listed as SUITE/RUN containing this text")
    sp.add_argument("--limit", type=positive_int, default=None, help="only the first N distinct runs")
    sp.add_argument("--stop", action="store_true", help="stop at the first failure (default: rehearse every run, list failures)")
    sp.add_argument("--depth", type=_depth, default=2, help="layers of each backbone (default 2, or as many as a run's "
                                                          "settings use); 'published': 12 or 24, as the papers' models")
    sp.add_argument("--keep-models", action="store_true", help="keep every rehearsed model's weights (default: delete "
                                                                "them once nothing reads them, several GB otherwise)")
    sp.set_defaults(func=cmd_rehearse)

    sp = common(sub.add_parser("plan", help="suites, jobs, training runs and GPU-hours before anything runs"))
    sp.add_argument("--suites", nargs="+", default=None, help="default: every suite of the default target")
    sp.set_defaults(func=cmd_plan)
    return p


def _on_interrupt(signum, frame) -> None:
    # the first Ctrl-C unwinds (temporaries removed, the run lock released, one line printed);
    # a second one while that runs ends the process at once
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """The program (argv None) or an in-process call. Ctrl-C prints one line and gives 130 while the
    command is unfinished, imports and argument parsing included; once it has finished, a Ctrl-C
    interrupts nothing: the program ignores it until it exits, an in-process caller gets its handler back."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _on_interrupt) if main_thread else None
    command = "csebench"
    try:
        args = build_parser().parse_args(argv)
        command = f"csebench {args.command}"
        _setup_logging(args.verbose)
        from .provenance import reset

        reset()  # a result's provenance names the data files read by its own command
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        args.func(args)
    except CsebenchError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, signal.SIG_IGN if argv is None else previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())

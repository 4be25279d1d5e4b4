"""csebench's command line: the thin layer the Snakemake rules (and users) call. Each command is declared
beside its handler (csebench.core.commands.command), with the shared option groups; `csebench --help` lists
them all, `csebench COMMAND --help` one command's options.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import sys
import threading
import time

from csebench.core.commands import (BATCH_SIZE, COMMANDS, EVAL_ENCODING, EVALUATED_RUN, MODEL, NO_PROGRESS,
    NO_VERIFY, OUT, PARAMS, KEY, POOLER, RUN, SENTEVAL, add_commands, command, option, positive_int)
from csebench.core.choices import EVAL_PRECISIONS
from csebench.core.errors import ConfigError, CsebenchError, DataError, TrainingError
from csebench.core.startup import CommandClock
from csebench.study.jobs import suite_jobs


def classifier_options(cap: str) -> tuple:
    """eval-transfer and eval-probing: SentEval's classifiers on embeddings (``cap``: what the training cap does)."""
    return (option("--max-train-sentences", type=int, default=None, help=f"CPU demo only: {cap} (recorded as protocol=capped)"),
            option("--max-test-sentences", type=int, default=None,
                   help="CPU demo only: subsample each held-out dev/test split to about N items (recorded as protocol=capped)"),
            option("--senteval-seed", type=int, default=1111, help="SentEval's classifier seed (default: 1111)"),
            *EVALUATED_RUN, option("--seed", type=int, default=0, help="run seed (names the run; see --senteval-seed)"))


# embed and eval-sts must agree on the pairs (the table holds what eval-sts scores)
STS_CAP = (option("--max-sts-pairs", type=int, default=None,
                  help="CPU demo only: score each STS task on a seeded subset of about N pairs (recorded as protocol=capped)"),
           option("--sts-pairs", nargs="+", default=[], metavar="[NAME=]FILE",
                  help="your own STS sets, .tsv or .csv with columns sentence1, sentence2, score[, split]: their test "
                       "rows (all rows without a split column) are scored beside the 7 tasks, never in their average"))
FINISHED_RUN = option("--run", required=True, help="a finished run folder, RESULTS/SUITE/runs/RUN/seedN")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # transformers prints load reports (e.g. the unused BERT pooler) and shard-writing bars. Said through
    # its environment, read when it is first imported: importing it here to say so cost every command,
    # most of which never load a model, 2-3 s of start-up
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:  # an in-process caller imported it already
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def _params(args):
    from csebench.study.params import load_params

    return load_params(args.params, args.config)


def _resolve_inputs(args) -> None:
    """What params.yaml names, for the commands that take a model or SentEval data: ``--model NAME`` with a
    backbone name of params.yaml is that backbone's model (``minilm`` is ``packaged:minilm``), and without
    ``--senteval`` the SentEval data are the shared ones (paths.shared/senteval, $CSEBENCH_SHARED)."""
    from csebench.study.params import load_params, may_name_backbone, named_backbone_model, shared_senteval

    model = getattr(args, "model", None)
    named = isinstance(model, str) and hasattr(args, "params") and may_name_backbone(model)
    need_data = hasattr(args, "senteval") and args.senteval is None
    if not (named or need_data):
        return
    params = load_params(args.params, args.config)
    backbone = named_backbone_model(params, model) if named else None
    if backbone is not None:
        logging.getLogger("csebench").info("--model %s: the backbone %s of params.yaml, %s", model, model, backbone)
        args.model = backbone
    if need_data:
        args.senteval = shared_senteval(params, "no --senteval given and", "pass --senteval")


@command("prepare-corpus", "write the (sampled) training corpus", PARAMS, option("--data", required=True, help="data source name in params.yaml"), OUT)
def cmd_prepare_corpus(args) -> None:
    from csebench.study.resolve import data_config
    from csebench.training.data import prepare_corpus

    prepare_corpus(data_config(_params(args), args.data).corpus, args.out)


@command("fetch-backbone", "download a backbone's model and tokenizer into the Hugging Face cache (the submitting "
         "host's step before cluster jobs: docs/cluster.md)", PARAMS,
         option("--backbone", required=True, help="backbone name in params.yaml"),
         OUT.but(help="the note of what was fetched and its hub commits, e.g. data/backbones/NAME.json"))
def cmd_fetch_backbone(args) -> None:
    from csebench.study.fetch import fetch_backbone
    from csebench.core.io import write_json

    write_json(args.out, fetch_backbone(_params(args), args.backbone))


@command("fetch-generator", "download a term's second pretrained model (DiffCSE's masked-LM generator) into the "
         "Hugging Face cache (the submitting host's step before cluster jobs: docs/cluster.md)",
         option("--model", required=True, help="its hub id (ORG/NAME may be written ORG--NAME)"),
         OUT.but(help="the note of what was fetched and its hub commit, e.g. data/generators/NAME.json"))
def cmd_fetch_generator(args) -> None:
    from csebench.study.fetch import fetch_generator
    from csebench.core.io import write_json

    write_json(args.out, fetch_generator(args.model))


@command("prepare-senteval", "locate or download the SentEval data", PARAMS, option("--data", required=True, help="data source name in params.yaml"),
         OUT.but(help="folder for the pointer file ROOT (and the extracted tarball)"))
def cmd_prepare_senteval(args) -> None:
    from csebench.study.resolve import data_config
    from csebench.training.data import prepare_senteval

    prepare_senteval(data_config(_params(args), args.data).senteval, args.out)


@command("prepare-probing", "locate or download SentEval's probing-task files", PARAMS,
         option("--data", required=True, help="data source name in params.yaml (its 'probing' entry)"),
         OUT.but(help="folder for the pointer file ROOT"),
         option("--tasks", nargs="+", default=None, help="probing tasks (default: SentLen TreeDepth CoordInv)"))
def cmd_prepare_probing(args) -> None:
    from csebench.study.resolve import probing_source
    from csebench.training.data import prepare_probing

    prepare_probing(probing_source(_params(args), args.data), args.out, args.tasks)


def _name_run(args, params: dict) -> None:
    """--key KEY (a run's folder under results/runs, what Snakemake passes) stands for the first suite
    and run of params.yaml that list it at --seed (docs/runs.md); else --suite and --run name it."""
    if getattr(args, "key", None):
        if args.suite or args.run:
            raise ConfigError("give either --key or --suite and --run, not both")
        from csebench.study.jobs import runs_of

        args.suite, args.run = runs_of(params).first(args.key, args.seed)
    elif not (args.suite and args.run):
        raise ConfigError("name the run: --suite SUITE --run RUN (or --key KEY, its folder under results/runs)")


@command("show-config", "print a run's resolved configuration, key and fingerprint", PARAMS, RUN)
def cmd_show_config(args) -> None:
    from csebench.study.resolve import resolve_run
    from csebench.core.io import dumps_json

    params = _params(args)
    _name_run(args, params)
    print(dumps_json(resolve_run(params, args.suite, args.run, args.seed).record(), default=str))


@command("runs", "each suite's runs, the folder each is trained in, and which are shared", PARAMS,
         option("--suites", nargs="+", help="default: every suite of params.yaml"))
def cmd_runs(args) -> None:
    from csebench.study.jobs import runs_of

    params = _params(args)
    runs = runs_of(params)
    listed = [(suite, run, seed) for suite in args.suites or list((params.get("suites") or {})) for run, seed in suite_jobs(params, suite)]
    for suite, run, seed in listed:
        same = runs.same_run_as(suite, run, seed)
        print(f"{suite + '/' + run + ' seed ' + str(seed):<60} {runs.folder(suite, run, seed)}" + (f"  same run as {same}" if same else ""))
    distinct = {runs.folder(*job) for job in listed}
    print(f"{len(listed)} runs listed, {len(distinct)} distinct (each trained once; docs/runs.md)")


def _refuse_view(out: str, params: dict, suite: str, run: str, seed: int) -> None:
    """A suite's folder of a run is a view (links and relabelled copies, docs/runs.md): training there
    would leave the run's own folder, which every suite listing the run reads, behind."""
    from csebench.core.paths import run_dir
    from csebench.study.jobs import run_folder

    view = os.path.join(out, "train.json")
    folder = None
    if os.path.islink(os.path.join(out, "model")) and os.path.isfile(view):
        from csebench.core.io import read_json

        folder = read_json(view).get("run_folder")  # a view's relabelled train.json names the run's folder
    if folder is None and os.path.normpath(out) == os.path.normpath(run_dir(params, suite, run, seed)):  # not made yet
        folder = run_folder(params, suite, run, seed)
    if folder is None:
        return
    raise TrainingError(f"{out} is a suite's view of the run in {folder}: train there (--out {folder}), "
                        "or let Snakemake do it (docs/runs.md)")


RUN_OUTPUTS = ("model", "train.json", "train_curve.csv", "dev_curve.csv", "train_timing.json", "checkpoint",
               "best_model.partial", "model.partial", ".lock")


def _refuse_links_out(out: str) -> None:
    """A run's outputs are written, replaced and deleted inside its folder: one that is a symbolic link out of it
    (model/ linked to a folder elsewhere) would have the next train delete or overwrite what it points to."""
    root = os.path.realpath(out)
    for name in RUN_OUTPUTS:
        path = os.path.join(out, name)
        target = os.path.realpath(path)
        if os.path.islink(path) and os.path.commonpath([root, target]) != root:
            raise TrainingError(f"{path} is a symbolic link to {os.readlink(path)}, outside the run folder {out}: csebench "
                                "writes a run's outputs inside its folder and never deletes through a link; remove the "
                                "link (what it points to stays) or choose another --out")


def _setting_value(text: str, where: str):
    """A --set value: a number as Python reads it (1e-4 too, which YAML 1.1 keeps as text), else YAML
    (true, null, [1, 2], a word)."""
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    from csebench.core.schema import load_yaml_text

    return load_yaml_text(text, where)


def _one_line_run(args, params: dict) -> None:
    """``train --backbone B --method M --corpus FILE [--set KEY=VALUE ...]``: the run a suite of params.yaml
    would list with that backbone, method, corpus and settings, as suite ``cli`` of this process, so that
    its key (and folder, results/runs/KEY/seedN) is the one the pipeline gives that run."""
    from csebench.study.params import digest
    from csebench.core.paths import check_name

    if args.suite or args.run or args.key:
        raise ConfigError("give either --backbone and --method (a run of your own) or --suite/--run/--key (a run of params.yaml)")
    if not (args.backbone and args.method and args.corpus):
        raise ConfigError("a run of your own needs --backbone, --method and --corpus")
    backbones, data = params.setdefault("backbones", {}), params.setdefault("data", {})
    backbone = args.backbone
    if backbone not in backbones:  # a folder or a hub id: a backbone of its own, pooled as --pooler says (cls: SimCSE's)
        name = "model-" + digest([backbone, args.pooler or "cls"], 8)
        backbones[name] = {"model": backbone, "pooler": args.pooler or "cls"}
        backbone = name
    elif args.pooler:
        raise ConfigError(f"--pooler is for a backbone given as a folder or hub id; {backbone} of params.yaml pools with "
                          f"{backbones[backbone].get('pooler')} (set it in params.yaml or a --config file)")
    if args.method not in (params.get("methods") or {}):
        raise ConfigError(f"unknown method '{args.method}' (params.yaml methods: {', '.join(params.get('methods') or {})})")
    run: dict = {"backbone": backbone, "method": args.method}
    for item in args.set:
        key, sep, value = item.partition("=")
        parts = key.split(".")
        if not sep or parts[0] not in ("training", "objectives") or len(parts) < 2 or not all(parts):
            raise ConfigError(f"--set {item}: expected training.KEY=VALUE or objectives.TERM.KEY=VALUE")
        node = run
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _setting_value(value, f"--set {item}")
    source = "corpus-" + digest(args.corpus, 8)
    data[source] = {"corpus": {"path": args.corpus}, "senteval": {"path": "{shared}/senteval"}}
    name = f"{args.backbone if args.backbone == backbone else 'model'}-{args.method}"
    check_name("run", name)
    params.setdefault("suites", {})["cli"] = {"data": source, "seeds": [args.seed], "runs": [{"name": name, **run}]}
    args.suite, args.run = "cli", name


@command("train", "train one run; resumes from its checkpoint if present", PARAMS,
         option("--suite"), option("--run", "--run-name", dest="run", help="run name within the suite"),
         option("--seed", type=int, default=None, help="the run's seed (required with --suite/--run; default 42 with --backbone)"),
         KEY,
         option("--backbone", help="a run of your own: a backbone name of params.yaml, a model folder or a hub id"),
         option("--method", help="a run of your own: a method of params.yaml (simcse, iscse, ...)"),
         option("--set", action="append", default=[], metavar="KEY=VALUE",
                help="a run of your own: a setting, training.KEY=VALUE or objectives.TERM.KEY=VALUE (repeatable)"),
         option("--pooler", default=None, help="a run of your own on a folder or hub id: its pooler (default cls)"),
         option("--corpus", default=None, help="training corpus (required unless the run has train: false)"), SENTEVAL,
         OUT.but(required=False, default=None,
                 help="run folder: model/, train.json, curves (default with --backbone: results/runs/KEY/seedN, where "
                      "the pipeline keeps that run)"),
         option("--cache-dir", default="data/cache", help="tokenized-corpus cache (default: data/cache)"),
         option("--teacher-cache", action="append", default=[], help="cached teacher embeddings (DistillCSE)"), NO_PROGRESS,
         option("--force", action="store_true",
                help="train again into a folder holding a finished run (it is replaced only when the new run completes)"),
         NO_VERIFY)
def cmd_train(args) -> None:
    from csebench.core import distributed
    from csebench.study.resolve import resolve_run
    from csebench.core.io import dumps_json
    from csebench.workflow.runlock import run_lock

    from csebench.study.fetch import offline

    params = _params(args)
    if args.backbone or args.method:
        args.seed = 42 if args.seed is None else args.seed
        _one_line_run(args, params)
    else:
        if args.seed is None:
            raise ConfigError("train: --seed is required with --suite/--run or --key")
        _name_run(args, params)
    cfg = resolve_run(params, args.suite, args.run, args.seed)
    if args.out is None:
        if args.suite != "cli":
            raise ConfigError("train: --out is required with --suite/--run or --key (the pipeline passes the run's folder)")
        from csebench.core.paths import key_dir, results_root

        args.out = key_dir(results_root(params), cfg.key(), args.seed)
        logging.getLogger("csebench").info("run %s, key %s: %s", args.run, cfg.key(), args.out)
    logging.getLogger("csebench").info("hub downloads: %s", "off (HF_HUB_OFFLINE=1)" if offline() else "on")
    _refuse_view(args.out, params, args.suite, args.run, args.seed)
    _refuse_links_out(args.out)
    # one process per run folder (under torchrun rank 0 holds the lock: the other ranks write nothing there)
    with run_lock(args.out) if int(os.environ.get("RANK", 0)) == 0 else contextlib.nullcontext():
        if os.path.isfile(os.path.join(args.out, "train.json")) and not args.force:
            raise TrainingError(f"run folder {args.out} holds a finished run (train.json); pass --force to train it "
                                "again (the finished run stays until the new one has completed) or choose another --out")
        if not cfg.train:  # an evaluation-only run: the backbone itself is the model, no corpus is read
            from csebench.training.untrained_run import write_untrained_run

            summary = write_untrained_run(cfg, args.senteval, args.out, cfg.dev_file)
        else:
            if not args.corpus:
                raise ConfigError(f"train: --corpus is required for run {args.suite}/{args.run} "
                                  "(only runs with train: false read none)")
            from csebench.training.trainer import Trainer

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
    from csebench.evaluation.embeddings import evaluation_encoder

    return evaluation_encoder(args.model, args.pooler, args.batch_size, args.precision, args.embeddings,
                              progress=not args.no_progress)


@command("embed", "encode every evaluation sentence of a model once (STS, transfer, analyses)", PARAMS, MODEL,
         SENTEVAL, OUT.but(help="embeddings table (.npz)"), POOLER, BATCH_SIZE,
         option("--precision", default="fp32", choices=EVAL_PRECISIONS,
                help="fp32 (default: SentEval's numbers), bf16, auto (bf16 on bf16 GPUs), fast (bf16 where native: bf16 "
                     "GPUs, AVX512-BF16/AMX CPUs)"),
         option("--no-transfer", action="store_true", help="STS sentences only"),
         option("--max-train-sentences", type=int, default=None, help="the transfer cap eval-transfer will use"),
         option("--max-test-sentences", type=int, default=None, help="the held-out split cap eval-transfer will use"),
         option("--senteval-seed", type=int, default=1111, help="the transfer (and STS cap) seed eval-transfer/eval-sts will use"),
         option("--stsb-whole", nargs="*", choices=("dev", "test"), default=["test"],
                help="STS-B splits encoded in full for the analyses of STS-B sentences (default: test, their default "
                     "split; a sentence the table lacks is encoded when an analysis asks for it)"),
         STS_CAP, NO_PROGRESS, NO_VERIFY)
def cmd_embed(args) -> None:
    from csebench.training.data import senteval_root
    from csebench.evaluation.embeddings import evaluation_sentences, model_encoder, model_fingerprint, write_embeddings
    from csebench.model.encoder import eval_pooler_of
    from csebench.evaluation.sts import load_extra_sets
    from csebench.model.encoder import autocast_name
    from csebench.core.provenance import collect

    t0 = time.perf_counter()
    extra = load_extra_sets(args.sts_pairs, args.max_sts_pairs, args.senteval_seed)
    sentences = evaluation_sentences(senteval_root(args.senteval), transfer=not args.no_transfer,
                                     max_train_sentences=args.max_train_sentences, seed=args.senteval_seed,
                                     max_sts_pairs=args.max_sts_pairs, max_test_sentences=args.max_test_sentences,
                                     extra_sets=extra, stsb_whole=tuple(args.stsb_whole))
    log = logging.getLogger("csebench")
    log.info("encoding %d distinct evaluation sentences (%s precision)", len(sentences), args.precision)
    encode = model_encoder(args.model, args.pooler, args.batch_size, args.precision, progress=not args.no_progress)
    emb = encode(sentences)
    autocast = autocast_name(args.precision)
    meta = {"model": args.model, "model_fingerprint": model_fingerprint(args.model),  # packaged and hub ids too
            "pooler": getattr(encode, "pooler", None) or eval_pooler_of(args.model, args.pooler),  # resolved, never null
            "precision": args.precision, "autocast": autocast,
            "transfer": not args.no_transfer, "max_train_sentences": args.max_train_sentences,
            "max_test_sentences": args.max_test_sentences,
            "max_sts_pairs": args.max_sts_pairs, "stsb_whole": list(args.stsb_whole),
            "senteval_seed": args.senteval_seed, "seconds": round(time.perf_counter() - t0, 2),
            "provenance": collect(precision=args.precision, autocast=autocast)}
    write_embeddings(args.out, sentences, emb, meta)
    log.info("embedded %d sentences in %.1f s -> %s", len(sentences), meta["seconds"], args.out)


@command("eval-sts", "STS12-16, STS-B, SICK-R (Spearman x100)", PARAMS, EVAL_ENCODING, MODEL, SENTEVAL,
         OUT.but(required=False, default=None, help="result JSON (default: printed to standard output)"),
         option("--pairs-out", default=None, help="also write per-pair cosine and gold scores (.npz) for the paired bootstrap "
                                                  "of the suite tables (`results render --item suite/SUITE`)"),
         STS_CAP, option("--senteval-seed", type=int, default=1111, help="seed of the --max-sts-pairs subsets (default: 1111)"),
         EVALUATED_RUN)
def cmd_eval_sts(args) -> None:
    from csebench.training.data import senteval_root
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
    pooler = _encoding_info(args, encode)["pooler"]
    if args.out:
        _write_evaluation(args, res, encode, run_info, t0)
    else:
        from csebench.core.io import dumps_json

        print(dumps_json({"tasks": res["tasks"], "avg": res.get("avg"), "protocol": res.get("protocol"),
                          "model": args.model, "pooler": pooler}, indent=2))
    logging.getLogger("csebench").info("STS avg %.2f (pooler %s): %s%s", res.get("avg", float("nan")), pooler,
                                       ", ".join(f"{k} {v:.2f}" for k, v in res["tasks"].items()),
                                       "".join(f"; {k} {v['spearman']:.2f} (own set)" for k, v in (res.get("extra_sets") or {}).items()))


@command("eval-transfer", "SentEval transfer tasks MR CR SUBJ MPQA SST2 TREC MRPC (accuracy x100)", PARAMS,
         EVAL_ENCODING, MODEL, SENTEVAL, OUT,
         option("--tasks", nargs="+", default=None, help="subset of MR CR SUBJ MPQA SST2 TREC MRPC (default: all)"),
         option("--no-transfer", action="store_true",
                help="the suite switched the transfer tasks off (transfer: false): write a result that says so, "
                     "load and encode nothing"),
         classifier_options("subsample each classifier training set to N items"))
def cmd_eval_transfer(args) -> None:
    from csebench.training.data import senteval_root
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


@command("eval-probing", "SentEval probing tasks, e.g. SentLen TreeDepth CoordInv (accuracy x100)", PARAMS,
         EVAL_ENCODING, MODEL,
         option("--probing", required=True, help="folder of SentEval's probing files, or the prepared pointer folder"), OUT,
         option("--tasks", nargs="+", default=None,
                help="SentLen WC TreeDepth TopConst BShift Tense SubjNum ObjNum SOMO CoordInv, or SentEval's names "
                     "(default: SSCL Table 4's SentLen TreeDepth CoordInv)"),
         classifier_options("subsample each train split to N sentences"))
def cmd_eval_probing(args) -> None:
    from csebench.training.data import probing_root
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
    params = _params(args) if args.suite or args.key or args.config else None  # checked as every command checks them
    if args.key:
        _name_run(args, params)
    if not (args.suite and args.run):
        return {"name": os.path.basename(os.path.normpath(args.model)), "method": "external", "backbone": args.model}
    from csebench.study.resolve import resolve_run, run_info

    resolve_run(params, args.suite, args.run, args.seed)  # the whole run checked, as training checks it
    return run_info(params, args.suite, args.run, args.seed)


@command("eval-mteb", "MTEB tasks with the mteb package (MTEB protocol; pip install -e '.[mteb]')", PARAMS,
         EVAL_ENCODING, MODEL.but(required=False, default=None),
         option("--out", default=None, help="folder for MTEB's result files (<Task>.json), model_meta.json and mteb.json"),
         option("--tasks", nargs="+", default=None,
                help="MTEB task names (default: the STS tasks of MTEB(eng, v2) and STS16, Banking77Classification, "
                     "AmazonCounterfactualClassification, ArguAna, SciFact)"),
         option("--download-only", action="store_true",
                help="fetch the tasks' datasets into the Hugging Face datasets cache (needs network) and stop"),
         EVALUATED_RUN, build=lambda parser: parser.set_defaults(embeddings=None))  # MTEB's sentences are in no SentEval table
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


@command("teacher-cache", "DistillCSE: a frozen teacher's normalized corpus embeddings", PARAMS,
         MODEL.but(help="the teacher's saved model folder (RUN_DIR/model)"),
         option("--corpus", required=True, help="the students' training corpus (data/X/corpus.txt)"),
         OUT.but(help="embeddings .npy (metadata goes beside it as .json)"),
         option("--max-seq-length", type=positive_int, default=None,
                help="training max length (default: the teacher run's own, from its training_config.json)"),
         BATCH_SIZE, option("--cache-dir", default=None, help="tokenized-corpus cache folder (e.g. data/cache)"), NO_VERIFY)
def cmd_teacher_cache(args) -> None:
    from csebench.training.teachers import build_teacher_cache

    build_teacher_cache(args.model, args.corpus, args.out, max_seq_length=args.max_seq_length,
                        batch_size=args.batch_size, cache_dir=args.cache_dir)


@command("plan", "suites, jobs, training runs and GPU-hours before anything runs", PARAMS,
         option("--suites", nargs="+", default=None, help="default: every suite of the default target"))
def cmd_plan(args) -> None:
    from csebench.results.plan import plan, render_plan
    from csebench.results.registry import default_suites

    params = _params(args)
    print(render_plan(plan(params, args.suites or default_suites(params))))


def _depth(text: str) -> int | None:
    if text == "published":
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of layers >= 1 or 'published', got {text!r}") from None


@command("rehearse", "every distinct run of the default target through the real code, offline: random-weight "
         "BERT/RoBERTa of the published shapes, 2 steps (README, Rehearsal)", PARAMS,
         option("--suites", nargs="+", default=None, help="default: every suite of the default target"),
         option("--out", default="results/rehearsal", help="the rehearsal's folder (default: results/rehearsal)"),
         option("--only", default=None, help="only the distinct runs listed as SUITE/RUN containing this text"),
         option("--limit", type=positive_int, default=None, help="only the first N distinct runs"),
         option("--stop", action="store_true", help="stop at the first failure (default: rehearse every run, list failures)"),
         option("--depth", type=_depth, default=2, help="layers of each backbone (default 2, or as many as a run's "
                "settings use); 'published': 12 or 24, as the papers' models"),
         option("--keep-models", action="store_true", help="keep every rehearsed model's weights (default: delete "
                "them once nothing reads them, several GB otherwise)"))
def cmd_rehearse(args) -> None:
    from pathlib import Path

    from csebench.workflow.rehearse import rehearse, report, select

    # the settings (a suite named ../x, an unknown suite) are checked before --out is made: nothing written yet
    selection = select(args.params, args.config, args.suites, limit=args.limit, only=args.only)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    quiet = logging.Filter()  # the console shows the rehearsal's lines and errors; every command's log goes to the file
    quiet.filter = lambda rec: rec.name == "csebench.workflow.rehearse" or rec.levelno >= logging.ERROR
    for h in root.handlers:
        h.addFilter(quiet)
    fh = logging.FileHandler(out / "rehearse.log", mode="w", encoding="utf-8")
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(fh)
    try:
        outcome = rehearse(main, selection, out, keep_going=not args.stop, keep_models=args.keep_models, depth=args.depth)
    finally:
        root.removeHandler(fh)
        fh.close()
        for h in root.handlers:
            h.removeFilter(quiet)
    print(report(outcome))
    if outcome.failed:
        raise TrainingError(f"{len(outcome.failed)} rehearsal(s) failed (listed above; {out / 'rehearse.log'} has each traceback)")


@command("view-run", "a suite's view of a shared run: relabelled JSON results, links to the rest", PARAMS,
         option("--suite", required=True), option("--run", required=True), option("--seed", type=int, required=True),
         option("--from", dest="source", required=True, help="the run's folder (or its evaluation/analysis folder)"),
         OUT.but(help="the suite's folder, e.g. results/SUITE/runs/RUN/seedN"),
         option("--first", help="SUITE/RUN: the first suite and run of params.yaml listing this run (default: worked out)"),
         option("names", nargs="+", help="entries of --from to show in --out"))
def cmd_view_run(args) -> None:
    from csebench.study.resolve import run_info
    from csebench.workflow.runviews import write_view

    params = _params(args)
    first = args.first
    if first is None:  # by hand: resolve every run of params.yaml (Snakemake passes --first)
        from csebench.study.jobs import runs_of

        runs = runs_of(params)
        first = "/".join(runs.first(runs.key(args.suite, args.run), args.seed))
    write_view(run_info(params, args.suite, args.run, args.seed), first, args.source, args.out, args.names)


@command("model-card", "write a run's model card: RUN/model_card.md and RUN/model/README.md", FINISHED_RUN)
def cmd_model_card(args) -> None:
    from csebench.sharing.modelcard import write_card

    path = write_card(args.run)
    logging.getLogger("csebench").info("model card: %s (and %s)", path, os.path.join(args.run, "model_card.md"))


@command("push", "upload a run's model/ folder with its model card to the Hugging Face hub", FINISHED_RUN,
         option("--repo-id", required=True, help="hub model repo, ORG/NAME (created if missing)"),
         option("--public", action="store_true", help="create the repo public (default: private)"),
         option("--dry-run", action="store_true", help="write the card and list the files that would be uploaded; no network access"))
def cmd_push(args) -> None:
    from csebench.sharing.push import push

    files = push(args.run, args.repo_id, public=args.public, dry_run=args.dry_run)
    folder = os.path.join(args.run, "model")
    if args.dry_run:
        print(f"would upload {len(files)} files from {folder} to {args.repo_id} "
              f"({'public' if args.public else 'private'}); the card is {os.path.join(folder, 'README.md')}:")
        print("\n".join(f"  {f}" for f in files))
    else:
        logging.getLogger("csebench").info("pushed %d files from %s to https://huggingface.co/%s", len(files), folder, args.repo_id)


@command("suite-metrics", "a suite's tidy metrics.json (run -> seed -> metric): DVC's metrics", PARAMS,
         option("--suite", required=True), option("--results", default="results", help="results folder (default: results)"),
         OUT.but(help="output file, RESULTS/SUITE/metrics.json"))
def cmd_suite_metrics(args) -> None:
    from csebench.core.io import write_json
    from csebench.results.tidy import suite_metrics

    write_json(args.out, suite_metrics(_params(args), args.suite, args.results))


@command("dvc-yaml", "generate dvc.yaml: a stage per suite and per paper item (docs/dvc.md)", PARAMS,
         option("--out", default="dvc.yaml", help="output file, '-' for stdout"),
         option("--check", action="store_true", help="exit 1 if the file is out of date"))
def cmd_dvc_yaml(args) -> None:
    from csebench.workflow.dvcgen import main_dvc_yaml

    rc = main_dvc_yaml(args.params, args.out, args.check)
    if rc:
        raise SystemExit(rc)


@command("dvc-commit", "dvc commit --force, after refusing any link out of the repository in what it records (the "
         "run store: docs/dvc.md)",
         option("targets", nargs="*", default=["runs.dvc"], metavar="TARGET",
                help=".dvc files or dvc.yaml stages (default: runs.dvc, the run store)"))
def cmd_dvc_commit(args) -> None:
    from csebench.workflow.dvccommit import dvc_commit

    rc = dvc_commit(args.targets)
    if rc:
        raise SystemExit(rc)


def build_parser() -> argparse.ArgumentParser:
    """Every command declared with csebench.core.commands.command: this module's, the analyses' and the results'."""
    from csebench.analysis import cli as _analysis_cli  # noqa: F401  declares analyze and analyze-figure
    from csebench.results import cli as _results_cli  # noqa: F401  declares results

    p = argparse.ArgumentParser(prog="csebench", description="Unsupervised contrastive sentence embeddings: SimCSE, "
                                "GS-InfoNCE, IS-CSE, SSCL, DistillCSE, trained, evaluated and analysed as the papers do.",
                                epilog="`csebench COMMAND --help`: one command's options. README.md and docs/: the whole story.")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch (default: torch's choice)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    add_commands(sub, COMMANDS)
    return p


_COMMAND = ["csebench"]  # the command named on the command line, for the interrupt line
_NESTED: list[bool] = []  # one entry per main() running: more than one while rehearse runs the commands in process


def _command_of(argv: list[str]) -> str:
    """``csebench <subcommand>`` as named on the command line, before argparse has read it."""
    i = 0
    while i < len(argv):
        if argv[i] == "--threads":
            i += 2
        elif argv[i].startswith("-"):
            i += 1
        else:
            return f"csebench {argv[i]}"
    return "csebench"


def _in_import(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_interrupt(signum, frame) -> None:
    # the first Ctrl-C unwinds (temporaries removed, the run lock released, one line printed);
    # a second one while that runs ends the process at once
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    if _in_import(frame):
        # raised inside an import, KeyboardInterrupt can land in C++ code that cannot pass it on (torch's
        # pybind11 bindings: `terminate called ...`, exit 134 and an 85-line dump): end here instead, the
        # temporaries of unfinished outputs removed (the run lock's file stays: the next train takes it over)
        from csebench.core.io import open_temporaries, remove_path

        for tmp in open_temporaries():
            remove_path(tmp)
        # the terminal's stderr: a command run inside another (csebench rehearse) has its stderr captured
        print(f"{_COMMAND[0]}: interrupted", file=sys.__stderr__ or sys.stderr, flush=True)
        os._exit(130)
    raise KeyboardInterrupt


OUTPUT_OPTIONS = ("out", "pairs_out", "figure", "markdown", "csv", "out_dir")  # checked writable before any work
FOLDER_OUT = ("train", "prepare-senteval", "prepare-probing", "eval-mteb", "view-run")  # their --out is a folder


def _check_outputs(args) -> None:
    """Every output folder takes a file, before any work (a read-only results folder was found only after
    eval-sts had computed everything). Commands that only check (--check) write nothing."""
    from csebench.core.io import check_writable

    if getattr(args, "check", False) or args.command in ("dvc-yaml", "show-config", "runs", "plan"):
        return
    for name in OUTPUT_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value not in ("", "-"):
            check_writable(value, is_dir=name == "out_dir" or args.command in FOLDER_OUT)
    if args.command in ("model-card", "push"):  # RUN/model_card.md and RUN/model/README.md
        check_writable(os.path.join(args.run, "model"), is_dir=True)
    if args.command == "results" and getattr(args, "out_dir", None) is None and getattr(args, "results", None):
        check_writable(args.results, is_dir=True)


def main(argv: list[str] | None = None) -> int:
    """The program (argv None) or an in-process call. Ctrl-C prints one line and gives 130 while the
    command is unfinished, imports and argument parsing included; once it has finished, a Ctrl-C
    interrupts nothing: the program ignores it until it exits, an in-process caller gets its handler back."""
    if argv is None:  # a job of a local build: run in its warm server where there is one (csebench.workflow.warm)
        from csebench.workflow.warm import forward

        rc = forward(sys.argv[1:])
        if rc is not None:
            return rc
    main_thread = threading.current_thread() is threading.main_thread()
    clock = CommandClock() if argv is None else None  # the program: its log ends with its time and start-up
    previous = signal.signal(signal.SIGINT, _on_interrupt) if main_thread else None
    outer = _COMMAND[0] if _NESTED else None  # a command run by another (rehearse): the interrupt line names the outer
    _NESTED.append(True)
    command = _command_of(sys.argv[1:] if argv is None else list(argv))
    _COMMAND[0] = outer or command
    try:
        args = build_parser().parse_args(argv)
        command = f"csebench {args.command}"
        _COMMAND[0] = outer or command
        _setup_logging(args.verbose)
        _check_outputs(args)
        from csebench.core.provenance import reset

        reset()  # a result's provenance names the data files read by its own command
        if hasattr(args, "no_verify"):  # the commands that load a model
            from csebench.model.encoder import VERIFY_WEIGHTS

            VERIFY_WEIGHTS[0] = not args.no_verify
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        _resolve_inputs(args)
        args.func(args)
    except CsebenchError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `csebench plan | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error as Python flushes stdout at exit
        return 0
    except Exception as exc:  # a full disk, a read-only or forbidden folder found while writing: one line
        from csebench.core.io import os_error_of

        failed = os_error_of(exc)  # an OSError, or safetensors' error that carries one
        if failed is None or failed.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        what = f"cannot write {failed.filename}" if failed.filename else "a write failed"  # fsync and write name no file
        print(f"{command}: error: {what}: {failed.strerror} (errno {errno.errorcode[failed.errno]}); "
              "nothing finished was replaced, the temporaries are removed", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    finally:
        _NESTED.pop()
        if main_thread:
            signal.signal(signal.SIGINT, signal.SIG_IGN if argv is None else previous)
    if clock is not None:
        logging.getLogger("csebench").info(clock.line(command))
    return 0


if __name__ == "__main__":
    sys.exit(main())

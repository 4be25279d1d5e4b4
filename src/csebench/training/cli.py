"""`csebench prepare-corpus`, `prepare-senteval`, `prepare-probing`, `train`, `teacher-cache`: the data a run
reads, the run itself (one of params.yaml, or one of your own: --backbone --method --corpus), a teacher's cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from csebench.core.commands import (BATCH_SIZE, KEY, MODEL, NO_PROGRESS, NO_VERIFY, OUT, PARAMS, PREFIX, SENTEVAL, Commands,
                                    option, positive_int)
from csebench.core.errors import ConfigError, TrainingError
from csebench.core.lazy import LazyRegistry
from csebench.study.cli import name_run, params_of
from csebench.study.typed import Params, Suite

COMMANDS = Commands(stage=20)
# what `train` does after a run of your own that lives in the layer above: its model card (csebench.sharing), loaded on use
SHARING = LazyRegistry("post-training step", {"model_card": "csebench.sharing.modelcard:write_card"})


@COMMANDS.command("prepare-corpus", "write the (sampled) training corpus", PARAMS, option("--data", required=True, help="data source name in params.yaml"), OUT)
def cmd_prepare_corpus(args) -> None:
    from csebench.training.data import prepare_corpus

    prepare_corpus(params_of(args).data_source(args.data).corpus, args.out)


@COMMANDS.command("prepare-senteval", "locate or download the SentEval data", PARAMS, option("--data", required=True, help="data source name in params.yaml"),
                  OUT.but(help="folder for the pointer file ROOT (and the extracted tarball)"), out_folder=True)
def cmd_prepare_senteval(args) -> None:
    from csebench.training.data import prepare_senteval

    prepare_senteval(params_of(args).data_source(args.data).senteval, args.out)


@COMMANDS.command("prepare-probing", "locate or download SentEval's probing-task files", PARAMS,
                  option("--data", required=True, help="data source name in params.yaml (its 'probing' entry)"),
                  OUT.but(help="folder for the pointer file ROOT"),
                  option("--tasks", nargs="+", default=None, help="probing tasks (default: SentLen TreeDepth CoordInv)"), out_folder=True)
def cmd_prepare_probing(args) -> None:
    from csebench.training.data import prepare_probing

    prepare_probing(params_of(args).probing_source(args.data), args.out, args.tasks)


def _refuse_view(out: str, suite: Suite, run: str, seed: int) -> None:
    """A suite's folder of a run is a view (links and relabelled copies, docs/runs.md): training there
    would leave the run's own folder, which every suite listing the run reads, behind."""

    view = os.path.join(out, "train.json")
    folder = None
    if os.path.islink(os.path.join(out, "model")) and os.path.isfile(view):
        from csebench.core.io import read_json

        folder = read_json(view).get("run_folder")  # a view's relabelled train.json names the run's folder
    if folder is None and os.path.normpath(out) == os.path.normpath(suite.run_dir(run, seed)):  # not made yet
        folder = suite.run_folder(run, seed)
    if folder is None:
        return
    raise TrainingError(f"{out} is a suite's view of the run in {folder}: train there (--out {folder}), "
                        "or let Snakemake do it (docs/runs.md)")


RUN_OUTPUTS = ("model", "train.json", "train_curve.csv", "dev_curve.csv", "train_timing.json", "checkpoint",
               "best_model.partial", "model.partial", ".lock", "sts_vs_untrained.json", "sts_vs_untrained_pairs.npz",
               "model_card.md", "suite.yaml")


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


def _one_line_run(args, params: Params) -> Params:
    """``train --backbone B --method M --corpus FILE [--set KEY=VALUE ...]``: the run a suite of params.yaml
    would list with that backbone, method, corpus and settings, as suite ``cli`` of the params returned, so
    that its key (and folder, results/runs/KEY/seedN) is the one the pipeline gives that run."""
    if args.suite or args.run or args.key:
        raise ConfigError("give either --backbone and --method (a run of your own) or --suite/--run/--key (a run of params.yaml)")
    if not (args.backbone and args.method and args.corpus):
        raise ConfigError("a run of your own needs --backbone, --method and --corpus")
    settings: dict = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        parts = key.split(".")
        if not sep or parts[0] not in ("training", "objectives") or len(parts) < 2 or not all(parts):
            raise ConfigError(f"--set {item}: expected training.KEY=VALUE or objectives.TERM.KEY=VALUE")
        node = settings
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _setting_value(value, f"--set {item}")
    if args.prefix is not None:  # as --set training.prefix=TEXT, which YAML would read as a mapping ("query: ")
        if "prefix" in settings.get("training", {}):
            raise ConfigError("--prefix and --set training.prefix both give the prefix: give it one way")
        settings.setdefault("training", {})["prefix"] = args.prefix
    params.check_model_name(args.backbone, "--backbone")  # minlm: not a name of params.yaml, did you mean minilm?
    pooler = args.pooler
    if pooler is None and args.backbone not in params.backbones:  # a folder or hub id: its own pooling, if it declares one
        from csebench.model.encoder import own_pooler

        own = own_pooler(args.backbone)  # a pooling csebench does not compute: an error asking for --pooler
        # its CLS as SimCSE trains it (cls: the MLP head in training only, evaluated as cls_before_pooler)
        pooler = ("cls" if own[0] == "cls_before_pooler" else own[0]) if own else None
    for teacher in args.teacher:  # a model the method's teacher term learns from: checked before anything is made
        from csebench.model.encoder import check_model_source
        from csebench.study.teacherspec import teacher_model_folder

        check_model_source(teacher_model_folder(params.backbone_model(teacher) or teacher), "--teacher")
    params, args.suite, args.run = params.with_run_of_your_own(args.backbone, args.method, args.corpus, settings,
                                                               pooler, args.seed, args.teacher)
    return params


def _pooler_line(cfg, given: str | None) -> str:
    """Which pooler the run trains and is evaluated with, and why (the log's line before training)."""
    evaluated = "cls_before_pooler" if cfg.backbone.pooler == "cls" else cfg.backbone.pooler
    why = cfg.pooler_origin
    if given and cfg.suite == "cli" and cfg.pooler_origin.startswith("backbones."):
        why = f"--pooler {given}"
    elif cfg.suite == "cli" and cfg.backbone_name.startswith("model-") and cfg.pooler_origin.startswith("backbones."):
        from csebench.model.encoder import own_pooler

        own = own_pooler(cfg.backbone.model)
        why = f"{cfg.backbone.model}'s own pooling ({own[1]})" if own else "no pooling declared by the model: cls, SimCSE's"
    head = " (its MLP head in training only)" if cfg.backbone.pooler == "cls" else ""
    return f"{cfg.run_id} pools with {cfg.backbone.pooler}{head}, evaluated with {evaluated}: {why}"


@COMMANDS.command("train", "train one run; resumes from its checkpoint if present", PARAMS,
                  option("--suite"), option("--run", "--run-name", dest="run", help="run name within the suite"),
                  option("--seed", type=int, default=None, help="the run's seed (required with --suite/--run; default 42 with --backbone)"),
                  KEY,
                  option("--backbone", help="a run of your own: a backbone name of params.yaml, a model folder or a hub id"),
                  option("--method", help="a run of your own: a method of params.yaml (simcse, iscse, ...)"),
                  option("--set", action="append", default=[], metavar="KEY=VALUE",
                help="a run of your own: a setting, training.KEY=VALUE or objectives.TERM.KEY=VALUE (repeatable)"),
                  option("--pooler", default=None, help="a run of your own: its pooler (default: the backbone's in params.yaml; "
                         "for a folder or hub id the pooling the model declares for itself, else cls)"),
                  PREFIX.but(help="a run of your own: its training.prefix, a text put before every sentence in training "
                                  "and evaluation, e.g. 'query: ' (default: the model's default prompt, if it declares one)"),
                  option("--corpus", default=None, help="training corpus (required unless the run has train: false)"), SENTEVAL,
                  OUT.but(required=False, default=None,
                 help="run folder: model/, train.json, curves (default with --backbone: results/runs/KEY/seedN, where "
                      "the pipeline keeps that run)"),
                  option("--cache-dir", default="data/cache", help="tokenized-corpus cache (default: data/cache)"),
                  option("--teacher", action="append", default=[], metavar="MODEL",
                         help="a run of your own: a teacher of its method (DistillCSE, DCLR, RankCSE; repeatable): a run "
                              "folder of `csebench train` or its model/, any model folder, a backbone name or a hub id "
                              "(its cache is built in --cache-dir)"),
                  option("--teacher-cache", action="append", default=[], help="cached teacher embeddings (DistillCSE)"), NO_PROGRESS,
                  option("--force", action="store_true",
                help="train again into a folder holding a finished run (it is replaced only when the new run completes)"),
                  option("--max-sts-pairs", type=positive_int, default=None,
                         help="a run of your own: its closing STS comparison on a seeded subset of about N pairs a task "
                              "(a quick look, protocol capped; default: the full protocol)"),
                  option("--no-sts", action="store_true",
                         help="a run of your own: end without the STS comparison of the trained model and the untrained backbone"),
                  NO_VERIFY, out_folder=True)
def cmd_train(args) -> None:
    with _nothing_left_if_refused(args):
        _train(args)


def _missing_folders(path: str | None) -> list[Path]:
    """``path`` and its parents that do not exist yet, deepest first: what creating it would make."""
    made: list[Path] = []
    p = Path(path).absolute() if path else None
    while p is not None and not os.path.lexists(p) and p != p.parent:
        made.append(p)
        p = p.parent
    return made


@contextlib.contextmanager
def _nothing_left_if_refused(args):
    """A refused `train` (a bad corpus, a template too long, a loss that is not finite: any one-line error), or one
    whose write failed (a full disk while writing a checkpoint: the CLI's one line), leaves nothing it created:
    the --out folder it made (and its parents it made), unless it holds a checkpoint, which the error names to
    resume from; the tokenized-corpus cache in a --cache-dir it made. A folder that was there before is left as it
    is, and so is a folder another process holds the lock of."""
    from csebench.core.errors import CsebenchError
    from csebench.core.io import os_error_of, remove_path
    from csebench.training.runlock import LOCK_NAME

    args.out_made = _missing_folders(args.out)  # a computed --out (a run of your own) sets it where it is chosen
    cache = _missing_folders(args.cache_dir)
    try:
        yield
    except Exception as exc:
        if not isinstance(exc, CsebenchError) and os_error_of(exc) is None:
            raise
        if int(os.environ.get("RANK", 0)) != 0:  # under torchrun rank 0 made the folders (it holds the lock)
            raise
        out = args.out_made
        run = Path(args.out).absolute() if args.out else None
        if out and run == out[0] and run.is_dir() and not run.is_symlink() and not (run / LOCK_NAME).exists() \
                and not any((run / name).exists() for name in ("checkpoint", ".checkpoint.old")):
            remove_path(run)
        if cache:
            for f in cache[0].glob("tokens-*.npz") if cache[0].is_dir() else ():
                f.unlink(missing_ok=True)
        for folder in [*out, *cache]:  # deepest first; one that is not empty (another process's) stays
            try:
                folder.rmdir()
            except OSError:
                pass
        raise


def _train(args) -> None:
    from csebench.core import distributed
    from csebench.training.runlock import run_lock

    from csebench.study.fetch import offline

    base = params = params_of(args)
    if args.backbone or args.method:
        args.seed = 42 if args.seed is None else args.seed
        params = _one_line_run(args, params)
    else:
        if args.prefix is not None:
            raise ConfigError("--prefix gives a run of your own (--backbone, --method) its training.prefix; a run of "
                              "params.yaml sets training.prefix there")
        if args.teacher:
            raise ConfigError("--teacher names a teacher of a run of your own (--backbone, --method); a run of params.yaml "
                              "names its teachers there (objectives.TERM.teachers: {model: DIR} or {run: NAME})")
        if args.seed is None:
            raise ConfigError("train: --seed is required with --suite/--run or --key")
        name_run(args, params)
    suite = params.suite(args.suite)
    cfg = suite.resolve(args.run, args.seed)
    if args.out is None:
        if args.suite != "cli":
            raise ConfigError("train: --out is required with --suite/--run or --key (the pipeline passes the run's folder)")
        from csebench.core.paths import key_dir

        args.out = key_dir(params.paths.results, cfg.key(), args.seed)
        args.out_made = _missing_folders(args.out)
        logging.getLogger("csebench").info("run %s, key %s: %s", args.run, cfg.key(), args.out)
    logging.getLogger("csebench").info("hub downloads: %s", "off (HF_HUB_OFFLINE=1)" if offline() else "on")
    logging.getLogger("csebench").info("%s", _pooler_line(cfg, args.pooler if args.suite == "cli" else None))
    _refuse_view(args.out, suite, args.run, args.seed)
    _refuse_links_out(args.out)
    if cfg.train and args.corpus:  # before the run folder is made: a corpus that is no file is said at once
        from csebench.core.corpus import check_corpus_file

        check_corpus_file(args.corpus)
    if cfg.backbone.model != "random":  # and a backbone folder of an architecture transformers does not know
        from csebench.model.encoder import check_architecture, check_model_source

        what = "--backbone" if args.backbone else f"backbones.{cfg.backbone_name}.model"
        check_model_source(cfg.backbone.model, what)
        check_architecture(cfg.backbone.model, what)
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
    if distributed.local_rank() != 0:
        return
    log = logging.getLogger("csebench")
    from csebench.training.compare import COMPARISON_FILE, PAIRS_FILE

    for old in (COMPARISON_FILE, PAIRS_FILE):  # a comparison of the training this one replaced
        if os.path.exists(os.path.join(args.out, old)):
            os.remove(os.path.join(args.out, old))
    if args.suite == "cli" and not args.no_sts and cfg.train:  # a run of your own: did training help?
        from csebench.training.compare import compare_with_untrained, comparison_lines

        comparison = compare_with_untrained(cfg, args.out, args.senteval, args.max_sts_pairs,
                                            suite.evaluation.get("precision") or "fp32", args.cache_dir)
        for line in comparison_lines(comparison):
            print(line, flush=True)
    if args.suite == "cli":  # a run of your own: its model card (with that comparison), the suite that lists it
        card = SHARING.get("model_card")(args.out)
        print(f"model card: {card} (and {os.path.join(args.out, 'model_card.md')})", flush=True)
        print(_suite_file(params, base, cfg, args.out), end="", flush=True)
    log.info("done: %s", done_line(summary, args.out))


SUITE_FILE = "suite.yaml"  # beside a run of your own: a suite listing it, to merge over params.yaml


def _suite_file(params: Params, base: Params, cfg, out: str) -> str:
    """Write ``out``/suite.yaml, a suite of your own that lists the run just trained (Params.suite_of_your_own): merged
    over params.yaml, a build of it finds the run in its folder and trains nothing. Returns the text (for the log)."""
    import shlex

    import yaml

    from csebench.core.io import write_text
    from csebench.core.paths import key_dir

    path = os.path.abspath(os.path.join(out, SUITE_FILE))
    name, spec = params.suite_of_your_own(base)
    overrides = shlex.quote('params_overrides=["' + path + '"]')  # a path with a space or a quote stays one word
    results, folder = os.path.abspath(params.paths.results), f"runs/{cfg.key()}/seed{cfg.seed}"
    where = (f"finds the run in {folder} and trains nothing" if os.path.abspath(out) == os.path.abspath(key_dir(
             params.paths.results, cfg.key(), cfg.seed)) else f"looks for the run in {folder} (it was trained in --out {out})")
    text = (f"# A suite that lists run {cfg.run_id} (key {cfg.key()}): merged over params.yaml, a build with the results\n"
            f"# folder {results} {where} (docs/runs.md):\n"
            f"#   snakemake --cores all --config 'suites=[{name}]' {overrides} reproduce=none\n"
            + yaml.safe_dump(spec, sort_keys=False, default_flow_style=False))
    write_text(path, text)
    return text


def done_line(summary: dict, out: str) -> str:
    """The train command's last line, for a reader: the run, its steps, the dev score that selected the checkpoint,
    and where it is (train.json holds the whole summary, provenance included)."""
    steps = f"{summary.get('steps')} step{'' if summary.get('steps') == 1 else 's'}"
    if summary.get("trained") is False:
        steps = "not trained (evaluation only)"
    name, dev = ((f"{summary['dev_set']} dev", summary.get("dev_best")) if summary.get("dev_set")
                 else ("STS-B dev", summary.get("stsb_dev_best")))
    dev = f"{name} {dev:.2f} at step {summary.get('best_step')}" if isinstance(dev, (int, float)) else f"no finite {name} score"
    if "capped" in (summary.get("stsb_dev_protocol"), summary.get("dev_protocol")):
        dev += " (a seeded subset of the dev pairs)"
    return f"{summary.get('run')}: {steps}, {dev}; {out} (model/, train.json)"


@COMMANDS.command("teacher-cache", "DistillCSE: a frozen teacher's normalized corpus embeddings", PARAMS,
                  MODEL.but(help="the teacher: what eval-sts --model takes (a run folder of `csebench train` or its "
                                 "model/, any model folder, a backbone name such as minilm, a hub id)"),
                  option("--corpus", required=True, help="the students' training corpus (data/X/corpus.txt)"),
                  OUT.but(help="embeddings .npy (metadata goes beside it as .json)"),
                  option("--max-seq-length", type=positive_int, default=None,
                help="training max length (default: the teacher run's own, from its training_config.json)"),
                  option("--representation", choices=["eval", "training"], default="eval",
                         help="eval: the teacher's evaluation embedding; training: its pooler and saved training head "
                              "(DCLR's complementary model as released; teacher_representation: training)"),
                  BATCH_SIZE, option("--cache-dir", default=None, help="tokenized-corpus cache folder (e.g. data/cache)"), NO_VERIFY)
def cmd_teacher_cache(args) -> None:
    from csebench.training.teachers import build_teacher_cache

    build_teacher_cache(args.model, args.corpus, args.out, max_seq_length=args.max_seq_length,
                        batch_size=args.batch_size, cache_dir=args.cache_dir, representation=args.representation)

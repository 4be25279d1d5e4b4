# What the rules read and where their targets are: the input functions and target lists of the
# rule files, kept apart from the rules (one kind of thing per file, as `snakemake --lint` asks). Thin
# wrappers over csebench.study.jobs; include after common.smk and before the rule files. Options a command takes
# are argument lists here, which the rules quote word by word with Snakemake's `:q`, as their own values: no value
# of params.yaml or of the config runs as a command (docs/reliability.md, "Paths in settings").


import functools
import os

# ---- training (train.smk, teachers.smk)

def teacher_caches_of(w):  # DistillCSE: its teachers' caches, each in the teacher run's own folder (DCLR's
    suite, run = first_listed(w)  # teacher_representation: training reads teacher/training.npy, rule teacher_cache_training)
    rep = teacher_representation(PARAMS, suite, run, int(w.seed))
    return [teacher_cache(PARAMS, suite, t, s, rep) for t, s in teacher_jobs(PARAMS, suite, run, int(w.seed))]


def prepared_for_train(w, files):  # a finished run is not retrained for data a build prepares after it (steps.py)
    return finished_run_inputs(workflow, key_dir(RESULTS, w.key, w.seed), files)


def train_corpus_of(w):  # an evaluation-only run (`train: false`) reads no corpus
    suite, run = first_listed(w)
    return prepared_for_train(w, [corpus_of(w)] if trains(PARAMS, suite, run) else [])


def train_senteval_of(w):
    return prepared_for_train(w, [senteval_of(w)])


def dev_set_of(w):  # `training.dev_set`: checkpoints selected on your own STS data (csebench reads the file from params)
    return [f for f in [dev_set_file(PARAMS, *first_listed(w), int(w.seed))] if f]


def teacher_max_len(w):
    from csebench.study.resolve import resolve_run

    return resolve_run(PARAMS, *first_listed(w), int(w.seed)).training.max_seq_length


def backbone_of(w):  # a hub backbone and a term's hub generator: fetched on the submitting host first (data.smk)
    name, run = first_listed(w)
    suite = PARAMS.suite(name)
    notes = [f"{DATA}/backbones/{suite.run(run)['backbone']}.json"] if trains_from_hub(suite, run) else []
    return prepared_for_train(w, notes + [f"{DATA}/generators/{g}.json" for g in hub_generators(suite, run, int(w.seed))])


# ---- evaluation (embed.smk, sts.smk, transfer.smk, probing.smk, mteb.smk)

def eval_settings(w):  # a run's job: the settings its {ev} folder names; a suite's job: the suite's
    return RUNS.eval_settings(w.ev) if hasattr(w, "ev") else suite_evaluation(PARAMS, w.suite)


def probing_cap(w):  # `transfer: {max_train_sentences: N, max_test_sentences: M}` (CPU demo only)
    ev = eval_settings(w)
    return [*(["--max-train-sentences", str(ev["max_train_sentences"])] if ev["max_train_sentences"] else []),
            *(["--max-test-sentences", str(ev["max_test_sentences"])] if ev["max_test_sentences"] else [])]


def transfer_cap(w):  # the caps, or `transfer: false`: embed encodes no transfer sentence, eval_transfer says "off"
    return ["--no-transfer"] if eval_settings(w).get("transfer") is False else probing_cap(w)


def sts_cap(w):  # `evaluation: {max_sts_pairs: N}` (CPU demo only): embed and eval_sts use the same subsets
    cap = eval_settings(w)["max_sts_pairs"]
    return ["--max-sts-pairs", str(cap)] if cap else []


def sts_pairs_of(w):  # `evaluation: {sts_pairs: [NAME, ...]}`: your own STS test sets, part of the settings {ev} names
    return list(sts_sets(PARAMS, eval_settings(w)).values())


def sts_pairs_args(w):  # embed and eval_sts read the same sets
    return sts_pairs_argv(sts_sets(PARAMS, eval_settings(w)))


def embeddings_of(w):
    return f"{key_dir(RESULTS, w.key, w.seed)}/{w.ev}/embeddings.npz"


def probing_of(w):
    return f"{DATA}/{suite_data(PARAMS, suite_of(w))}/probing/ROOT"


def mteb_targets(suite):
    """Every evaluated run's mteb.json, for a suite with an `mteb:` section; [] otherwise."""
    return [] if suite_mteb_tasks(PARAMS, suite) is None else run_dirs(suite, "mteb/mteb.json", evaluated=True)


# ---- model cards (card.smk)

def card_inputs(w):
    """The view the card is made from: its train.json, and the results it reports (none for a run no
    suite evaluates); MTEB (mteb.smk) where that suite asks for it: the card reads MTEB's result files
    beside VIEW/mteb/mteb.json."""
    seed = int(w.seed)
    suite, run = RUNS.card_source(w.key, seed)
    view = run_dir(PARAMS, suite, run, seed)
    summary = {"summary": f"{view}/train.json"}
    if (run, seed) not in evaluated_jobs(PARAMS, suite):
        return summary
    if suite not in SUITES and f"{view}/sts.json" not in reproduce_files():
        # a suite that only paper items read, and only its training records (demo-iscse-beta: IS-CSE
        # Table 7 reads train.json): its card waits for no evaluation the build would not make
        return summary
    mteb = [f"{view}/mteb/mteb.json"] if suite_mteb_tasks(PARAMS, suite) is not None else []
    return {**summary, "results": [f"{view}/sts.json", *([f"{view}/transfer.json"] if CARD_HAS_TRANSFER else []), *mteb]}


def card_targets(suite):
    """The card of every model of the suite: its runs and the teacher seeds they distil from."""
    return [f"{RUNS.folder(suite, run, seed)}/model_card.md" for run, seed in all_runs_with_teachers(PARAMS, suite)]


# ---- tables, figures and pages (results.smk, metrics.smk)

# A table, figure or page stays in place until its job has written the new one: Snakemake removes a job's outputs
# before it runs the job, except those flagged `update` (kept, and restored from its backup if the job fails).
# csebench writes them atomically (csebench.core.io.staged_outputs): a job refused (a result file changed by hand:
# csebench.results.runs.check_scores) or killed leaves the previous ones whole.
kept_until_replaced = globals().get("update", lambda files: files)


def results_of(path, suite):
    """The results folder of a suite's output file (its prefix before the suite's folder)."""
    return path[: path.index(f"{os.sep}{suite}{os.sep}")]

def reproduce_items(scale):
    if scale != REPRODUCE:
        return []
    return REGISTRY.built(scale)


def reproduce_targets():
    return [_render.item_outputs(it, RESULTS, REPRODUCE)[0] for it in reproduce_items(REPRODUCE)] if REPRODUCE in ROOTS.values() else []


@functools.cache
def reproduce_files():
    """Every result file the paper items being built read (computed once: card.smk asks per job)."""
    if REPRODUCE not in ROOTS.values():
        return frozenset()
    return frozenset(f for it in reproduce_items(REPRODUCE) for f in _render.input_files(it, PARAMS, RESULTS, REPRODUCE))


def reproduce_suites():
    """The suites whose result folders the paper items being built read (the demo's: demo-iscse-beta,
    demo-combinations): their models get cards as the configured suites' do (Snakefile's rule all)."""
    return _render.suites_of(sorted(reproduce_files()), PARAMS)


def _item_inputs(w):
    return _render.input_files(REGISTRY.item(f"{w.paper}/{w.item}"), PARAMS, RESULTS, ROOTS[w.root])


def suite_links(w):
    fn = globals().get("analysis_targets")
    mteb = [] if suite_mteb_tasks(PARAMS, w.suite) is None else [f"{RESULTS}/{w.suite}/tables/mteb.md"]
    return [*(p for p in (fn(w.suite) if fn else []) if p.endswith((".png", ".md"))), *mteb]


def _report(path, item):
    """``path`` in the Snakemake report under its paper (``item``: wildcards -> the item's id)."""
    return report(path, caption=CAPTION, category=lambda w: REGISTRY.category(REGISTRY.item(item(w))),
                  subcategory=lambda w: getattr(w, "suite", None) or f"{ROOTS[w.root]} scale",
                  labels=lambda w: {"item": REGISTRY.item(item(w)).number, "title": REGISTRY.item(item(w)).title})


def _paper_item(w):
    return f"{w.paper}/{w.item}"


def _caption(w):
    return REGISTRY.caption(REGISTRY.item(_paper_item(w)), ROOTS[w.root])

# One model card per run (csebench.modelcard; docs/runs.md): RUN/model_card.md in the run's own folder,
# installed as RUN/model/README.md, so every suite's view of the run shows it through its model/ link.
# It is made from the view of the first suite of params.yaml that evaluates the run (Runs.card_source:
# that suite's names, results and MTEB's), once those results exist: model/ is the train rule's output
# and is complete before any result. No rule takes model/ as an input (they read it through train.json),
# so the README added there reruns nothing: a second `snakemake -n` plans nothing
# (tests/test_model_share.py). The embeddings fingerprint skips README.md, and .dvcignore hides it from
# DVC's hash of the train stage's model/ output. Include after transfer.smk.

CARD_HAS_TRANSFER = any(r.name == "eval_transfer" for r in workflow.rules)


def card_inputs(w):
    """The view the card is made from: its train.json, and the results it reports (none for a run no
    suite evaluates); MTEB (mteb.smk) where that suite asks for it: the card reads MTEB's result files
    beside VIEW/mteb/mteb.json."""
    seed = int(w.seed)
    suite, run = RUNS.card_source(w.key, seed)
    view = wf.run_dir(PARAMS, suite, run, seed)
    if (run, seed) not in wf.evaluated_jobs(PARAMS, suite):
        return [f"{view}/train.json"]
    if suite not in SUITES and f"{view}/sts.json" not in reproduce_files():
        # a suite that only paper items read, and only its training records (demo-iscse-beta: IS-CSE
        # Table 7 reads train.json): its card waits for no evaluation the build would not make
        return [f"{view}/train.json"]
    mteb = [f"{view}/mteb/mteb.json"] if wf.suite_mteb_tasks(PARAMS, suite) is not None else []
    return [f"{view}/train.json", f"{view}/sts.json"] + ([f"{view}/transfer.json"] if CARD_HAS_TRANSFER else []) + mteb


def card_targets(suite):
    """The card of every model of the suite: its runs and the teacher seeds they distil from."""
    return [f"{RUNS.folder(suite, run, seed)}/model_card.md" for run, seed in wf.all_runs_with_teachers(PARAMS, suite)]


rule model_card:
    input:
        card_inputs,
    output:
        f"{RUN}/model_card.md",
    threads: 1  # reads JSON, writes Markdown
    log:
        f"{RUN}/logs/model_card.log",
    shell:
        "csebench model-card --run $(dirname {input[0]}) 2> {log}"

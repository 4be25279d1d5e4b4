# A model card per run (csebench.modelcard): RUN/model_card.md, installed as RUN/model/README.md.
# model/ is the train rule's output and is complete before any result exists, so the card is made
# here, once the run's evaluations are. No rule takes model/ as an input (they read it through
# train.json), so the README added there reruns nothing: a second `snakemake -n` plans nothing
# (tests/test_model_share.py). The embeddings fingerprint skips README.md, and .dvcignore hides it
# from DVC's hash of the train stage's model/ output. Include after transfer.smk.

CARD_HAS_TRANSFER = any(r.name == "eval_transfer" for r in workflow.rules)


def card_results(w):
    """The run's result files the card reports; none for a training-only run (`evaluate: false`) or a
    teacher seed the suite does not evaluate. MTEB (mteb.smk) where the suite asks for it: the card
    reads MTEB's result files beside RUN/mteb/mteb.json."""
    seed = int(w.seed)
    if (w.run, seed) not in wf.evaluated_jobs(PARAMS, w.suite):
        return []
    d = wf.run_dir(PARAMS, w.suite, w.run, seed)
    mteb = [f"{d}/mteb/mteb.json"] if wf.suite_mteb_tasks(PARAMS, w.suite) is not None else []
    return [f"{d}/sts.json"] + ([f"{d}/transfer.json"] if CARD_HAS_TRANSFER else []) + mteb


def card_targets(suite):
    """Every model of the suite: its runs and the teacher seeds they distil from."""
    return [f"{wf.run_dir(PARAMS, suite, run, seed)}/model_card.md" for run, seed in wf.all_runs_with_teachers(PARAMS, suite)]


rule model_card:
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        results=card_results,
    output:
        f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/model_card.md",
    threads: 1  # reads JSON, writes Markdown
    log:
        f"{RESULTS}/{{suite}}/logs/model_card.{{run}}.seed{{seed}}.log",
    shell:
        "csebench model-card --run $(dirname {input.summary}) 2> {log}"

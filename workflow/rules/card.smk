# One model card per run (csebench.sharing.modelcard; docs/runs.md): RUN/model_card.md in the run's own folder,
# installed as RUN/model/README.md, so every suite's view of the run shows it through its model/ link.
# It is made from the view of the first suite of params.yaml that evaluates the run (Runs.card_source:
# that suite's names, results and MTEB's), once those results exist: model/ is the train rule's output
# and is complete before any result. No rule takes model/ as an input (they read it through train.json),
# so the README added there reruns nothing: a second `snakemake -n` plans nothing
# (tests/test_model_share.py). The embeddings fingerprint skips README.md, and .dvcignore hides it from
# DVC's hash of the train stage's model/ output. Include after transfer.smk.

CARD_HAS_TRANSFER = any(r.name == "eval_transfer" for r in workflow.rules)


rule model_card:
    conda:
        CONDA_ENV
    input:
        unpack(card_inputs),
    output:
        card=f"{RUN}/model_card.md",
    threads: 1  # reads JSON, writes Markdown
    log:
        f"{RUN}/logs/model_card.log",
    shell:
        "csebench model-card --run \"$(dirname {input.summary:q})\" 2> {log:q}"

# Training, once per run (results/runs/{key}/seed{seed}, docs/runs.md), named by the first suite and
# run of params.yaml that list it (--key).


rule train:  # with `train: false` it writes the untrained backbone as model/ (csebench.training.untrained_run)
    conda:
        CONDA_ENV
    input:
        corpus=train_corpus_of,
        senteval=train_senteval_of,
        teachers=teacher_caches_of,
        dev_set=dev_set_of,
        backbone=backbone_of,
    output:
        summary=f"{RUN}/train.json",
        model=directory(f"{RUN}/model"),
        train_curve=f"{RUN}/train_curve.csv",
        dev_curve=f"{RUN}/dev_curve.csv",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        corpus=lambda w, input: option_args("--corpus", input.corpus),
        teacher_args=lambda w, input: option_args("--teacher-cache", input.teachers),
        cache=f"{DATA}/cache",
        progress=PROGRESS,
    resources:
        gpu=1,
    threads: config.get("threads", 4)
    log:
        f"{RUN}/logs/train.log",
    shell:
        "csebench --threads {threads} train {params.cfg:q} --key {wildcards.key:q} --seed {wildcards.seed:q}"
        " {params.corpus:q} --senteval \"$(dirname {input.senteval:q})\" --out \"$(dirname {output.summary:q})\""
        " --cache-dir {params.cache:q} {params.teacher_args:q} {params.progress:q} 2> {log:q}"

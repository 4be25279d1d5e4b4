# Training, once per run (results/runs/{key}/seed{seed}, docs/runs.md), named by the first suite and
# run of params.yaml that list it (--key).


def teacher_caches_of(w):  # DistillCSE: its teachers' caches, each in the teacher run's own folder
    suite, run = first_listed(w)
    return [wf.teacher_cache(PARAMS, suite, t, s) for t, s in wf.teacher_jobs(PARAMS, suite, run, int(w.seed))]


def train_corpus_of(w):  # an evaluation-only run (`train: false`) reads no corpus
    suite, run = first_listed(w)
    return corpus_of(w) if wf.trains(PARAMS, suite, run) else []


def dev_set_of(w):  # `training.dev_set`: checkpoints selected on your own STS data (csebench reads the file from params)
    return [f for f in [wf.dev_set_file(PARAMS, *first_listed(w), int(w.seed))] if f]


rule train:  # with `train: false` it writes the untrained backbone as model/ (csebench.evalonly)
    input:
        corpus=train_corpus_of,
        senteval=senteval_of,
        teachers=teacher_caches_of,
        dev_set=dev_set_of,
    output:
        summary=f"{RUN}/train.json",
        model=directory(f"{RUN}/model"),
        train_curve=f"{RUN}/train_curve.csv",
        dev_curve=f"{RUN}/dev_curve.csv",
    params:
        corpus=lambda w, input: f"--corpus {input.corpus}" if input.corpus else "",
        teacher_args=lambda w, input: " ".join(f"--teacher-cache {t}" for t in input.teachers),
    resources:
        gpu=1,
    threads: config.get("threads", 4)
    log:
        f"{RUN}/logs/train.log",
    shell:
        "csebench --threads {threads} train --key {wildcards.key} --seed {wildcards.seed}"
        " {params.corpus} --senteval $(dirname {input.senteval}) --out $(dirname {output.summary})"
        " --cache-dir {DATA}/cache {params.teacher_args} {PROGRESS} 2> {log}"

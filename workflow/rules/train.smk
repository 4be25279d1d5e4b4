def teacher_caches_of(w):
    return [wf.teacher_cache(PARAMS, w.suite, run, seed) for run, seed in wf.teacher_jobs(PARAMS, w.suite, w.run, int(w.seed))]


def train_corpus_of(w):  # an evaluation-only run (`train: false`) reads no corpus
    return corpus_of(w) if wf.trains(PARAMS, w.suite, w.run) else []


def dev_set_of(w):  # `training.dev_set`: checkpoints selected on your own STS data (csebench reads the file from params)
    return [f for f in [wf.dev_set_file(PARAMS, w.suite, w.run, int(w.seed))] if f]


rule train:  # with `train: false` it writes the untrained backbone as model/ (csebench.evalonly)
    input:
        corpus=train_corpus_of,
        senteval=senteval_of,
        teachers=teacher_caches_of,
        dev_set=dev_set_of,
    output:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        model=directory(f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/model"),
        train_curve=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train_curve.csv",
        dev_curve=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/dev_curve.csv",
    params:
        fingerprint=lambda w: wf.run_fingerprint(PARAMS, w.suite, w.run, int(w.seed)),
        corpus=lambda w, input: f"--corpus {input.corpus}" if input.corpus else "",
        teacher_args=lambda w, input: " ".join(f"--teacher-cache {t}" for t in input.teachers),
    resources:
        gpu=1,
    threads: config.get("threads", 4)
    log:
        f"{RESULTS}/{{suite}}/logs/train.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} train --suite {wildcards.suite} --run {wildcards.run} --seed {wildcards.seed}"
        " {params.corpus} --senteval $(dirname {input.senteval}) --out $(dirname {output.summary})"
        " --cache-dir {DATA}/cache {params.teacher_args} {PROGRESS} 2> {log}"

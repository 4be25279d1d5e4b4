# DistillCSE: a frozen teacher's normalized embeddings of the training corpus, computed once per
# (suite, teacher run, seed) and reused by every student distilling from it (rule train's
# `teachers` input, from csebench.workflow.teacher_jobs). Tokenized with the teacher run's own
# training max length; the student checks corpus, tokenizer and max length against the metadata.


def teacher_max_len(w):
    from csebench.config import resolve_run

    return resolve_run(PARAMS, w.suite, w.run, int(w.seed)).training.max_seq_length


rule teacher_cache:
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        corpus=corpus_of,
    output:
        emb=f"{RESULTS}/{{suite}}/teachers/{{run}}/seed{{seed}}/embeddings.npy",
        meta=f"{RESULTS}/{{suite}}/teachers/{{run}}/seed{{seed}}/embeddings.json",
    params:
        max_len=teacher_max_len,
    resources:
        gpu=1,
    threads: config.get("threads", 4)
    log:
        f"{RESULTS}/{{suite}}/logs/teacher_cache.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} teacher-cache --model $(dirname {input.summary})/model --corpus {input.corpus}"
        " --out {output.emb} --max-seq-length {params.max_len} --cache-dir {DATA}/cache 2> {log}"

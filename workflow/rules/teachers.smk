# DistillCSE: a frozen teacher's normalized embeddings of the training corpus, computed once per
# teacher run and seed, in its own folder (results/runs/{key}/seed{seed}/teacher), and reused by every
# student distilling from it, whichever suites list them (rule train's `teachers` input, from
# csebench.study.jobs.teacher_jobs). Tokenized with the teacher run's own training max length; the
# student checks corpus, tokenizer, max length and the teacher's key against the metadata.


rule teacher_cache:
    conda:
        CONDA_ENV
    input:
        summary=f"{RUN}/train.json",
        corpus=corpus_of,
    output:
        emb=f"{RUN}/teacher/embeddings.npy",
        meta=f"{RUN}/teacher/embeddings.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        max_len=teacher_max_len,
        cache=f"{DATA}/cache",
    resources:
        gpu=1,
    threads: config.get("threads", 4)
    log:
        f"{RUN}/logs/teacher_cache.log",
    shell:
        "csebench --threads {threads} teacher-cache {params.cfg:q} --model \"$(dirname {input.summary:q})/model\""
        " --corpus {input.corpus:q} --out {output.emb:q} --max-seq-length {params.max_len:q} --cache-dir {params.cache:q}"
        " 2> {log:q}"


# DCLR's complementary model as released (objectives.debiased_negatives.teacher_representation: training): the
# teacher's pooler and the training head it saved (a SimCSE run's MLP over [CLS], as a SimCSE checkpoint converted
# by simcse_to_huggingface.py gives it as pooler_output), in teacher/training.npy beside the evaluation cache.
rule teacher_cache_training:
    conda:
        CONDA_ENV
    input:
        summary=f"{RUN}/train.json",
        corpus=corpus_of,
    output:
        emb=f"{RUN}/teacher/training.npy",
        meta=f"{RUN}/teacher/training.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        max_len=teacher_max_len,
        cache=f"{DATA}/cache",
    resources:
        gpu=1,
    threads: config.get("threads", 4)
    log:
        f"{RUN}/logs/teacher_cache_training.log",
    shell:
        "csebench --threads {threads} teacher-cache {params.cfg:q} --model \"$(dirname {input.summary:q})/model\""
        " --corpus {input.corpus:q} --representation training --out {output.emb:q} --max-seq-length {params.max_len:q}"
        " --cache-dir {params.cache:q} 2> {log:q}"

# SentEval transfer tasks (MR CR SUBJ MPQA SST-2 TREC MRPC) per run, SimCSE's "test" mode.
# A suite may set `transfer: {max_train_sentences: N}` in params.yaml (CPU demo only): the output is then
# marked "protocol": "capped".


rule eval_transfer:
    conda:
        CONDA_ENV
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
        embeddings=embeddings_of,
    output:
        transfer=f"{EVAL}/transfer.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        cap=transfer_cap,
        progress=PROGRESS,
    threads: config.get("threads", 4)  # the classifiers (torch, CPU); embeddings are looked up
    log:
        f"{EVAL}/logs/eval_transfer.log",
    shell:
        "csebench --threads {threads} eval-transfer {params.cfg:q} --model \"$(dirname {input.summary:q})/model\""
        " --senteval \"$(dirname {input.senteval:q})\" --embeddings {input.embeddings:q} --key {wildcards.key:q}"
        " --seed {wildcards.seed:q} {params.cap:q} --out {output.transfer:q} {params.progress:q} 2> {log:q}"

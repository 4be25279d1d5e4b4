# STS12-16 (all), STS-B test, SICK-R test per run, from its embeddings table (embed.smk); and the
# suite's own STS sets (`evaluation: {sts_pairs: [...]}`, part of the settings {ev} names), beside them.
rule eval_sts:
    conda:
        CONDA_ENV
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
        embeddings=embeddings_of,
        sts_pairs=sts_pairs_of,
    output:
        sts=f"{EVAL}/sts.json",
        pairs=f"{EVAL}/sts_pairs.npz",  # per-pair cosines: paired bootstrap in report
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        cap=lambda w: [*sts_cap(w), *sts_pairs_args(w)],  # your own STS sets too (embed.smk)
        progress=PROGRESS,
    threads: 1  # looks embeddings up
    log:
        f"{EVAL}/logs/eval_sts.log",
    shell:
        "csebench --threads {threads} eval-sts {params.cfg:q} --model \"$(dirname {input.summary:q})/model\""
        " --senteval \"$(dirname {input.senteval:q})\" --embeddings {input.embeddings:q} --key {wildcards.key:q}"
        " --seed {wildcards.seed:q} --out {output.sts:q} --pairs-out {output.pairs:q} {params.cap:q} {params.progress:q} 2> {log:q}"

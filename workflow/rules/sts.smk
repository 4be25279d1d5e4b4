# STS12-16 (all), STS-B test, SICK-R test per run, from its embeddings table (embed.smk).
rule eval_sts:
    input:
        summary=f"{RUN}/train.json",
        senteval=senteval_of,
        embeddings=embeddings_of,
    output:
        sts=f"{EVAL}/sts.json",
        pairs=f"{EVAL}/sts_pairs.npz",  # per-pair cosines: paired bootstrap in report
    params:
        cap=sts_cap,
    threads: 1  # looks embeddings up
    log:
        f"{EVAL}/logs/eval_sts.log",
    shell:
        "csebench --threads {threads} eval-sts --model $(dirname {input.summary})/model --senteval $(dirname {input.senteval})"
        " --embeddings {input.embeddings} --key {wildcards.key} --seed {wildcards.seed} --out {output.sts} --pairs-out {output.pairs}"
        " {params.cap} {PROGRESS} 2> {log}"

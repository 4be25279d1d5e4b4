# STS12-16 (all), STS-B test, SICK-R test per trained model, from its embeddings table (embed.smk).
rule eval_sts:
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        senteval=senteval_of,
        embeddings=embeddings_of,
    output:
        sts=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/sts.json",
        pairs=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/sts_pairs.npz",  # per-pair cosines: paired bootstrap in report
    params:
        cap=sts_cap,
    threads: 1  # looks embeddings up
    log:
        f"{RESULTS}/{{suite}}/logs/eval_sts.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} eval-sts --model $(dirname {input.summary})/model --senteval $(dirname {input.senteval})"
        " --embeddings {input.embeddings} --suite {wildcards.suite} --run {wildcards.run} --seed {wildcards.seed} --out {output.sts} --pairs-out {output.pairs}"
        " {params.cap} {PROGRESS} 2> {log}"

# STS12-16 (all), STS-B test, SICK-R test per trained model, from its embeddings table (embed.smk); and
# the suite's own STS sets (`evaluation: {sts_pairs: [...]}`), reported beside them.
rule eval_sts:
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        senteval=senteval_of,
        embeddings=embeddings_of,
        sts_pairs=sts_pairs_of,
    output:
        sts=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/sts.json",
        pairs=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/sts_pairs.npz",  # per-pair cosines: paired bootstrap in report
    params:
        cap=lambda w: " ".join(a for a in (sts_cap(w), sts_pairs_args(w)) if a),  # your own STS sets too (embed.smk)
    threads: 1  # looks embeddings up
    log:
        f"{RESULTS}/{{suite}}/logs/eval_sts.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} eval-sts --model $(dirname {input.summary})/model --senteval $(dirname {input.senteval})"
        " --embeddings {input.embeddings} --suite {wildcards.suite} --run {wildcards.run} --seed {wildcards.seed} --out {output.sts} --pairs-out {output.pairs}"
        " {params.cap} {PROGRESS} 2> {log}"

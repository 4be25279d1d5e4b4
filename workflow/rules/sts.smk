rule eval_sts:
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        senteval=senteval_of,
    output:
        sts=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/sts.json",
        pairs=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/sts_pairs.npz",  # per-pair cosines: paired bootstrap in report
    threads: config.get("threads", 4)
    log:
        f"{RESULTS}/{{suite}}/logs/eval_sts.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} eval-sts --model $(dirname {input.summary})/model --senteval $(dirname {input.senteval})"
        " --suite {wildcards.suite} --run {wildcards.run} --seed {wildcards.seed} --out {output.sts} --pairs-out {output.pairs}"
        " {PROGRESS} 2> {log}"

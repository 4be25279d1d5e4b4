# SentEval transfer tasks (MR CR SUBJ MPQA SST-2 TREC MRPC) per trained model, SimCSE's "test" mode.
# A suite may set `transfer: {max_train_sentences: N}` in params.yaml (CPU demo only): the output is then
# marked "protocol": "capped". Include this file before report.smk (report picks up eval_transfer).


def transfer_cap(w):
    cap = PARAMS.get("suites", {}).get(w.suite, {}).get("transfer", {}).get("max_train_sentences")
    return f"--max-train-sentences {int(cap)}" if cap else ""


rule eval_transfer:
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
        senteval=senteval_of,
    output:
        f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/transfer.json",
    params:
        cap=transfer_cap,
    threads: config.get("threads", 4)
    log:
        f"{RESULTS}/{{suite}}/logs/eval_transfer.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} eval-transfer --model $(dirname {input.summary})/model --senteval $(dirname {input.senteval})"
        " --suite {wildcards.suite} --run {wildcards.run} --seed {wildcards.seed} {params.cap} --out {output}"
        " {PROGRESS} 2> {log}"

rule prepare_corpus:
    output:
        f"{DATA}/{{data}}/corpus.txt",
    params:
        source=lambda w: str(PARAMS["data"][w.data]["corpus"]),
    log:
        f"{DATA}/logs/prepare_corpus.{{data}}.log",
    shell:
        "csebench prepare-corpus --data {wildcards.data} --out {output} 2> {log}"


rule prepare_senteval:
    output:
        f"{DATA}/{{data}}/senteval/ROOT",
    params:
        source=lambda w: str(PARAMS["data"][w.data]["senteval"]),
    log:
        f"{DATA}/logs/prepare_senteval.{{data}}.log",
    shell:
        "csebench prepare-senteval --data {wildcards.data} --out $(dirname {output}) 2> {log}"

rule prepare_corpus:
    conda:
        CONDA_ENV
    output:
        corpus=f"{DATA}/{{data}}/corpus.txt",
    params:
        source=lambda w: str(PARAMS["data"][w.data]["corpus"]),
    log:
        f"{DATA}/logs/prepare_corpus.{{data}}.log",
    shell:
        "csebench prepare-corpus --data {wildcards.data} --out {output.corpus} 2> {log}"


rule prepare_senteval:
    conda:
        CONDA_ENV
    output:
        root=f"{DATA}/{{data}}/senteval/ROOT",
    params:
        source=lambda w: str(PARAMS["data"][w.data]["senteval"]),
    log:
        f"{DATA}/logs/prepare_senteval.{{data}}.log",
    shell:
        "csebench prepare-senteval --data {wildcards.data} --out $(dirname {output.root}) 2> {log}"

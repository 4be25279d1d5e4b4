rule prepare_corpus:
    conda:
        CONDA_ENV
    output:
        corpus=f"{DATA}/{{data}}/corpus.txt",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        source=lambda w: str(PARAMS["data"][w.data]["corpus"]),
    log:
        f"{DATA}/logs/prepare_corpus.{{data}}.log",
    shell:
        "csebench prepare-corpus {params.cfg} --data {wildcards.data} --out {output.corpus} 2> {log}"


rule prepare_senteval:
    conda:
        CONDA_ENV
    output:
        root=f"{DATA}/{{data}}/senteval/ROOT",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        source=lambda w: str(PARAMS["data"][w.data]["senteval"]),
    log:
        f"{DATA}/logs/prepare_senteval.{{data}}.log",
    shell:
        "csebench prepare-senteval {params.cfg} --data {wildcards.data} --out $(dirname {output.root}) 2> {log}"

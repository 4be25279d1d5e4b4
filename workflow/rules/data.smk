# The data each suite reads, and each hub backbone its runs train from: what needs the network, so
# these run on the host that runs Snakemake (localrules), before any job that needs them is
# submitted to a cluster, whose nodes often have none (csebench.study.fetch, docs/cluster.md).

localrules: prepare_corpus, prepare_senteval, fetch_backbone, fetch_generator


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
        "csebench prepare-corpus {params.cfg:q} --data {wildcards.data:q} --out {output.corpus:q} 2> {log:q}"


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
        "csebench prepare-senteval {params.cfg:q} --data {wildcards.data:q} --out \"$(dirname {output.root:q})\" 2> {log:q}"


rule fetch_backbone:  # only for a backbone that is a hub id (train.smk asks for it then)
    conda:
        CONDA_ENV
    output:
        note=f"{DATA}/backbones/{{backbone}}.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
    log:
        f"{DATA}/logs/fetch_backbone.{{backbone}}.log",
    shell:
        "csebench fetch-backbone {params.cfg:q} --backbone {wildcards.backbone:q} --out {output.note:q} 2> {log:q}"


rule fetch_generator:  # a term's second pretrained model (DiffCSE's generator), as a backbone (train.smk asks for it)
    conda:
        CONDA_ENV
    output:
        note=f"{DATA}/generators/{{generator}}.json",
    log:
        f"{DATA}/logs/fetch_generator.{{generator}}.log",
    shell:
        "csebench fetch-generator --model {wildcards.generator:q} --out {output.note:q} 2> {log:q}"

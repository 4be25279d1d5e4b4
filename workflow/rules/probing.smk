# SentEval probing tasks (SSCL Table 4: SentLen, TreeDepth, CoordInv) per run. Not part of `rule all`:
# ask for results/{suite}/runs/{run}/seed{seed}/probing.json (views.smk links it to the run's own).
# The data source needs a `probing: {url: ...}` or `probing: {path: FOLDER}` entry in params.yaml
# (data.wiki1m has the URL). Probing sentences are not in embeddings.npz, so eval_probing encodes with
# the model (GPU); a suite's transfer cap (`transfer: {max_train_sentences: N}`) caps the probing train
# splits too ("capped"). Include this file after embed.smk (eval_settings, probing_cap).


localrules: prepare_probing  # downloads (data.smk)


rule prepare_probing:
    conda:
        CONDA_ENV
    output:
        root=f"{DATA}/{{data}}/probing/ROOT",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        source=lambda w: str(PARAMS["data"][w.data].get("probing")),
    log:
        f"{DATA}/logs/prepare_probing.{{data}}.log",
    shell:
        "csebench prepare-probing {params.cfg:q} --data {wildcards.data:q} --out \"$(dirname {output.root:q})\" 2> {log:q}"


rule eval_probing:
    conda:
        CONDA_ENV
    input:
        summary=f"{RUN}/train.json",
        probing=probing_of,
    output:
        probing=f"{EVAL}/probing.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        cap=probing_cap,
        precision=lambda w: eval_settings(w)["precision"],
        progress=PROGRESS,
    threads: config.get("threads", 4)  # the classifiers run on CPU
    resources:
        gpu=1,  # encoding ~360k probing sentences with the model
    log:
        f"{EVAL}/logs/eval_probing.log",
    shell:
        "csebench --threads {threads} eval-probing {params.cfg:q} --model \"$(dirname {input.summary:q})/model\""
        " --probing \"$(dirname {input.probing:q})\" --precision {params.precision:q} --key {wildcards.key:q}"
        " --seed {wildcards.seed:q} {params.cap:q} --out {output.probing:q} {params.progress:q} 2> {log:q}"

# MTEB beside SentEval, opt-in per suite: `mteb: {tasks: [...]}` in params.yaml (`mteb: {}`: the default
# tasks, csebench.evaluation.mteb_eval.DEFAULT_TASKS). Needs the mteb extra (make setup installs it) and,
# offline, the tasks' datasets in the Hugging Face datasets cache (`csebench eval-mteb --download-only`).
# Writes MTEB's result files and mteb.json into the run's mteb/ folder. Include after embed.smk (eval_settings).


rule eval_mteb:
    conda:
        CONDA_ENV
    input:
        summary=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/train.json",
    output:
        mteb=f"{RESULTS}/{{suite}}/runs/{{run}}/seed{{seed}}/mteb/mteb.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        progress=PROGRESS,
        tasks=lambda w: suite_mteb_tasks(PARAMS, w.suite) or [],
        precision=lambda w: eval_settings(w)["precision"],
    threads: config.get("threads", 4)  # classification tasks fit MTEB's classifiers on CPU
    resources:
        gpu=1,  # encoding every task's sentences (retrieval corpora included) with the model
    log:
        f"{RESULTS}/{{suite}}/logs/eval_mteb.{{run}}.seed{{seed}}.log",
    shell:
        "csebench --threads {threads} eval-mteb {params.cfg:q} --model \"$(dirname {input.summary:q})/model\" --tasks {params.tasks:q}"
        " --precision {params.precision:q} --suite {wildcards.suite:q} --run {wildcards.run:q} --seed {wildcards.seed:q}"
        " --out \"$(dirname {output.mteb:q})\" {params.progress:q} 2> {log:q}"

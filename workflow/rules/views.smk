# What a suite sees of its runs (docs/runs.md): results/{suite}/runs/{run}/seed{seed} and
# results/{suite}/analysis/{run}/seed{seed} are views of the run's own folder (results/runs/{key}/seed{seed}),
# which every suite listing the run shares. `csebench view-run` copies the JSON results with this suite's
# names in them (reports and figures show this suite's run) and links the rest (model/, curves, pairs).
# Local jobs of a second or so: no cluster submission, and run as soon as they can (priority 1): what reads a
# view (a suite's analysis of its teachers) can then start while the rest of the build trains. A change reruns
# only the views whose first suite and run (the one that names the run: `--first`) changed.

import os

from csebench.core import paths

localrules: view_trained, view_evaluated, view_probing, view_analysis

VIEW = run_dir(PARAMS, "{suite}", "{run}", "{seed}")  # a suite's view of a run
VIEW_CMD = ("csebench view-run {params.cfg:q} --suite {wildcards.suite:q} --run {wildcards.run:q} --seed {wildcards.seed:q}"
            " --first {params.first:q} --from {params.source:q} --out {params.view:q} {params.names:q} 2> {log:q}")


rule view_trained:
    priority: 1
    input:
        lambda w: RUNS.files(w.suite, w.run, w.seed, ["train.json", "train_curve.csv", "dev_curve.csv"]),
    output:
        summary=f"{VIEW}/train.json",
        curve=f"{VIEW}/train_curve.csv",
        dev_curve=f"{VIEW}/dev_curve.csv",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        first=lambda w: RUNS.first_name(w.suite, w.run, w.seed),
        source=lambda w: RUNS.folder(w.suite, w.run, int(w.seed)),
        view=lambda w, output: os.path.dirname(output.summary),
        names=["train.json", "train_curve.csv", "dev_curve.csv", "model"],
    log:
        f"{RESULTS}/{{suite}}/logs/view.{{run}}.seed{{seed}}.log",
    conda:
        "../envs/csebench.yaml"
    shell:
        VIEW_CMD


rule view_evaluated:
    priority: 1
    input:
        lambda w: RUNS.files(w.suite, w.run, w.seed, ["sts.json", "sts_pairs.npz", "transfer.json", "embeddings.npz"],
                             evaluated=True),
    output:
        sts=f"{VIEW}/sts.json",
        pairs=f"{VIEW}/sts_pairs.npz",
        transfer=f"{VIEW}/transfer.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        first=lambda w: RUNS.first_name(w.suite, w.run, w.seed),
        source=lambda w: RUNS.eval_folder(w.suite, w.run, int(w.seed)),
        view=lambda w, output: os.path.dirname(output.sts),
        names=["sts.json", "sts_pairs.npz", "transfer.json", "embeddings.npz"],
    log:
        f"{RESULTS}/{{suite}}/logs/view.eval.{{run}}.seed{{seed}}.log",
    conda:
        "../envs/csebench.yaml"
    shell:
        VIEW_CMD


rule view_probing:
    priority: 1
    input:
        lambda w: RUNS.files(w.suite, w.run, w.seed, ["probing.json"], evaluated=True),
    output:
        probing=f"{VIEW}/probing.json",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        first=lambda w: RUNS.first_name(w.suite, w.run, w.seed),
        source=lambda w: RUNS.eval_folder(w.suite, w.run, int(w.seed)),
        view=lambda w, output: os.path.dirname(output.probing),
        names=["probing.json"],
    log:
        f"{RESULTS}/{{suite}}/logs/view.probing.{{run}}.seed{{seed}}.log",
    conda:
        "../envs/csebench.yaml"
    shell:
        VIEW_CMD


rule view_analysis:  # a per-run analysis (analysis.smk); one computed per suite (model_correlation's groups) has no view
    priority: 1
    input:
        lambda w: RUNS.files(w.suite, w.run, w.seed, [f"analysis/{w.analysis}.{w.ext}"], evaluated=True),
    output:
        result=paths.analysis_file(RESULTS, "{suite}", "{analysis}", "{run}", "{seed}", "{ext}"),
    wildcard_constraints:
        analysis=ANALYSES.viewed(),
        ext="json|md",
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        first=lambda w: RUNS.first_name(w.suite, w.run, w.seed),
        source=lambda w: f"{RUNS.eval_folder(w.suite, w.run, int(w.seed))}/analysis",
        view=lambda w, output: os.path.dirname(output.result),
        names=lambda w: [f"{w.analysis}.{w.ext}"],
    log:
        f"{RESULTS}/{{suite}}/logs/view.analysis.{{analysis}}.{{ext}}.{{run}}.seed{{seed}}.log",
    conda:
        "../envs/csebench.yaml"
    shell:
        VIEW_CMD

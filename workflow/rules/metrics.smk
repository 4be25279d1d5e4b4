# A suite's tidy metrics, results/{suite}/metrics.json (csebench.results.tidy): run -> seed -> STS-B dev,
# STS and transfer averages, plus the mean over seeds. These files are DVC's only metrics (dvc.yaml,
# docs/dvc.md), so `dvc metrics show/diff` and `dvc exp show` print one column per run and metric.
# Include after transfer.smk.

METRICS_HAS_TRANSFER = any(r.name == "eval_transfer" for r in workflow.rules)


rule suite_metrics:
    conda:
        CONDA_ENV
    input:
        lambda w: run_dirs(w.suite, "train.json"),
        lambda w: run_dirs(w.suite, "sts.json", evaluated=True),
        lambda w: run_dirs(w.suite, "transfer.json", evaluated=True) if METRICS_HAS_TRANSFER else [],
    output:
        metrics=kept_until_replaced(f"{RESULTS}/{{suite}}/metrics.json"),
    params:
        cfg=PARAMS_ARGS,  # params.yaml and its overrides, as the DAG was planned
        results=lambda w, output: results_of(output.metrics, w.suite),
    threads: 1  # reads JSON
    log:
        f"{RESULTS}/{{suite}}/logs/metrics.log",
    shell:
        "csebench suite-metrics {params.cfg:q} --suite {wildcards.suite:q} --results {params.results:q} --out {output.metrics:q} 2> {log:q}"

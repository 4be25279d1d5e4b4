# A suite's tidy metrics, results/metrics/{suite}.json (csebench.results.tidy): run -> seed -> STS-B dev,
# STS and transfer averages, plus the mean over seeds; and its STS-B dev curves, results/plots/{suite}/,
# one CSV per run and seed. These are DVC's metrics and plots (dvc.yaml, docs/dvc.md): one folder each,
# so `dvc metrics show` and `dvc plots show` list the suites that are built. Include after transfer.smk.

METRICS_HAS_TRANSFER = any(r.name == "eval_transfer" for r in workflow.rules)


rule suite_metrics:
    input:
        lambda w: run_dirs(w.suite, "train.json"),
        lambda w: run_dirs(w.suite, "dev_curve.csv"),
        lambda w: run_dirs(w.suite, "sts.json", evaluated=True),
        lambda w: run_dirs(w.suite, "transfer.json", evaluated=True) if METRICS_HAS_TRANSFER else [],
    output:
        metrics=metrics_file(RESULTS, "{suite}"),
        plots=directory(plots_dir(RESULTS, "{suite}")),
    threads: 1  # reads JSON
    log:
        f"{RESULTS}/{{suite}}/logs/metrics.log",
    shell:
        "csebench suite-metrics --suite {wildcards.suite} --results {RESULTS} --out {output.metrics}"
        " --plots {output.plots} 2> {log}"

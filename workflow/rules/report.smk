# Tables (STS, transfer) in Markdown/CSV/LaTeX with the published numbers and paired tests against
# SimCSE, the training-curves figure and results/{suite}/README.md indexing every table and figure.
# Optional inputs appear when their rules exist: transfer.smk must be included before this file
# (eval_transfer decides the transfer outputs at parse time); analysis figures and tables come from
# analysis.smk's `analysis_targets(suite)`, looked up lazily (any include order).

REPORT_HAS_TRANSFER = any(r.name == "eval_transfer" for r in workflow.rules)


def report_transfer(w):
    return run_dirs(w.suite, "transfer.json", evaluated=True) if REPORT_HAS_TRANSFER else []


def _analysis_outputs(suite, ext):
    fn = globals().get("analysis_targets")
    return [p for p in (fn(suite) if fn else []) if p.endswith(ext)]


def report_figures(w):
    return _analysis_outputs(w.suite, ".png")


def report_extra_tables(w):
    return _analysis_outputs(w.suite, ".md")


rule report:
    input:
        sts=lambda w: run_dirs(w.suite, "sts.json", evaluated=True),
        pairs=lambda w: run_dirs(w.suite, "sts_pairs.npz", evaluated=True),
        transfer=report_transfer,
        curves=lambda w: run_dirs(w.suite, "train_curve.csv") + run_dirs(w.suite, "dev_curve.csv"),
        figures=report_figures,
        extra_tables=report_extra_tables,
    output:
        md=f"{RESULTS}/{{suite}}/tables/sts.md",
        csv=f"{RESULTS}/{{suite}}/tables/sts.csv",
        tex=f"{RESULTS}/{{suite}}/tables/sts.tex",
        transfer=[f"{RESULTS}/{{suite}}/tables/transfer.{ext}" for ext in ("md", "csv", "tex")] if REPORT_HAS_TRANSFER else [],
        curves_png=f"{RESULTS}/{{suite}}/figures/training_curves.png",
        summary_png=f"{RESULTS}/{{suite}}/figures/sts_avg.png",
        readme=f"{RESULTS}/{{suite}}/README.md",
    params:
        transfer=lambda w, input: f"--transfer {' '.join(input.transfer)}" if input.transfer else "",
        figures=lambda w, input: f"--figures {' '.join(input.figures)}" if input.figures else "",
        extra_tables=lambda w, input: f"--extra-tables {' '.join(input.extra_tables)}" if input.extra_tables else "",
    log:
        f"{RESULTS}/{{suite}}/logs/report.log",
    shell:
        "csebench report --suite {wildcards.suite} --sts {input.sts} {params.transfer} --curves {input.curves}"
        " {params.figures} {params.extra_tables} --out-dir $(dirname {output.md}) --curves-png {output.curves_png}"
        " --summary-png {output.summary_png} --readme {output.readme} 2> {log}"

"""Everything that turns run outputs into tables, figures and pages (one reporting package).

    runs.py        a run's result files: one RunResult per file, the run path, curves, mean ± std
    metrics.py     metric names (sts:STS-B, stsb_dev, analysis:..., config:...) -> files and values
    registry.py    the items: every paper table and figure (resources/reproduction/*.yaml) and one
                   suite-level item per suite (its report)
    published.py   the published values beside ours, from the registry rows
    context.py     what a renderer gets (Context) and what a renderer is (Renderer)
    tables.py      number formatting and the one table model, written as Markdown or LaTeX
    plotting.py    matplotlib set-up, placeholders, curves (shared with csebench.analysis)
    analysis_plots.py  the analyses' figures and tables (csebench.analysis draws with them)
    plan.py        `csebench plan`: jobs, runs and GPU-hours of a set of suites, before anything runs
    combinations.py  the method-combination grid and its paired tests (the combinations study)
    render.py      render_item / input_files / item_outputs: imports an item's renderer by name
    pages.py       docs/reproduction.md, results/README.md, results/{suite}/README.md
    cli.py         `csebench results render|list|docs|front-page`, `plan`, `suite-metrics`
    renderers/     grid, figures, iscse, suite: one module per kind of table or figure

Adding a table or figure: docs/results.md. Nothing is imported here: `import csebench.results.x`
loads only what x needs.
"""

"""Renderers: one module per kind of table or figure, its ``RENDERER`` (inputs + render) imported by
csebench.results.render when an item names it (``renderer: <module name>``). A renderer reads the
package's shared modules (context, metrics, runs, published, tables, plotting, pages) and never
another renderer.

    grid                 tables in a paper's layout: rows x columns, ours beside published and Δ
    suite                the report of one suite: STS and transfer tables with significance, figures, README
    retrieved_sentences  IS-CSE Table 9 (retrieved sentences, qualitative)
    combinations         the combinations study: its table and its term x term matrix of gains
    ranking              a study's methods ranked by one metric with 95% t intervals (zoo Figure 1)
    figures              sweep, curves, seeds, analysis, model_analysis (several renderers, named in
                         render.RENDERERS), each figure with Markdown/CSV companions
"""

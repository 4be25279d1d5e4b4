"""Renderers: one module per kind of table or figure, each exposing Renderer objects (inputs + render)
that csebench.results.render imports by name when an item asks for them. A renderer reads the
package's shared modules (context, metrics, runs, published, tables, plotting, pages) and never
another renderer.

    grid      tables in a paper's layout: rows x columns, ours beside published and Δ
    figures   sweep, curves, seeds, analysis, model_analysis figures, each with Markdown/CSV companions
    iscse     IS-CSE Table 9 (retrieved sentences, qualitative)
    suite     the report of one suite: STS and transfer tables with significance, figures, README
"""

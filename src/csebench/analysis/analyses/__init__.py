"""The analyses, one module each, named as the analysis: each defines ``ANALYSIS`` (csebench.analysis.base).
Looked up by name through csebench.analysis.ANALYSES; nothing imports these modules directly."""

"""Where a run's files live: the one run-path function, read by the Snakemake rules (through
csebench.workflow) and by the result readers (csebench.results). A leaf module."""

from __future__ import annotations


def results_root(params: dict | None) -> str:
    return ((params or {}).get("paths") or {}).get("results", "results")


def key_dir(results: str, key: str, seed) -> str:
    """``{results}/runs/{key}/seed{seed}``: where one distinct run is trained and evaluated, whichever
    suites list it (csebench.workflow.Runs; Snakemake's RUN pattern passes wildcards)."""
    return f"{results}/runs/{key}/seed{seed}"


def run_dir(params: dict | None, suite: str, run: str, seed: int, results: str | None = None) -> str:
    """``{results}/{suite}/runs/{run}/seed{seed}``; ``results`` defaults to params' paths.results."""
    return f"{results or results_root(params)}/{suite}/runs/{run}/seed{seed}"

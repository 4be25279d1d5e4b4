"""The analyses' part of the Snakemake config, checked against their declarations when the Snakefile
loads (csebench.workflow.steps.check_snakemake_config) and read by the pipeline (csebench.analysis.pipeline):

    analyses: [align_uniform, topk_negatives]        the analyses a suite builds (those ``listed``)
    analysis:                                        their settings, by analysis (defaults: their Settings)
      topk_negatives: {model: "run:simcse", repeats: 10}

`csebench analyze --help` lists the analyses, `csebench analyze NAME --help` an analysis's settings.
"""

from __future__ import annotations

from csebench.core.errors import ConfigError
from csebench.analysis import ANALYSES

WHERE = "Snakemake config (config/*.yaml, --configfile, --config)"


def selected(config: dict) -> list[str]:
    """The config's `analyses:`, each one that a suite can build."""
    names = config.get("analyses") or []
    listed = [n for n, a in ANALYSES.items() if a.listed]
    if not isinstance(names, list):
        raise ConfigError(f"{WHERE}: analyses: expected a list of analysis names, got {names!r}")
    for i, name in enumerate(names):
        if name not in listed:
            built = " (built when a paper item reads it, not listed)" if name in ANALYSES else ""
            raise ConfigError(f"{WHERE}: analyses[{i}]: {name!r} is not one of {', '.join(listed)}{built}")
    return list(names)


def settings(config: dict) -> dict:
    """Every analysis's settings: the config's `analysis: {NAME: {...}}` over its defaults, checked."""
    given = config.get("analysis") or {}
    if not isinstance(given, dict):
        raise ConfigError(f"{WHERE}: analysis: expected a mapping of analysis names to their settings, got {given!r}")
    for name in given:
        if name not in ANALYSES:
            raise ConfigError(f"{WHERE}: analysis: {ANALYSES.unknown(name).replace('unknown analysis', 'unknown key')}; "
                              "settings go under their analysis, analysis: {NAME: {setting: value}} "
                              "(`csebench analyze NAME --help` lists them)")
    return {name: a.settings(given.get(name), f"{WHERE}: analysis.{name}") for name, a in ANALYSES.items()}


def check(config: dict) -> None:
    selected(config)
    settings(config)

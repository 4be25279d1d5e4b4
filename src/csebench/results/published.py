"""Published values: the numbers the papers print, beside ours in every table.

Read from ``resources/published.yaml`` (the main tables) and from the registry rows' ``published``
values (every paper item).
"""

from __future__ import annotations

import importlib.resources
import re

from ..schema import load_yaml_text


def load_published() -> dict:
    text = importlib.resources.files("csebench").joinpath("resources/published.yaml").read_text(encoding="utf-8")
    return load_yaml_text(text, "resources/published.yaml")


def published_for(kind: str, backbone: str, method: str, run: str | None = None, published: dict | None = None) -> list[dict]:
    """Published entries for a run (rules in the header of published.yaml).

    Backbone: equal, or the published one is a prefix (``bert-base-avg`` -> ``bert-base``). Then the
    entries whose ``runs`` patterns match the run name, else those whose method is the run name,
    else those without ``runs`` whose method is the run's method.
    """
    entries = [e for e in (published or load_published()).get(kind, [])
               if backbone == e["backbone"] or backbone.startswith(e["backbone"] + "-")]
    if run is not None:
        by_pattern = [e for e in entries if any(re.fullmatch(p, run) for p in e.get("runs", []))]
        by_name = [e for e in entries if e["method"] == run]
        if by_pattern or by_name:
            return by_pattern or by_name
    return [e for e in entries if e["method"] == method and not e.get("runs")]


def _source(entry: dict, papers: dict) -> str:
    p = papers.get(entry["paper"], {})
    short = {"is-cse": "IS-CSE", "gs-infonce-v2": "GS-InfoNCE v2", "gs-infonce-v1": "GS-InfoNCE v1",
             "sscl": "SSCL", "distillcse": "DistillCSE"}.get(entry["paper"], p.get("title", entry["paper"]))
    return f"{short} {entry['table']}"


def merge_published(entries: list[dict], papers: dict, columns: list[str]) -> list[dict]:
    """Entries with identical printed scores become one row naming all their sources."""
    merged: list[dict] = []
    for e in entries:
        vals = [e["scores"].get(c) for c in columns] + [e["scores"].get("Avg")]
        for m in merged:
            if m["values"] == vals:
                m["sources"].append(_source(e, papers))
                m["entries"].append(e)
                break
        else:
            merged.append({"values": vals, "sources": [_source(e, papers)], "entries": [e]})
    return merged


def pub_lookup(ref: dict, column: str, published: dict):
    """A value of resources/published.yaml: ref = {kind, paper, backbone, method}."""
    for e in published.get(ref["kind"], []):
        if all(e.get(k) == ref[k] for k in ("paper", "backbone", "method")):
            key = {"Avg.": "Avg", "SST": "SST2"}.get(column, column)
            return e["scores"].get(key)
    raise KeyError(f"published.yaml has no entry {ref}")


def row_values(row: dict, columns: list[dict], published: dict | None = None) -> list:
    """A registry row's published values, aligned with its block's columns (None where none)."""
    if row.get("published") is not None:
        return list(row["published"])
    if row.get("published_ref"):
        return [pub_lookup(row["published_ref"], c["name"], published or load_published()) for c in columns]
    return [None] * len(columns)

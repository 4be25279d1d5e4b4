"""Aggregate run outputs into the papers' tables (Markdown + CSV), published numbers beside ours."""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

import numpy as np
import yaml

from .evaluation.sts import TABLE_NAMES, TEST_TASKS
from .io import read_json, write_csv, write_text

STS_COLUMNS = [TABLE_NAMES[t] for t in TEST_TASKS] + ["Avg."]


def load_published() -> dict:
    text = importlib.resources.files("csebench").joinpath("resources/published.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def published_sts(backbone: str, method: str) -> list[dict]:
    return [e for e in load_published().get("sts", []) if e["backbone"] == backbone and e["method"] == method]


def collect_sts(result_files: list[str | os.PathLike]) -> list[dict]:
    """One record per run: identity from the neighbouring train.json, scores from sts.json."""
    records = []
    for f in result_files:
        f = Path(f)
        sts = read_json(f)
        train = read_json(f.parent / "train.json") if (f.parent / "train.json").is_file() else {}
        records.append({**sts.get("run_info", {}), **{k: train.get(k) for k in ("method", "backbone", "seed") if k in train},
                        "scores": sts["tasks"], "avg": sts.get("avg")})
    return records


def _fmt(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.2f}"


def sts_rows(records: list[dict]) -> list[dict]:
    """Group runs by (backbone, run name): mean +- std over seeds; attach the published row."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r.get("backbone_label") or r["backbone"], r.get("method_label") or r["method"], r["backbone"], r["method"], r.get("name", r["method"])), []).append(r)
    rows = []
    for (blabel, mlabel, backbone, method, name), runs in groups.items():
        vals = np.array([[r["scores"][t] for t in TEST_TASKS] + [r["avg"]] for r in runs], dtype=float)
        rows.append({"backbone": blabel, "method": mlabel, "run": name, "seeds": len(runs),
                     "mean": vals.mean(0).tolist(), "std": vals.std(0, ddof=1).tolist() if len(runs) > 1 else None,
                     "published": published_sts(backbone, method)})
    return rows


def write_sts_tables(records: list[dict], out_dir: str | os.PathLike) -> None:
    rows = sts_rows(records)
    out_dir = Path(out_dir)
    header = ["Backbone", "Method", "Run", "Seeds", *STS_COLUMNS]
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    csv_rows = []
    for row in rows:
        cells = [_fmt(m) + (f" ± {s:.2f}" if row["std"] else "") for m, s in zip(row["mean"], row["std"] or [0] * len(row["mean"]))]
        md.append("| " + " | ".join([row["backbone"], row["method"], row["run"], str(row["seeds"]), *cells]) + " |")
        csv_rows.append([row["backbone"], row["method"], row["run"], row["seeds"], "ours", *[round(v, 2) for v in row["mean"]]])
        for pub in row["published"]:
            s = pub["scores"]
            vals = [s[c] for c in STS_COLUMNS[:-1]] + [s["Avg"]]
            md.append("| " + " | ".join([row["backbone"], row["method"] + " (published)", pub["source"], "–", *[_fmt(v) for v in vals]]) + " |")
            csv_rows.append([row["backbone"], row["method"], row["run"], "", f"published: {pub['paper']}, {pub['source']}", *vals])
    text = "# STS results (Spearman x 100, \"all\" setting)\n\n" + "\n".join(md) + "\n"
    write_text(out_dir / "sts.md", text)
    write_csv(out_dir / "sts.csv", ["backbone", "method", "run", "seeds", "source", *STS_COLUMNS], csv_rows)

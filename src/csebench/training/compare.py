"""A run of your own ends with the question a researcher asks first: did training help? The trained model and the
untrained backbone it started from, scored on the 7 STS tasks with the same pooler, the same sets and the same
precision; the lines printed last by `csebench train --backbone ... --method ... --corpus ...`, and the JSON beside
the run (sts_vs_untrained.json).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from csebench.study.resolve import RunConfig

log = logging.getLogger(__name__)

COMPARISON_FILE = "sts_vs_untrained.json"
SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}


def compare_with_untrained(cfg: RunConfig, out: str | os.PathLike, senteval: str | os.PathLike,
                           max_pairs: int | None = None, precision: str = "fp32") -> dict:
    """STS of the run's trained model (``out``/model, its evaluation pooler) and of its untrained backbone with that
    pooler (and template, for a template method), written atomically to ``out``/sts_vs_untrained.json."""
    import torch

    from csebench.core.io import write_json
    from csebench.evaluation.embeddings import encode_with, model_encoder
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts
    from csebench.model.encoder import read_encoder_meta, resolve_pooler
    from csebench.training.untrained_run import untrained_encoder

    model = str(Path(out) / "model")
    pooler, origin = resolve_pooler(model)  # the saved run's evaluation pooler
    root = senteval_root(senteval)
    batch = cfg.training.eval_batch_size
    log.info("closing STS comparison: %s and the untrained %s, both pooled with %s (%s)%s", model, cfg.backbone_name,
             pooler, origin, f", about {max_pairs} pairs a task" if max_pairs else "")
    trained = evaluate_sts(model_encoder(model, None, batch, precision), root, max_pairs=max_pairs)  # its own: `pooler`
    base = untrained_encoder(cfg)
    base.pooler = pooler
    base.set_prompt(read_encoder_meta(model).get("prompt"))  # a template method's representation on both sides
    base.to("cuda" if torch.cuda.is_available() else "cpu")
    untrained = evaluate_sts(encode_with(base, batch, precision), root, max_pairs=max_pairs)
    result = {"run": cfg.run_id, "model": model, "backbone": cfg.backbone_name, "backbone_model": cfg.backbone.model,
              "pooler": pooler, "pooler_origin": cfg.pooler_origin, "precision": precision,
              "protocol": trained.get("protocol", "full"), "max_sts_pairs": max_pairs,
              "trained": {"tasks": trained["tasks"], "avg": trained.get("avg")},
              "untrained": {"tasks": untrained["tasks"], "avg": untrained.get("avg")}}
    write_json(Path(out) / COMPARISON_FILE, result)
    return result


def comparison_lines(result: dict) -> list[str]:
    """The comparison as a small table: the untrained backbone, the trained model, the difference; a header naming
    the pooler and protocol, a footer naming the run folder."""
    tasks = list(result["trained"]["tasks"])
    names = [SHORT.get(t, t) for t in tasks] + ["avg"]
    width = max(len(result["run"]), len("untrained " + result["backbone"]), len("difference"))

    def row(label: str, values: list, signed: bool = False) -> str:
        form = "{:>+8.2f}" if signed else "{:>8.2f}"
        cells = "".join(form.format(v) if isinstance(v, (int, float)) else f"{'-':>8}" for v in values)
        return f"{label:<{width}}{cells}"

    def scores(side: str) -> list:
        return [result[side]["tasks"][t] for t in tasks] + [result[side]["avg"]]

    before, after = scores("untrained"), scores("trained")
    diff = [a - b if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None for a, b in zip(after, before)]
    protocol = ("the full protocol" if result["protocol"] == "full"
                else f"capped: about {result['max_sts_pairs']} pairs a task, a quick look, not comparable to published numbers")
    return [f"STS, Spearman x100, both pooled with {result['pooler']} ({protocol}, {result['precision']}):",
            f"{'':<{width}}" + "".join(f"{n:>8}" for n in names),
            row("untrained " + result["backbone"], before),
            row(result["run"], after),
            row("difference", diff, signed=True),
            f"{Path(result['model']).parent}: model/, train.json, {COMPARISON_FILE}"]

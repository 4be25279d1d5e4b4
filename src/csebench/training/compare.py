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
PAIRS_FILE = "sts_vs_untrained_pairs.npz"  # the trained model's cosine per STS pair: `csebench compare`'s paired bootstrap
SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}


def compare_with_untrained(cfg: RunConfig, out: str | os.PathLike, senteval: str | os.PathLike,
                           max_pairs: int | None = None, precision: str = "fp32",
                           cache_dir: str | os.PathLike | None = None) -> dict:
    """STS of the run's trained model (``out``/model, its evaluation pooler) and of its untrained backbone with that
    pooler (and template, for a template method), written atomically to ``out``/sts_vs_untrained.json (and the trained
    model's cosine of each pair to ``out``/sts_vs_untrained_pairs.npz: `csebench compare`'s paired test). The untrained
    backbone's scores are kept in ``cache_dir`` (the tokenized corpus's cache): the next run on that backbone, pooler,
    sets and precision reads them instead of encoding the STS sentences again (on a CPU, minutes)."""
    from csebench.core.io import dumps_json, write_json
    from csebench.core.provenance import collect
    from csebench.evaluation.embeddings import model_encoder
    from csebench.evaluation.locate import senteval_root
    from csebench.evaluation.sts import evaluate_sts, save_pairs
    from csebench.model.encoder import read_encoder_meta, resolve_pooler

    model = str(Path(out) / "model")
    pooler, origin = resolve_pooler(model)  # the saved run's evaluation pooler
    root = senteval_root(senteval)
    batch = cfg.training.eval_batch_size
    log.info("closing STS comparison: %s and the untrained %s, both pooled with %s (%s)%s", model, cfg.backbone_name,
             pooler, origin, f", about {max_pairs} pairs a task" if max_pairs else "")
    trained = evaluate_sts(model_encoder(model, None, batch, precision), root, max_pairs=max_pairs,  # its own: `pooler`
                           keep_pairs=True)
    untrained = _untrained_scores(cfg, pooler, read_encoder_meta(model).get("prompt"), root, max_pairs, precision,
                                  batch, cache_dir)
    result = {"run": cfg.run_id, "model": model, "backbone": cfg.backbone_name, "backbone_model": cfg.backbone.model,
              "pooler": pooler, "pooler_origin": cfg.pooler_origin, "precision": precision,
              "protocol": trained.get("protocol", "full"), "max_sts_pairs": max_pairs, "n_pairs": trained.get("n_pairs"),
              "trained": {"tasks": trained["tasks"], "avg": trained.get("avg")},
              "untrained": untrained, "provenance": collect(precision=precision)}
    save_pairs(Path(out) / PAIRS_FILE, trained.pop("pairs"))
    write_json(Path(out) / COMPARISON_FILE, result)
    return result


def _untrained_scores(cfg: RunConfig, pooler: str, prompt, root, max_pairs: int | None, precision: str, batch: int,
                      cache_dir: str | os.PathLike | None) -> dict:
    """The untrained backbone's STS (tasks, avg) with ``pooler`` and ``prompt``, from the cache where it was scored
    alike before: the same model by content (the hash of every file of its folder or hub snapshot: weights replaced
    at the same path are another model; for a random one or a projection head, the same seed), layers, pooler,
    template, STS files, subset, precision and batch size, and the same csebench."""
    import json

    import torch

    from csebench.core.io import dumps_json, write_json
    from csebench.evaluation.embeddings import encode_with
    from csebench.evaluation.sts import evaluate_sts
    from csebench.study.params import digest
    from csebench._version import __version__
    from csebench.model.encoder import model_content
    from csebench.training.untrained_run import untrained_encoder

    t = cfg.training
    random = cfg.backbone.model == "random"
    seeded = random or t.projection_dim is not None
    tokenizer = cfg.backbone.tokenizer or ("packaged:minilm" if random else None)  # else the model folder's own

    def content() -> dict | None:  # the backbone's files and a tokenizer of its own, by content hash
        model = None if random else model_content(cfg.backbone.model)
        words = model_content(tokenizer, weights=False) if tokenizer else {}
        if words is None or (model is None and not random):
            return None
        return {"model": digest(model) if model else None, "tokenizer": digest(words) if words else None}

    what = {"model": cfg.backbone.model, "tokenizer": cfg.backbone.tokenizer, "random_config": cfg.backbone.random_config,
            "seed": cfg.seed if seeded else None, "projection": [t.projection_dim, t.projection_head], "layers": t.num_layers,
            "pooler": pooler, "prompt": prompt, "sts": str(Path(root).resolve()), "max_pairs": max_pairs,
            "precision": precision, "batch": batch, "csebench": __version__, "content": content()}
    if t.prefix:  # training.prefix before every sentence on both sides (none: the cache keys as before)
        what["prefix"] = t.prefix
    # content unknown (a hub id not in the local cache): scored now, kept under the content it was loaded with
    cached = Path(cache_dir) / f"untrained-sts-{digest(what)}.json" if cache_dir and what["content"] else None
    if cached is not None and cached.is_file():
        try:
            found = json.loads(cached.read_text(encoding="utf-8"))
            if found.get("what") == json.loads(dumps_json(what)):  # as written (tuples as lists)
                log.info("untrained %s: its STS scores from %s", cfg.backbone_name, cached)
                return found["scores"]
        except (ValueError, KeyError, AttributeError):  # a damaged cache file: scored again and written anew
            pass
    base = untrained_encoder(cfg)
    base.pooler = pooler
    base.set_prompt(prompt)  # a template method's representation on both sides
    base.to("cuda" if torch.cuda.is_available() else "cpu")
    res = evaluate_sts(encode_with(base, batch, precision), root, max_pairs=max_pairs)
    scores = {"tasks": res["tasks"], "avg": res.get("avg")}
    what["content"] = what["content"] or content()
    if cache_dir and what["content"]:
        write_json(Path(cache_dir) / f"untrained-sts-{digest(what)}.json", {"what": what, "scores": scores})
    return scores


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

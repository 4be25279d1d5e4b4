"""DistillCSE Table 5: the STS of an ensemble (the mean of its members' L2-normalized embeddings, read
from their embeddings tables), written as an sts.json that every reader of one reads."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from csebench.core.commands import option
from csebench.analysis.base import Analysis, Settings, setting


@dataclass
class EnsembleStsSettings(Settings):
    seed: int = setting(0, "the seed recorded in run_info")


def _backbone_of(model_dir) -> str | None:
    cfg = os.path.join(str(model_dir), "training_config.json")
    if not os.path.isfile(cfg):
        return None
    with open(cfg, encoding="utf-8") as fh:
        return json.load(fh).get("backbone_name")


def run(ctx) -> dict:
    from csebench.evaluation.embeddings import EmbeddingTable, model_encoder, table_encode
    from csebench.core.errors import DataError
    from csebench.evaluation.sts import evaluate_sts, save_pairs
    from csebench.analysis import distill

    def member(path):  # a sentence its table lacks is encoded by the model the table records
        t = EmbeddingTable(path)
        m = t.meta.get("model")

        def fallback():
            if not m or not os.path.exists(m):
                raise DataError(f"{path} lacks sentences of the STS tasks and its model {m!r} is not available")
            return model_encoder(m, t.meta.get("pooler"), ctx.batch_size, t.meta.get("precision") or "auto")

        return table_encode(t, m if m and os.path.isdir(m) else None, fallback)

    members = [member(p) for p in ctx.embeddings]
    ctx.tables += [e.table for e in members]
    res = evaluate_sts(distill.ensemble_encode(members), ctx.senteval_root, keep_pairs=bool(ctx.pairs_out))
    if ctx.pairs_out:
        save_pairs(ctx.pairs_out, res.pop("pairs"))
    backbones = {_backbone_of(e.table.meta.get("model", "")) for e in members}
    res.update({"analysis": "ensemble_sts", "eval_seconds": round(time.perf_counter() - ctx.t0, 2),
                "members": [e.table.meta.get("model") for e in members],
                "pooler": [e.pooler for e in members],
                "encoding": {"embeddings": list(ctx.embeddings), "ensemble": "mean of L2-normalized member embeddings",
                             "missing_from_table": sum(e.missing for e in members)},
                "run_info": {"name": ctx.label or "ensemble", "method": "ensemble", "method_label": "Ensemble of teacher comp.",
                             "backbone": backbones.pop() if len(backbones) == 1 else None, "seed": ctx.settings.seed}})
    return res


def pipeline(job) -> None:  # every seed of the run, as the suite evaluates it
    job.embeddings_of([(r, s) for r, s in job.runs(evaluated=True) if r == job.run])
    job.senteval()
    job.option("label", f"{job.run} ensemble")


ANALYSIS = Analysis(__name__, "DistillCSE Table 5: STS of an ensemble of models' embeddings", reads="run", run=run,
                    Settings=EnsembleStsSettings, needs=("embeddings", "senteval"),
                    options=(option("--pairs-out", default=None, help="per-pair cosines .npz (as eval-sts --pairs-out)"),),
                    pipeline=pipeline, listed=False, threads=1)

"""Evaluation-only runs (a suite run with ``train: false``): the untrained backbone is the run's model.

The papers print rows for pretrained encoders scored without any training: SSCL's BERT (cls.),
BERT (avg.) and BERT-large (cls.) rows, "BERT base (first-last avg.)", "Avg. BERT embeddings" and
the like. Such a run goes through the same DAG as a trained one: its train job writes ``model/``
(the backbone as loaded, with the run's pooler; with ``training.projection_dim`` an untrained head
initialised from the run's seed, as a freshly built encoder has it), the STS-B and SICK-R dev
scores of that model, empty training curves and a ``train.json`` that says ``"trained": false``.
The embed, eval-sts, eval-transfer, probing and analysis jobs then read ``model/`` as for any run.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path

from csebench.core import provenance
from csebench.study.resolve import RunConfig
from csebench.model.encoder import MODEL_FILES, autocast_name, build_encoder, model_files
from csebench.core.io import dumps_json, replace_dir, staged_outputs, write_csv, write_json

log = logging.getLogger(__name__)


def untrained_encoder(cfg: RunConfig):
    """The run's encoder as its training starts: the backbone as loaded (a random backbone drawn from the run's
    seed), the run's pooler, layers and, with training.projection_dim, a head initialised from the run's seed."""
    from csebench.training.trainer import set_seed

    t = cfg.training
    set_seed(cfg.seed)  # the projection head (if any) is drawn from the run's seed
    return build_encoder(cfg.backbone, seed=cfg.seed, projection_dim=t.projection_dim, num_layers=t.num_layers,
                         projection_head=t.projection_head, what=f"backbones.{cfg.backbone_name}.model",
                         prefix=t.prefix)


def write_untrained_run(cfg: RunConfig, senteval_dir: str | os.PathLike, out_dir: str | os.PathLike,
                        dev_file: str | os.PathLike | None = None) -> dict:
    """Write an evaluation-only run's outputs; train.json last (it marks the run complete)."""
    from csebench.training.trainer import DevEvaluator, pick_device

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t = cfg.training
    encoder = untrained_encoder(cfg)
    device = pick_device()
    encoder.to(device)
    dev = DevEvaluator.for_run(cfg, senteval_dir, dev_file)
    stsb = dev(encoder)
    summary = {"run": cfg.run_id, "suite": cfg.suite, "method": cfg.method, "backbone": cfg.backbone_name,
               "seed": cfg.seed, "trained": False, "steps": 0, "best_step": 0, **dev.scores(stsb, dev.sickr(encoder))}
    if t.dev_max_pairs is not None:  # the CPU demo's subset, as in a trained run's train.json
        summary.update(dev.capped())
    # what scored it (no training: no corpus, no training precision)
    summary["provenance"] = provenance.collect(device, 1, t.eval_precision, autocast_name(t.eval_precision, device))
    # as the trainer writes its outputs: the model folder complete first, then the set renamed into place
    # together (a finished run there before is replaced only now), train.json last
    partial = out / "model.partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        encoder.save(partial, trained=False)  # the backbone's own pooler, not the untrained head
        (partial / "training_config.json").write_text(dumps_json(cfg.record(), default=str) + "\n")
        summary[MODEL_FILES] = model_files(partial)  # what loading the run's model checks, what push uploads
        with staged_outputs(marker=out / "train.json"):
            write_csv(out / "train_curve.csv", ["step"], [])  # no training: no loss to draw
            write_csv(out / "dev_curve.csv", ["step", dev.column], [[0, round(stsb, 4) if math.isfinite(stsb) else ""]])
            replace_dir(partial, out / "model")
            write_json(out / "train.json", summary)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    log.info("%s: evaluation-only run (train: false), untrained %s, STS-B dev %.2f", cfg.run_id, cfg.backbone_name, stsb)
    return summary

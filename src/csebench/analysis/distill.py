"""DistillCSE's student analyses: Table 8 (model correlation), Table 9 (distillation loss on
training vs test batches) and Table 5's "Ensemble of Teacher Comp." (STS of averaged embeddings).

Like core.py, every function takes encode / embed functions and data and returns a JSON dict.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from csebench.evaluation.sts import PairSet, spearman100, sts_pair_similarities
from csebench.objectives.base import StepContext
from csebench.objectives.distillation import Distillation, DistillationSettings, off_diagonal

log = logging.getLogger(__name__)

EncodeFn = Callable[[list[str]], torch.Tensor]
GROUPS = {"self_teacher": "S.T.", "other_teachers": "O.T.", "other_students": "O.S."}


# ------------------------------------------------------------------ DistillCSE Table 8

def model_correlation(student: EncodeFn, groups: dict[str, Sequence[tuple[str, EncodeFn]]], dev: PairSet) -> dict:
    """Spearman x100 between the student's pair cosines on ``dev`` and each other model's, averaged
    per group (``groups``: self_teacher / other_teachers / other_students -> [(label, encode)]),
    plus every model's own Spearman with the gold scores."""
    ref = sts_pair_similarities(student, dev)
    out = {"analysis": "model_correlation", "n_pairs": len(dev.scores), "student_stsb": spearman100(ref, dev.scores),
           "groups": {}, "models_stsb": {}}
    for key, members in groups.items():
        per = {}
        for label, encode in members:
            sims = sts_pair_similarities(encode, dev)
            per[label] = spearman100(ref, sims)
            out["models_stsb"][label] = spearman100(sims, dev.scores)
        out["groups"][key] = {"label": GROUPS.get(key, key), "mean": float(np.mean(list(per.values()))) if per else None,
                              "models": per}
    return out


# ------------------------------------------------------------------ DistillCSE Table 9

class _BatchBank:
    """TeacherBank's in-memory form for one batch: rows = batch positions, the M teachers' normalized
    embeddings concatenated and scaled by 1/sqrt(M), so ``logits`` = cosines averaged over teachers (Eq. 7)."""

    def __init__(self, teacher_embs: Sequence[torch.Tensor]):
        self.num_teachers = len(teacher_embs)
        scale = 1.0 / math.sqrt(self.num_teachers)
        self.matrix = torch.cat([F.normalize(t.float(), dim=-1) * scale for t in teacher_embs], dim=1)

    def logits(self, rows: torch.Tensor, cols: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
        m = self.matrix.to(device if device is not None else rows.device)
        return m[rows.to(m.device)] @ m[cols.to(m.device)].T


def measurement_settings(settings: DistillationSettings | None = None, **override) -> DistillationSettings:
    """The student's distillation settings for measuring: no shuffling, weight 1 (the bare loss)."""
    s = settings or DistillationSettings(teachers="measurement")
    override = {k: v for k, v in override.items() if v is not None}
    return dataclasses.replace(s, shuffle="none", rank_range=None, weight=1.0, **override)


def batch_distill_loss(student: torch.Tensor, teachers: Sequence[torch.Tensor], settings: DistillationSettings) -> tuple[float, float]:
    """(loss, teacher entropy) of one batch: the objective's own term (Distillation.extra_loss) on
    student embeddings (B, D) and each teacher's embeddings (B, D_m) of the same sentences. The
    entropy H(q_t) (reduced like the loss) gives KL(q_t || p_s) = loss - entropy."""
    s = measurement_settings(settings)
    bank = _BatchBank(teachers)
    term = Distillation(s, hidden_size=student.shape[1], num_layers=0, bank=bank)
    idx = torch.arange(student.shape[0])
    # no dropout at measurement: view 2 = view 1, so anchors and cross_view give the same matrix
    ctx = StepContext(z1=student, z2=student, temperature=1.0, step=0, total_steps=1, indices=idx, all_indices=idx)
    with torch.no_grad():
        loss = float(term.extra_loss(ctx))
        q = torch.softmax(off_diagonal(bank.logits(idx, idx), idx) / s.teacher_temperature, dim=1)
        ent = -(q * torch.log(q.clamp_min(1e-30))).sum(1)
    return loss, float(ent.mean() if s.reduction == "mean" else ent.sum())


def sample_batches(n: int, batch_size: int, n_batches: int, seed: int, stream: int) -> list[np.ndarray]:
    """``n_batches`` index batches of ``batch_size`` distinct items out of n (seeded per stream)."""
    rng = np.random.default_rng([seed, stream])
    size = min(batch_size, n)
    return [rng.choice(n, size=size, replace=False) for _ in range(n_batches)]


def distillation_loss(student: EncodeFn, teachers: Sequence[EncodeFn], splits: dict[str, Sequence[str]],
                      settings: DistillationSettings | None = None, batch_size: int = 64, n_batches: int = 20,
                      seed: int = 0) -> dict:
    """DistillCSE Table 9: the student's distillation loss on random batches of each split
    (e.g. train = corpus rows, test = STS-B test sentences). ``student`` / ``teachers`` embed one
    batch of sentences (the student's training representation, the teachers' cached kind)."""
    s = measurement_settings(settings)
    out = {"analysis": "distill_loss", "batch_size": batch_size, "n_batches": n_batches, "seed": seed,
           "n_teachers": len(teachers),
           "settings": {k: getattr(s, k) for k in ("student_temperature", "teacher_temperature", "reduction", "similarity", "shuffle")},
           "splits": {}}
    for stream, (name, pool) in enumerate(splits.items()):
        pool = list(pool)
        if len(pool) < 2:
            raise ValueError(f"split {name}: needs at least two sentences")
        if len(pool) < batch_size:
            log.warning("split %s has only %d sentences: batches of %d", name, len(pool), len(pool))
        losses, ents = [], []
        for idx in sample_batches(len(pool), batch_size, n_batches, seed, stream):
            sents = [pool[i] for i in idx]
            loss, ent = batch_distill_loss(student(sents), [t(sents) for t in teachers], s)
            losses.append(loss)
            ents.append(ent)
        losses, ents = np.array(losses), np.array(ents)
        out["splits"][name] = {"n_sentences": len(pool), "mean": float(losses.mean()), "std": float(losses.std()),
                               "kl_mean": float((losses - ents).mean()), "teacher_entropy_mean": float(ents.mean()),
                               "per_batch": [float(v) for v in losses]}
    if {"train", "test"} <= set(out["splits"]):
        out["gap"] = out["splits"]["test"]["mean"] - out["splits"]["train"]["mean"]
    return out


def batch_embedder(enc, max_seq_length: int, train_head: bool) -> EncodeFn:
    """Embed one batch as training does (truncated to max_seq_length, padded to the batch), eval
    mode (no dropout); ``train_head``: apply the MLP head as training's view 1 does."""
    from csebench.training.data import tokenize_corpus

    def embed(sentences: list[str]) -> torch.Tensor:
        tokens = tokenize_corpus(list(sentences), enc.tokenizer, max_seq_length)
        ids, mask = (torch.from_numpy(a) for a in tokens.batch(np.arange(len(sentences)), enc.tokenizer.pad_token_id or 0))
        device = next(enc.parameters()).device
        was = enc.training
        enc.eval()
        try:
            with torch.no_grad():
                return enc(ids.to(device), mask.to(device), train_head=train_head).float().cpu()
        finally:
            enc.train(was)

    return embed


def attach_training_head(enc, model_dir: str) -> bool:
    """Give a saved cls-pooler model its training head back; True if it has one (model.encoder.attach_saved_head)."""
    from csebench.model.encoder import attach_saved_head

    return attach_saved_head(enc, model_dir)


def run_settings(model_dir: str) -> tuple[DistillationSettings | None, int | None]:
    """The distillation settings and max_seq_length a saved run trained with (None where unknown)."""
    import json

    cfg = Path(model_dir) / "training_config.json"
    if not cfg.is_file():
        return None, None
    d = json.loads(cfg.read_text(encoding="utf-8"))
    dist = (d.get("objectives") or {}).get("distillation")
    names = {f.name for f in dataclasses.fields(DistillationSettings)}
    settings = DistillationSettings(**{k: v for k, v in dist.items() if k in names}) if dist else None
    return settings, (d.get("training") or {}).get("max_seq_length")


# ------------------------------------------------------------------ DistillCSE Table 5

def ensemble_encode(members: Sequence[EncodeFn]) -> EncodeFn:
    """Sentence embedding = mean of the members' L2-normalized embeddings."""
    if not members:
        raise ValueError("an ensemble needs at least one member")
    return lambda sentences: torch.stack([F.normalize(m(sentences).double(), dim=-1) for m in members]).mean(0)

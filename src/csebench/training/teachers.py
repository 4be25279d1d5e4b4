"""A frozen teacher's corpus embeddings for DistillCSE, computed once and written in the teacher run's own
folder (results/runs/{key}/seed{seed}/teacher/embeddings.npy and .json): the corpus tokenized as training
tokenizes it, pooled with the teacher's evaluation pooler. What the files hold, and how a student reads
them: csebench.model.teacher_cache.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import torch

from csebench.core import provenance
from csebench.training.data import load_tokenized_corpus
from csebench.model.tokens import tokenizer_fingerprint
from csebench.core.corpus import read_corpus
from csebench.core.errors import DataError
from csebench.core.io import atomic_path, write_json
from csebench.model.teacher_cache import FORMAT, corpus_sha256, meta_path

log = logging.getLogger(__name__)



def _teacher_run_info(model_dir: Path) -> dict | None:
    cfg = model_dir / "training_config.json"
    if not cfg.is_file():
        return None
    d = json.loads(cfg.read_text(encoding="utf-8"))
    return {"suite": d.get("suite"), "name": d.get("name"), "seed": d.get("seed"), "key": d.get("key"),
            "max_seq_length": (d.get("training") or {}).get("max_seq_length")}


@torch.no_grad()
def embed_corpus(encoder, corpus: str | os.PathLike, max_seq_length: int, batch_size: int | None = None,
                 cache_dir: str | os.PathLike | None = None, device: str | torch.device | None = None,
                 train_head: bool = False) -> np.ndarray:
    """(rows, dim) float32 L2-normalized eval-mode embeddings of the corpus, in corpus order,
    tokenized exactly as training tokenizes it (``train_head``: through the encoder's training head)."""
    from csebench.model.encoder import default_encode_batch_size

    device = torch.device(device) if device is not None else next(encoder.parameters()).device
    batch_size = batch_size or default_encode_batch_size(device)
    tokens = load_tokenized_corpus(corpus, encoder.tokenizer, max_seq_length, cache_dir, encoder.prefix)
    order = np.argsort(tokens.lengths(), kind="stable")
    pad = encoder.tokenizer.pad_token_id or 0
    out = np.empty((len(tokens), encoder.hidden_size), dtype=np.float32)
    was_training = encoder.training
    encoder.eval()
    try:
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            ids, mask = (torch.from_numpy(a).to(device) for a in tokens.batch(idx, pad))
            emb = encoder(ids, mask, train_head=train_head).float()
            out[idx] = torch.nn.functional.normalize(emb, dim=-1).cpu().numpy()
    finally:
        encoder.train(was_training)
    return out


def build_teacher_cache(model_dir: str | os.PathLike, corpus: str | os.PathLike, out: str | os.PathLike,
                        max_seq_length: int | None = None, batch_size: int | None = None,
                        cache_dir: str | os.PathLike | None = None, device: str | None = None,
                        what: str = "--model", representation: str = "eval") -> dict:
    """Embed ``corpus`` with the model ``model_dir``, whatever `eval-sts --model` takes (a saved run's model/ or
    its run folder, any model folder, packaged:minilm, a hub id; ``what`` names the setting for its errors); write
    out (.npy) and its .json metadata, which names the teacher as a student's key does
    (teacherspec.teacher_model_identity). ``representation``: ``eval``, the model's evaluation embedding, or
    ``training``, its pooler and the training head it saved (a SimCSE run's MLP over [CLS], what a SimCSE checkpoint
    converted by simcse_to_huggingface.py gives as pooler_output: DCLR's complementary model as released; a run
    without a head: its pooled output)."""
    from csebench.model.encoder import check_max_seq_length, load_encoder
    from csebench.study.fetch import looks_like_path
    from csebench.study.teacherspec import teacher_model_folder, teacher_model_identity

    model = teacher_model_folder(str(model_dir))
    if not Path(model).expanduser().exists() and looks_like_path(model):
        raise DataError(f"teacher model folder not found: {model} (train the teacher run first)")
    model_dir = Path(model).expanduser()
    run = _teacher_run_info(model_dir) if model_dir.is_dir() else None
    if max_seq_length is None:
        max_seq_length = (run or {}).get("max_seq_length") or 32
    read_corpus(corpus)  # clear error for a missing / empty / non-UTF-8 corpus
    encoder = load_encoder(model, what=what)
    template = encoder.prompt_length()  # a PromptBERT model encodes every row inside its template
    check_max_seq_length(encoder, int(max_seq_length), "--max-seq-length",
                         added=lambda n: {"prompt": (template, "the model's template")} if template else {})
    head = False
    if representation == "training":
        from csebench.model.encoder import attach_saved_head

        head = attach_saved_head(encoder, model_dir)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    encoder.to(device)
    emb = embed_corpus(encoder, corpus, int(max_seq_length), batch_size, cache_dir, device, train_head=head)
    meta = {
        "format": FORMAT, "model": model, "teacher": teacher_model_identity(model), "teacher_run": run,
        "pooler": encoder.pooler, **({"prefix": encoder.prefix} if encoder.prefix else {}),
        "representation": representation, "training_head": bool(head),
        "rows": int(emb.shape[0]), "dim": int(emb.shape[1]), "dtype": "float32", "normalized": True,
        "max_seq_length": int(max_seq_length), "tokenizer": tokenizer_fingerprint(encoder.tokenizer),
        "corpus": str(corpus), "corpus_sha256": corpus_sha256(corpus),
        "provenance": provenance.collect(device, precision="fp32", autocast="fp32"),  # embed_corpus: no autocast
    }
    save_teacher_cache(out, emb, meta)
    log.info("teacher cache %s: %d x %d from %s", out, emb.shape[0], emb.shape[1], model)
    return meta


def model_teacher_caches(cfg, given: list[str], corpus: str | os.PathLike, cache_dir: str | os.PathLike | None,
                         device: str | None = None) -> list[str]:
    """The teacher caches of a run, one per teacher component in the order its term averages them: a run teacher's
    from ``given`` (--teacher-cache, in their order, as the workflow passes them); a model teacher's
    (``teachers: {model: M}``, `train --teacher M`) a given cache whose metadata names that model, else the one
    this builds (once: later runs read it) in ``cache_dir``/teachers, on the run's corpus at its max length."""
    from csebench.study.params import digest
    from csebench.study.teacherspec import (teacher_components, teacher_model_identity, teacher_representation,
                                            teacher_term)

    found = teacher_term(cfg.objectives) if cfg.train else None
    components = teacher_components(found[1], cfg.seed) if found else []
    models = {name: teacher_model_identity(name) for kind, name, _ in components if kind == "model"}
    if not models:
        return list(given)
    from csebench.model.teacher_cache import load_meta

    theirs: dict[str, str] = {}  # a given cache of a model teacher, by the teacher it names
    runs = []
    for path in given:
        ident = load_meta(path).get("teacher")
        if ident in models.values() and ident not in theirs:
            theirs[ident] = path
        else:
            runs.append(path)
    out, runs = [], iter(runs)
    for kind, name, _ in components:
        if kind == "run":
            nxt = next(runs, None)
            if nxt is not None:
                out.append(nxt)
            continue
        ident = models[name]
        if ident in theirs:
            out.append(theirs[ident])
            continue
        max_len, rep = cfg.training.max_seq_length, teacher_representation(cfg.objectives)
        parts = [ident, corpus_sha256(corpus), max_len] + ([rep] if rep != "eval" else [])
        path = Path(cache_dir or "data/cache") / "teachers" / f"{digest(parts, 16)}.npy"
        if not (path.is_file() and meta_path(path).is_file()):
            log.info("teacher %s: its corpus embeddings -> %s", name, path)
            build_teacher_cache(name, corpus, path, max_seq_length=max_len, cache_dir=cache_dir, device=device,
                                what=f"objectives.{found[0]}.teachers", representation=rep)
        out.append(str(path))
    return out + list(runs)  # caches no component takes: the bank says how many it expected


def save_teacher_cache(out: str | os.PathLike, emb: np.ndarray, meta: dict) -> None:
    """Write the metadata, then the embeddings (the .npy appears last and complete)."""
    write_json(meta_path(out), meta)
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(emb, dtype=np.float32))

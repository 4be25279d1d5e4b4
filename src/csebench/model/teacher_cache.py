"""Frozen-teacher corpus embeddings for DistillCSE (objectives/distillation.py): their format and the
bank that reads them in training (TeacherBank); csebench.training.teachers computes and writes them.

A frozen teacher is deterministic (eval mode: no dropout), so its embeddings of the training
corpus are computed once and reused by every student distilling from it:

    results/runs/{key}/seed{seed}/teacher/embeddings.npy   (corpus rows, dim) float32, L2-normalized
    results/runs/{key}/seed{seed}/teacher/embeddings.json  metadata checked by the student

in the teacher run's own folder (docs/runs.md): one cache per teacher run and seed, whichever suites
and students use it.

Tokenization is the training one (csebench.training.data.load_tokenized_corpus: same truncation to the
training max length) and the pooler is the teacher's evaluation pooler (the raw CLS vector for
the unsup-SimCSE ``cls`` setup, as the released DistillCSE code uses ``last_hidden_state[:, 0]``).

The student looks rows up by corpus index. The mean over M teachers of their cosines (Eq. 7) is
one dot product of the concatenated embeddings, each scaled by 1/sqrt(M):
    mean_m <e_i^m, e_j^m> = < [e_i^1..e_i^M]/sqrt(M), [e_j^1..e_j^M]/sqrt(M) >
so M teachers cost one (B x M*D) @ (M*D x B) product per step. The concatenation is built once
at load (in memory up to IN_MEMORY_LIMIT bytes; beyond that rows are gathered from the
memory-mapped files each step).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import numpy as np
import torch

from csebench.core import provenance
from csebench.model.tokens import tokenizer_fingerprint
from csebench.core.errors import ConfigError, DataError

log = logging.getLogger(__name__)

FORMAT = 1
IN_MEMORY_LIMIT = 8 * 1024**3  # bytes of the concatenated float32 matrix kept in RAM


def meta_path(npy: str | os.PathLike) -> Path:
    return Path(npy).with_suffix(".json")


def load_meta(path: str | os.PathLike) -> dict:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"teacher cache not found: {p} (build it with `csebench teacher-cache --model "
                        f"RUN_DIR/model --corpus CORPUS --out {p}`, or let Snakemake's teacher_cache rule do it)")
    m = meta_path(p)
    if not m.is_file():
        raise DataError(f"teacher cache {p} has no metadata file {m}; rebuild it with `csebench teacher-cache`")
    meta = json.loads(m.read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise DataError(f"teacher cache {p}: format {meta.get('format')} is not {FORMAT}; rebuild it")
    return meta


class TeacherBank:
    """The teachers' cached embeddings, concatenated and scaled by 1/sqrt(M): ``logits(rows, cols)``
    is the (len(rows), len(cols)) matrix of cosines averaged over the M teachers (Eq. 7)."""

    def __init__(self, paths: list[str | os.PathLike], corpus_size: int | None = None,
                 corpus_path: str | os.PathLike | None = None, tokenizer=None, max_seq_length: int | None = None,
                 expected_runs: list[tuple[str, str, int]] | None = None, in_memory_limit: int = IN_MEMORY_LIMIT,
                 representation: str | None = None):
        if not paths:
            raise ConfigError("DistillCSE needs at least one teacher cache")
        self.paths = [Path(p) for p in paths]
        self.metas = [load_meta(p) for p in self.paths]
        if expected_runs is not None and len(expected_runs) != len(self.paths):
            named = ", ".join(e if isinstance(e, str) else f"{e[1]}/seed{e[2]}" for e in expected_runs)
            raise ConfigError(
                f"objectives.distillation names {len(expected_runs)} teacher(s) "
                f"({named}) but {len(self.paths)} teacher cache(s) were given")
        corpus_hash = corpus_sha256(corpus_path) if corpus_path is not None else None
        tok = tokenizer_fingerprint(tokenizer) if tokenizer is not None else None
        for k, (p, meta) in enumerate(zip(self.paths, self.metas)):
            if corpus_hash is not None and meta["corpus_sha256"] != corpus_hash:
                raise DataError(f"teacher cache {p} was computed on corpus {meta['corpus']}, not on the student's corpus "
                                f"{corpus_path} (contents differ); rebuild it on the student's corpus")
            if corpus_size is not None and meta["rows"] != corpus_size:
                raise DataError(f"teacher cache {p} has {meta['rows']} rows but the student's corpus has {corpus_size} sentences")
            if tok is not None and meta["tokenizer"] != tok:
                raise DataError(f"teacher cache {p}: the teacher ({meta['model']}) uses a different tokenizer than the "
                                f"student (fingerprint {meta['tokenizer']} vs {tok}); teacher and student must share "
                                f"one tokenizer so both see the same sentences")
            if representation is not None and meta.get("representation", "eval") != representation:
                raise DataError(f"teacher cache {p} holds the teacher's {meta.get('representation', 'eval')} representation, "
                                f"the student reads its {representation} one; build it with `csebench teacher-cache "
                                f"--representation {representation}`")
            if max_seq_length is not None and meta["max_seq_length"] != max_seq_length:
                raise DataError(f"teacher cache {p} was tokenized with max length {meta['max_seq_length']}, the student "
                                f"trains with {max_seq_length}; rebuild it with --max-seq-length {max_seq_length}")
            if expected_runs is not None and isinstance(expected_runs[k], str):  # a model teacher, by its identity
                if meta.get("teacher") != expected_runs[k]:
                    raise DataError(f"teacher cache {p} is of {meta.get('teacher') or meta.get('model')}, expected "
                                    f"teacher {k + 1} to be the model {expected_runs[k]}")
                continue
            run = meta.get("teacher_run")
            if expected_runs is not None and run and run.get("name") is not None:
                suite, name, seed, *key = expected_runs[k]
                # by key where both have one: a run listed by several suites is trained once, under the
                # names of the first suite that lists it (docs/runs.md); older caches: by names
                ours, theirs = ((key[0], seed), (run.get("key"), run.get("seed"))) if key and run.get("key") else \
                               ((suite, name, seed), (run.get("suite"), run.get("name"), run.get("seed")))
                if ours != theirs:
                    raise DataError(f"teacher cache {p} belongs to run {run.get('suite')}/{run.get('name')}/seed{run.get('seed')}"
                                    + (f" (key {run['key']})" if key and run.get("key") else "")
                                    + f", expected teacher {k + 1} to be {suite}/{name}/seed{seed}"
                                    + (f" (key {key[0]})" if key and run.get("key") else ""))
        rows = {m["rows"] for m in self.metas}
        if len(rows) != 1:
            raise DataError(f"teacher caches disagree on the corpus size: {sorted(rows)} rows")
        self.rows = rows.pop()
        self.num_teachers = len(self.paths)
        self.dims = [m["dim"] for m in self.metas]
        self.dim = sum(self.dims)
        self.scale = 1.0 / math.sqrt(self.num_teachers)
        self._arrays = [np.load(p, mmap_mode="r") for p in self.paths]
        for p, a, meta in zip(self.paths, self._arrays, self.metas):
            if a.shape != (meta["rows"], meta["dim"]) or a.dtype != np.float32:
                raise DataError(f"teacher cache {p}: array {a.shape} {a.dtype} does not match its metadata "
                                f"({meta['rows']} x {meta['dim']} float32); rebuild it")
        self.matrix: torch.Tensor | None = None
        if self.rows * self.dim * 4 <= in_memory_limit:
            cat = np.empty((self.rows, self.dim), dtype=np.float32)
            col = 0
            for a in self._arrays:
                np.multiply(a, np.float32(self.scale), out=cat[:, col : col + a.shape[1]])
                col += a.shape[1]
            self.matrix = torch.from_numpy(cat)
            self._arrays = []
        else:
            log.info("teacher bank of %.1f GB exceeds the in-memory limit: gathering rows from memory maps",
                     self.rows * self.dim * 4 / 1024**3)

    def lookup(self, idx: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
        """(n, M*D) scaled concatenated teacher embeddings of corpus rows ``idx`` (host indices, as
        the trainer passes them), on ``device`` (default: idx's). The rows are gathered on the host
        into pinned memory and copied without blocking: indices sent to the GPU and read back
        would be a host wait mid-step, and a copy from pageable memory blocks the host. (Torch's
        pinned-memory cache does not hand a block out again before its copy has run.)"""
        device = torch.device(device) if device is not None else idx.device
        idx = idx.detach().to("cpu", torch.long)
        pinned = device.type == "cuda"
        out = torch.empty((idx.shape[0], self.dim), dtype=torch.float32, pin_memory=pinned)
        if self.matrix is not None:
            torch.index_select(self.matrix, 0, idx, out=out)
        else:
            rows, col, buf = idx.numpy(), 0, out.numpy()
            for a in self._arrays:
                np.multiply(a[rows], np.float32(self.scale), out=buf[:, col : col + a.shape[1]])
                col += a.shape[1]
        return out.to(device, non_blocking=pinned)

    def logits(self, rows: torch.Tensor, cols: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
        """Teacher cosines averaged over the M components: (len(rows), len(cols)), on ``device``."""
        from csebench.model.encoder import no_autocast

        a = self.lookup(rows, device)
        b = a if cols is rows else self.lookup(cols, device)
        with no_autocast(a.device):  # float32 cosines even inside the trainer's autocast
            return a @ b.T

def corpus_sha256(path: str | os.PathLike) -> str:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"corpus file not found: {p}")
    return provenance.file_sha256(p)

"""DistillCSE (Xu et al., "DistillCSE: Distilled Contrastive Learning for Sentence Embeddings").

Self-training by knowledge distillation from frozen teachers trained with unsup-SimCSE:

    l        = l_cl + lambda * l_distill                                                 (Eq. 3)
    l_distill = - sum_{j != i} q(t_ij) log p(s_ij)                                       (Eq. 2)
    p(s_ij)  = exp(s_ij / tau_s) / sum_{k != i} exp(s_ik / tau_s)
    q(t_ij)  = exp(t_ij / tau_t) / sum_{k != i} exp(t_ik / tau_t)

s_ij / t_ij are the student's / teacher's cosine similarities of the in-batch sentence pair
(x_i, x_j), j != i. Defaults: tau_s = 0.02, tau_t = 0.01, lambda = 1 (paper, Sec. 4.3 / Table 7;
the released scripts use 0.025 / 0.0125, a setting). Following the released code the student
side compares the anchors' training embeddings with each other (view 1 x view 1, MLP head on),
``similarity: anchors``; ``similarity: cross_view`` uses view 1 x view 2 instead (the InfoNCE
matrix without its positive column). Eq. 2 sums over the anchors i while Eq. 1's l_cl is one
anchor's loss; as in the released code (and SimCSE's batch-mean l_cl) the per-anchor cross
entropies are averaged (``reduction: mean``); ``reduction: sum`` is the literal outer sum.

Group-P shuffling (Eq. 5, 6): per row, sort the teacher logits, take G(t_ij) = sum of the
probabilities exp(t_ik) / sum_l exp(t_il) over all t_ik >= t_ij (no temperature, as in Eq. 5 and
the released code), cut G into the intervals (0, p], (p, 2p], ..., (.., 1] and shuffle the
teacher logits within each interval. ``shuffle: rank_range`` shuffles a fixed rank range of the
sorted logits instead (Table 3: ranks 1-12, 13-24, ...). Both are vectorized: one sort by
group id + a uniform random key (the released code builds per-row permutations in Python loops).
On CPU, Group-P sorts only the values (numpy's SIMD row sort; torch's CPU sort is ~50x slower
at 512 x 511), finds each column's interval from the interval boundaries and argsorts
interval + key once: exactly the generic result (group_p_groups + shuffle_within_groups).

Teacher components (Eq. 7): t_ij = mean over M teachers of t^m_ij. A frozen teacher is
deterministic, so its normalized embeddings of the training corpus are computed once
(``csebench teacher-cache``, csebench.training.teachers) and looked up by corpus index here; the mean of
M cosines is one dot product of the concatenated embeddings, each scaled by 1/sqrt(M).

Iterative self-training (Eq. 4): a teacher is any run of the same suite, e.g. round 2 names the
round-1 DistillCSE run. Settings name teachers as ``teachers: {run: simcse, seeds: [1, 2]}``
(a list of such mappings mixes runs; ``seeds`` omitted = the student's own seed).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.core.schema import _suggest
from csebench.core import distributed
from csebench.study.teacherspec import parse_teachers, teacher_components, teacher_runs  # noqa: F401  (re-exported: the term's settings)
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix

log = logging.getLogger(__name__)

SHUFFLES = ("none", "group_p", "rank_range")
SIMILARITIES = ("anchors", "cross_view")
REDUCTIONS = ("mean", "sum")


@dataclass
class DistillationSettings:
    teachers: Any = None  # {run: NAME, seeds: [..]} or a list of them (runs of the same suite)
    weight: float = 1.0  # lambda, Eq. 3
    student_temperature: float = 0.02  # tau_s (released code: 0.025)
    teacher_temperature: float = 0.01  # tau_t (released code: 0.0125)
    shuffle: str = "group_p"  # none (vanilla distillation) | group_p (Eq. 5, 6) | rank_range (Table 3)
    p: float = 0.1  # Group-P probability interval
    rank_range: Any = None  # [first, last] 1-based inclusive ranks of the sorted teacher logits (rank_range)
    group_temperature: float = 1.0  # temperature of Eq. 5's probabilities (paper and code: none = 1)
    similarity: str = "anchors"  # anchors: view1 x view1 (released code) | cross_view: view1 x view2
    reduction: str = "mean"  # mean over anchors (released code) | sum (Eq. 2's literal outer sum)

    def validate(self, where: str) -> None:
        parse_teachers(self.teachers, where)
        for name in ("student_temperature", "teacher_temperature", "group_temperature"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{where}.{name} must be > 0, got {getattr(self, name)}")
        if self.weight < 0:
            raise ConfigError(f"{where}.weight must be >= 0, got {self.weight}")
        for name, valid in (("shuffle", SHUFFLES), ("similarity", SIMILARITIES), ("reduction", REDUCTIONS)):
            if getattr(self, name) not in valid:
                raise ConfigError(f"{where}.{name}: unknown '{getattr(self, name)}'{_suggest(str(getattr(self, name)), list(valid))}")
        if not 0 < self.p <= 1:
            raise ConfigError(f"{where}.p must be in (0, 1], got {self.p}")
        if self.shuffle == "rank_range":
            r = self.rank_range
            if (not isinstance(r, list) or len(r) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)
                    or not 1 <= r[0] <= r[1]):
                raise ConfigError(f"{where}.rank_range: expected [first, last] with 1 <= first <= last "
                                  f"(1-based ranks of the sorted teacher logits, e.g. [1, 12]), got {r!r}")
        elif self.rank_range is not None:
            raise ConfigError(f"{where}.rank_range is only used with shuffle: rank_range (shuffle is '{self.shuffle}')")

    def check_with_training(self, where: str, training) -> None:
        if self.shuffle == "rank_range" and self.rank_range[0] > training.batch_size - 1:
            raise ConfigError(f"{where}.rank_range starts at rank {self.rank_range[0]} but a batch of "
                              f"{training.batch_size} has only {training.batch_size - 1} other sentences")


# ----------------------------------------------------------------------------- shuffling


def _numpy_sortable(t: torch.Tensor) -> bool:
    """CPU rows numpy can sort: its SIMD row sorts are 5-50x faster than torch's CPU sort."""
    return t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) and not t.requires_grad


def _argsort_rows(keys: torch.Tensor) -> torch.Tensor:
    """Ascending argsort of each row (int64); rows with distinct keys have exactly one answer."""
    if _numpy_sortable(keys):
        return torch.from_numpy(np.argsort(keys.numpy(), axis=1))
    return keys.argsort(dim=1)


def group_p_groups(logits: torch.Tensor, p: float, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 5 per row of ``logits`` (R, K): (order, groups) where ``order`` sorts each row
    descending and ``groups[r, k]`` is the Group-P interval of the k-th largest logit:
    g = ceil(G / p) - 1 for G in (g p, (g+1) p]. Tied logits share G (the sum is over t_ik >= t_ij)."""
    x = logits.detach()
    order = _argsort_rows(-x) if _numpy_sortable(x) else x.argsort(dim=1, descending=True)
    sorted_vals = x.gather(1, order).float()  # rounding to float32 keeps the order
    cum = torch.softmax(sorted_vals / temperature, dim=1).cumsum(dim=1)
    k = sorted_vals.shape[1]
    pos = torch.arange(k, device=logits.device).expand_as(sorted_vals)
    run_end = torch.ones_like(sorted_vals, dtype=torch.bool)
    run_end[:, :-1] = sorted_vals[:, 1:] != sorted_vals[:, :-1]
    end_pos = torch.where(run_end, pos, torch.full_like(pos, k))
    last_tie = end_pos.flip(1).cummin(dim=1).values.flip(1)  # last position of each run of tied logits
    g_cum = cum.gather(1, last_tie)
    n_groups = max(1, math.ceil(1.0 / p - 1e-9))
    groups = (torch.ceil(g_cum / p) - 1).clamp_(0, n_groups - 1).long()
    return order, groups


def rank_range_groups(logits: torch.Tensor, first: int, last: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Table 3: ranks first..last (1-based, inclusive; clipped to the row length) form one group,
    every other rank is its own group (not moved)."""
    x = logits.detach()
    order = _argsort_rows(-x) if _numpy_sortable(x) else x.argsort(dim=1, descending=True)
    k = logits.shape[1]
    pos = torch.arange(k, device=logits.device)
    lo, hi = first - 1, min(last, k) - 1
    key = torch.where((pos >= lo) & (pos <= hi), torch.full_like(pos, lo), pos)
    return order, key.unsqueeze(0).expand(logits.shape[0], k)


def shuffle_within_groups(logits: torch.Tensor, order: torch.Tensor, groups: torch.Tensor,
                          generator: torch.Generator | None = None, keys: torch.Tensor | None = None) -> torch.Tensor:
    """Permute each row's values uniformly at random within groups (Eq. 6).

    ``order`` sorts each row descending, ``groups`` (nondecreasing along the sorted positions)
    labels each sorted position. Every column j has a random key ``keys[r, j]`` (uniform in
    [0, 1), float64, the shape of ``logits``; drawn from ``generator`` when not given): the
    columns of a group, taken in the order of their keys, receive the group's values from the
    largest down. i.i.d. keys make that a uniformly random within-group permutation; one sort of
    group + key per row, no Python loop over rows. The result depends only on the values and the
    keys, not on how a sort orders tied logits."""
    sorted_vals = logits.gather(1, order)
    if keys is None:
        keys = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float64)
    # group ids are small integers, keys uniform in [0, 1): one sort by (group, key) of the sorted positions
    by_key = _argsort_rows(groups.double() + keys.gather(1, order))
    return torch.empty_like(logits).scatter_(1, order.gather(1, by_key), sorted_vals)


# Group-P with at most this many intervals (p >= 1/32) finds every column's interval by comparing it
# with the interval boundaries (one pass per boundary) instead of sorting positions.
_MAX_BOUNDARY_PASSES = 32


def _group_p_shuffle_cpu(logits: torch.Tensor, p: float, temperature: float, n_groups: int,
                         generator: torch.Generator | None, keys: torch.Tensor | None) -> torch.Tensor:
    """``shuffle_within_groups(logits, *group_p_groups(logits, p, temperature), generator, keys)``
    with one value sort and one (group, key) argsort per row instead of two argsorts + gathers.

    The interval of a logit x depends on x only: with u_k = ceil(cum_k / p) - 1 at the sorted
    positions k and n_g = #{k : u_k <= g} (u is nondecreasing), x is in an interval <= g iff every
    copy of x sits before position n_g, i.e. x > c_g = (n_g-th largest logit) (or n_g = K). So a
    column's interval is #{g < n_groups - 1 : x <= c_g}: the tie rule of Eq. 5 (G sums over
    t_ik >= t_ij) without knowing where each column sorts to."""
    rows, k = logits.shape
    vals = logits.detach()
    sorted_np = np.sort(-vals.numpy(), axis=1)  # ascending of -x: numpy's SIMD sort of values only
    np.negative(sorted_np, out=sorted_np)
    sorted_vals = torch.from_numpy(sorted_np)  # each row descending, the original values
    x = vals.float()
    sorted32 = sorted_vals.float()
    cum = torch.softmax(sorted32 / temperature if temperature != 1.0 else sorted32, dim=1).cumsum_(dim=1)
    u = cum.div_(p).ceil_().sub_(1).clamp_(0, n_groups - 1)  # interval of each sorted position, before ties
    bounds = torch.arange(n_groups - 1, dtype=u.dtype).expand(rows, n_groups - 1).contiguous()
    n = torch.searchsorted(u, bounds, right=True)  # (R, n_groups - 1): n_g
    c = sorted32.gather(1, n.clamp(max=k - 1)).masked_fill_(n >= k, -math.inf).numpy()  # c_g (-inf: n_g = K)
    x_np = x.numpy()
    group = np.zeros((rows, k), dtype=np.uint8)
    le = np.empty((rows, k), dtype=bool)
    for g in range(n_groups - 1):  # <= 31 vectorized passes over the batch
        np.less_equal(x_np, c[:, g : g + 1], out=le)
        group += le
    if keys is None:
        key = torch.rand((rows, k), generator=generator, dtype=torch.float64)
        key.add_(torch.from_numpy(group))
    else:
        key = torch.from_numpy(group).double().add_(keys)
    by_key = _argsort_rows(key)  # columns by (interval, key)
    return torch.empty_like(logits).scatter_(1, by_key, sorted_vals)


def group_p_shuffle(logits: torch.Tensor, p: float, generator: torch.Generator | None = None,
                    temperature: float = 1.0, keys: torch.Tensor | None = None) -> torch.Tensor:
    """Group-P shuffling (Eq. 5, 6) of each row of ``logits`` (R, K); see shuffle_within_groups for
    ``generator`` / ``keys``. The CPU path gives exactly the generic path's result."""
    n_groups = max(1, math.ceil(1.0 / p - 1e-9))
    if (logits.dim() == 2 and logits.numel() > 0 and n_groups <= _MAX_BOUNDARY_PASSES
            and _numpy_sortable(logits) and (keys is None or keys.device.type == "cpu")):
        return _group_p_shuffle_cpu(logits, p, temperature, n_groups, generator, keys)
    order, groups = group_p_groups(logits, p, temperature)
    return shuffle_within_groups(logits, order, groups, generator, keys)


def rank_range_shuffle(logits: torch.Tensor, first: int, last: int,
                       generator: torch.Generator | None = None, keys: torch.Tensor | None = None) -> torch.Tensor:
    order, groups = rank_range_groups(logits, first, last)
    return shuffle_within_groups(logits, order, groups, generator, keys)


def off_diagonal(m: torch.Tensor, excluded: torch.Tensor) -> torch.Tensor:
    """(R, C) -> (R, C-1): drop column excluded[r] from row r.

    A gather with computed column indices: boolean-mask indexing (m[keep]) has a data-dependent
    shape, which on CUDA is a device-to-host sync (nonzero) twice per DistillCSE step."""
    rows, cols = m.shape
    j = torch.arange(cols - 1, device=m.device).expand(rows, cols - 1)
    j = j + (j >= excluded.to(m.device).reshape(rows, 1)).long()
    return m.gather(1, j)


def distill_loss(student: torch.Tensor, teacher: torch.Tensor, tau_s: float, tau_t: float,
                 reduction: str = "mean") -> torch.Tensor:
    """Eq. 2 on (R, K) rows of other-sentence similarities: cross entropy H(q_t, p_s) per row."""
    q = torch.softmax(teacher.float() / tau_t, dim=1)
    log_p = F.log_softmax(student.float() / tau_s, dim=1)
    per_row = -(q * log_p).sum(dim=1)
    return per_row.mean() if reduction == "mean" else per_row.sum()


# ----------------------------------------------------------------------------- the term


def open_teacher_bank(key: str, teachers, seed: int, run_config=None, corpus_size: int | None = None,
                      teacher_cache: list[str] | None = None, corpus_path: str | None = None, tokenizer=None,
                      representation: str = "eval"):
    """The frozen teachers' cached corpus embeddings (csebench.model.teacher_cache.TeacherBank) for the term
    ``objectives.<key>`` (DistillCSE's teachers, DCLR's complementary model, RankCSE's teachers),
    checked against the runs its ``teachers`` setting names and the ``representation`` it reads (eval: the
    teachers' evaluation embeddings; training: their pooler and saved training head)."""
    from csebench.model.teacher_cache import TeacherBank

    if not teacher_cache:
        expected = teacher_runs({"teachers": teachers}, seed)
        raise ConfigError(
            f"objectives.{key} needs the cached embeddings of its teacher(s) "
            f"{', '.join(f'{r}/seed{s}' for r, s in expected)}: pass `--teacher-cache PATH` once per teacher "
            "(Snakemake's train rule does), built by `csebench teacher-cache`")
    expected_runs = None
    if run_config is not None:  # a run teacher by its suite, name, seed and key; a model teacher by its identity
        from csebench.study.resolve import MODEL_TEACHER

        expected_runs = [(run_config.suite, r, s, run_config.teacher_keys.get(r)) if kind == "run" else
                         run_config.teacher_keys.get(MODEL_TEACHER + r) or r
                         for kind, r, s in teacher_components({"teachers": teachers}, seed)]
    return TeacherBank(
        teacher_cache, corpus_size=corpus_size, corpus_path=corpus_path, tokenizer=tokenizer,
        max_seq_length=run_config.training.max_seq_length if run_config is not None else None,
        expected_runs=expected_runs, representation=representation)


class Distillation(ObjectiveTerm):
    key = "distillation"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "distillcse"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = DistillationSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("run_config", "corpus_size", "teacher_cache", "device",
                                                  "corpus_path", "tokenizer")

    def __init__(self, settings: DistillationSettings, hidden_size: int, num_layers: int, run_config=None,
                 corpus_size: int | None = None, teacher_cache: list[str] | None = None, device=None,
                 corpus_path: str | None = None, tokenizer=None, bank=None):
        super().__init__(settings, hidden_size, num_layers)
        self.seed = int(run_config.seed) if run_config is not None else 0
        if bank is None:
            bank = open_teacher_bank(self.key, settings.teachers, self.seed, run_config, corpus_size, teacher_cache,
                                     corpus_path, tokenizer)
        self.bank = bank
        self._last: dict[str, float] = {}

    def generator(self, ctx: StepContext, device: torch.device) -> torch.Generator:
        """A fresh generator per (run seed, step): resumed runs shuffle exactly as uninterrupted ones."""
        state = np.random.SeedSequence([self.seed, ctx.step, 0xD157]).generate_state(1, dtype=np.uint64)[0]
        return torch.Generator(device=device).manual_seed(int(state) & ((1 << 63) - 1))

    def shuffle_keys(self, ctx: StepContext, rows: int, width: int, device: torch.device) -> torch.Tensor:
        """Random keys for this rank's rows, drawn for the whole global batch (world_size * rows) so
        that under DDP every rank shuffles its rows exactly as one process shuffles the same rows."""
        full = torch.rand((rows * ctx.world_size, width), generator=self.generator(ctx, device), device=device,
                          dtype=torch.float64)
        return full[ctx.positive_offset : ctx.positive_offset + rows]

    def teacher_logits(self, rows: torch.Tensor, cols: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
        return self.bank.logits(rows, cols, device)

    def shuffle(self, teacher: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        s = self.settings
        if s.shuffle == "group_p":
            return group_p_shuffle(teacher, s.p, temperature=s.group_temperature, keys=keys)
        if s.shuffle == "rank_range":
            return rank_range_shuffle(teacher, s.rank_range[0], s.rank_range[1], keys=keys)
        return teacher

    def extra_loss(self, ctx: StepContext) -> torch.Tensor:
        s = self.settings
        if s.similarity == "anchors" and distributed.is_distributed():
            # all ranks' anchors under DDP (as one process on the whole batch); the gradient each
            # rank's loss sends to another rank's anchors is summed back to them (distributed.py)
            other, cols, excluded = distributed.gather_with_grad(ctx.z1)[0], ctx.all_indices, ctx.labels
        elif s.similarity == "anchors":
            other, cols, excluded = ctx.z1, ctx.indices, torch.arange(ctx.z1.shape[0], device=ctx.z1.device)
        else:
            other, cols, excluded = ctx.z2, ctx.all_indices, ctx.labels
        if other.shape[0] < 2:
            raise ConfigError("objectives.distillation needs at least two sentences per batch")
        student = off_diagonal(cosine_matrix(ctx.z1, other), excluded)
        with torch.no_grad():
            teacher = self.teacher_logits(ctx.indices, cols, student.device)  # host indices, rows copied over
            teacher = off_diagonal(teacher, excluded)
            if s.shuffle != "none":
                teacher = self.shuffle(teacher, self.shuffle_keys(ctx, teacher.shape[0], teacher.shape[1], teacher.device))
        loss = distill_loss(student, teacher, s.student_temperature, s.teacher_temperature, s.reduction)
        self._last = {"teachers": float(self.bank.num_teachers)}
        return s.weight * loss

    def logs(self) -> dict[str, float]:
        return dict(self._last)

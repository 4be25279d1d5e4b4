"""IS-CSE (He et al., "Instance Smoothed Contrastive Learning for Unsupervised Sentence Embedding", AAAI 2023).

A FIFO buffer B (L rows) holds normalized, stop-gradient positives h+ of previous steps (Eq. 3).
Each positive h+ of this step is smoothed with its k nearest buffer entries by cosine (kNN):

    K = [h+; h_1^r .. h_k^r]  (rows normalized),   h^{s+} = softmax(h+ K^T / beta) K      (Eq. 4)

or, in the K-means variant, with the centre c+ of its cluster among k' clusters of the buffer:

    h^{s+} = gamma h+ + (1 - gamma) c+                                                  (Eq. 5)

h+ keeps its gradient; retrieved rows and centres are constants. The smoothing loss is InfoNCE
with the smoothed positives of the whole batch as candidates (Eq. 6), weighted by alpha (Eq. 7):

    L_smoothing = -log e^{sim(h_i, h_i^{s+})/tau} / sum_j e^{sim(h_i, h_j^{s+})/tau}
    L = L_instance + alpha L_smoothing

alpha is constant (0.1 for base models) or follows Eq. 8 (large models, 0.005 -> 0.05):

    alpha = min{cos(pi T_i / T_max) (alpha_start - alpha_end), 0} + alpha_end

i.e. it rises from alpha_start at step 0 to alpha_end at half of training and stays there.

Paper vs released code (dll-wu/IS-CSE):
  * order: the paper retrieves from the buffer of previous steps, then pushes the batch (Eq. 3);
    the code pushes first and drops the top hit (the query itself). ``push_before_retrieval``.
  * warm-up: the paper is silent on a partly empty buffer; the code skips the smoothing loss
    until the buffer is full. We do the same by default (``wait_for_full_buffer``); with it off,
    retrieval uses the filled rows once there are at least k (K-means: k') of them.
  * K-means (Eq. 5, ``retrieval: kmeans``) is not in the released code, nor is gamma published (default 0.5
    is ours). We run spherical k-means (cosine) on the buffer each step, started from k' evenly spaced
    buffer rows so it is deterministic and identical on every rank.
  * The released code's other grouping, ``pddp`` (``find_neighbors_and_aggregation(mode='pddp')``; its
    training forward calls mode 'knn' only), is selectable as ``retrieval: pddp``: the set is the batch's
    positives h+ (with their gradient) followed by the newest L - B buffer rows of previous steps (the
    released buffer after its push, the batch's copies replaced by the differentiable rows); the rows are
    centred once, on the whole set, and split by Principal Direction Divisive Partitioning into at most
    ``clusters`` groups (released: buffer_size // 16 = 1024 // 16 = 64, Table 3's number): the largest group is
    split by the sign of its top singular vector over its rows (<= 0 | > 0), the groups re-sorted by size
    (stable, largest first); each h+ attends to the members of its own group,
        h^{s+} = softmax_{j in group(h+)}(h+ . b_j / beta) b_j                                  (released, beta 2)
    an attention over the group rather than Eq. 5's gamma-mix with a centre, and the in-batch members keep
    their gradient (released: ``undetached_buf``). As released, a group is not re-centred before it is split,
    so once the largest group's singular vector has one sign the split is a no-op and the released loop repeats
    it to its end: the tree stops there (here, the loop ends): on random buffers of 1024 rows it stops at
    5-9 groups, not 64. The sign of a singular vector is arbitrary (LAPACK's there); ours has its largest entry
    positive, which decides only rows at exactly 0 and the order of two halves of equal size. Which grouping
    printed Table 3's "K-means" column is not known: the paper describes Eq. 5, the released code holds only
    this one (with Table 3's 64), which its own training forward does not call. The tree is built on the host
    in float64 (one copy of the set per step; its shapes depend on the data).
Under DDP the gathered positives (ctx.z2) are pushed, so every rank holds the same buffer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix

RETRIEVALS = ("knn", "kmeans", "pddp")
ALPHA_SCHEDULES = ("constant", "cosine")


@dataclass
class SmoothingSettings:
    buffer_size: int = 1024  # L
    neighbors: int = 16  # k (kNN)
    beta: float = 2.0  # softmax temperature of Eq. 4
    alpha: float = 0.1  # weight of L_smoothing when alpha_schedule is constant
    alpha_schedule: str = "constant"  # constant | cosine (Eq. 8)
    alpha_start: float = 0.005  # Eq. 8
    alpha_end: float = 0.05  # Eq. 8
    retrieval: str = "knn"  # knn (paper's choice) | kmeans (Eq. 5) | pddp (the released code's group mode)
    clusters: int = 64  # k' for kmeans; pddp: the most groups (released: buffer_size // 16)
    gamma: float = 0.5  # Eq. 5 (value not published)
    kmeans_iterations: int = 10  # Lloyd iterations per step
    push_before_retrieval: bool = False  # true: released code's order (push, then skip the top hit)
    wait_for_full_buffer: bool = True  # smoothing loss only once the buffer holds L entries (released code)

    def validate(self, where: str) -> None:
        if self.buffer_size < 1:
            raise ConfigError(f"{where}.buffer_size must be >= 1, got {self.buffer_size}")
        if self.retrieval not in RETRIEVALS:
            raise ConfigError(f"{where}.retrieval: unknown '{self.retrieval}' (valid: {', '.join(RETRIEVALS)})")
        if self.neighbors < 1:
            raise ConfigError(f"{where}.neighbors must be >= 1, got {self.neighbors}")
        if self.retrieval == "knn" and self.neighbors >= self.buffer_size:
            raise ConfigError(f"{where}.neighbors ({self.neighbors}) must be < buffer_size ({self.buffer_size})")
        if self.beta <= 0:
            raise ConfigError(f"{where}.beta must be > 0, got {self.beta}")
        for name in ("alpha", "alpha_start", "alpha_end"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{where}.{name} must be >= 0, got {getattr(self, name)}")
        if self.alpha_schedule not in ALPHA_SCHEDULES:
            raise ConfigError(f"{where}.alpha_schedule: unknown '{self.alpha_schedule}' (valid: {', '.join(ALPHA_SCHEDULES)})")
        if self.retrieval in ("kmeans", "pddp") and not 1 <= self.clusters <= self.buffer_size:
            raise ConfigError(f"{where}.clusters must be in [1, buffer_size={self.buffer_size}], got {self.clusters}")
        if self.retrieval == "kmeans":
            if not 0 <= self.gamma <= 1:
                raise ConfigError(f"{where}.gamma must be in [0, 1], got {self.gamma}")
            if self.kmeans_iterations < 1:
                raise ConfigError(f"{where}.kmeans_iterations must be >= 1, got {self.kmeans_iterations}")

    def check_with_training(self, where: str, training) -> None:
        # push-first must find each query's own copy in the buffer to drop it
        if self.push_before_retrieval and self.buffer_size < training.batch_size:
            raise ConfigError(f"{where}.buffer_size ({self.buffer_size}) must be >= training.batch_size "
                              f"({training.batch_size}) with push_before_retrieval")


def cosine_alpha(progress: float, start: float, end: float) -> float:
    """Eq. 8 with progress = T_i / T_max."""
    return min(math.cos(math.pi * progress) * (start - end), 0.0) + end


def spherical_kmeans(x: torch.Tensor, k: int, iterations: int) -> torch.Tensor:
    """k unit-norm centres of the unit-norm rows of x (cosine k-means), vectorized over rows.
    Starts from k evenly spaced rows; a cluster that empties keeps its previous centre."""
    n = x.shape[0]
    start = torch.linspace(0, n - 1, k, device=x.device).round().long()
    centres = x[start].clone()
    for _ in range(iterations):
        assign = (x @ centres.T).argmax(dim=1)
        sums = torch.zeros_like(centres).index_add_(0, assign, x)
        # a scatter_add_ count: bincount's output size depends on the data (max index), so on CUDA
        # it reads the indices' min/max back to the host, a sync per iteration
        counts = torch.zeros(k, dtype=torch.long, device=x.device).scatter_add_(0, assign, torch.ones_like(assign))
        centres = torch.where((counts > 0).unsqueeze(1), F.normalize(sums, dim=1), centres)
    return centres


def _top_direction(rows: torch.Tensor) -> torch.Tensor:
    """The top left singular vector of ``rows`` (n, d): one coordinate per row, its largest entry positive
    (a singular vector's sign is arbitrary). From the smaller Gram matrix's top eigenvector."""
    if rows.shape[0] <= rows.shape[1]:
        u = torch.linalg.eigh(rows @ rows.T).eigenvectors[:, -1]
    else:
        u = rows @ torch.linalg.eigh(rows.T @ rows).eigenvectors[:, -1]
    return u * torch.sign(u[u.abs().argmax()])


def pddp_groups(x: torch.Tensor, groups: int) -> torch.Tensor:
    """The group of each row of ``x`` (n, d) under the released IS-CSE code's PDDP tree (module docstring):
    the rows centred once; ``groups`` - 1 times the largest group is split by the sign of its top singular
    vector (<= 0 first, then > 0) and the groups re-sorted by size, largest first (stable); a split that
    leaves one side empty ends the tree (the released loop would repeat it). Returns (n,) group ids
    (on x's device)."""
    rows = x.detach().to("cpu", torch.float64)
    rows = rows - rows.mean(0)
    parts = [torch.arange(rows.shape[0])]
    for _ in range(groups - 1):
        node = parts[0]
        if node.numel() < 2:
            break
        right = _top_direction(rows[node]) > 0
        if bool(right.all()) or not bool(right.any()):
            break
        parts = sorted([node[~right], node[right], *parts[1:]], key=len, reverse=True)
    gid = torch.empty(rows.shape[0], dtype=torch.long)
    for g, members in enumerate(parts):  # at most `groups` groups, once per step
        gid[members] = g
    return gid.to(x.device)


class InstanceSmoothing(ObjectiveTerm):
    key = "instance_smoothing"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "is-cse"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = SmoothingSettings

    def __init__(self, settings: SmoothingSettings, hidden_size: int, num_layers: int):
        super().__init__(settings, hidden_size, num_layers)
        # ring buffer: `pointer` is the next row to overwrite, `filled` how many rows hold data
        self.register_buffer("memory", torch.zeros(settings.buffer_size, hidden_size))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        # host copies of pointer / filled: reading the buffers (int(tensor)) is a device-to-host
        # sync on CUDA, several per step; the buffers stay the checkpointed truth (see below)
        self._pointer = 0
        self._filled = 0
        self._alpha = 0.0
        self._active = 0.0

    # ------------------------------------------------------------------ buffer

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._pointer, self._filled = int(self.pointer), int(self.filled)  # one sync per load

    @torch.no_grad()
    def push(self, rows: torch.Tensor) -> None:
        """FIFO insert of normalized, detached rows (Eq. 3); only the newest L survive."""
        rows = F.normalize(rows.detach().float(), dim=-1)[-self.settings.buffer_size:]
        n, size = rows.shape[0], self.settings.buffer_size
        slots = (self._pointer + torch.arange(n, device=rows.device)) % size
        self.memory[slots] = rows.to(self.memory.dtype)
        self._pointer, self._filled = (self._pointer + n) % size, min(self._filled + n, size)
        self.pointer.fill_(self._pointer)
        self.filled.fill_(self._filled)

    def entries(self) -> torch.Tensor:
        """Buffer rows holding data, oldest first."""
        if self._filled < self.settings.buffer_size:
            return self.memory[: self._filled]
        return torch.roll(self.memory, -self._pointer, dims=0)

    def ready(self) -> bool:
        s = self.settings
        if s.wait_for_full_buffer:
            return self._filled >= s.buffer_size
        need = s.clusters if s.retrieval in ("kmeans", "pddp") else s.neighbors + int(s.push_before_retrieval)
        return self._filled >= need

    def waiting(self) -> str | None:
        if self.ready():
            return None
        s = self.settings
        need = s.buffer_size if s.wait_for_full_buffer else (s.clusters if s.retrieval in ("kmeans", "pddp")
                                                             else s.neighbors + int(s.push_before_retrieval))
        return f"its buffer of {s.buffer_size} rows held {self._filled} (it acts from {need})"

    @classmethod
    def at_rehearsal_scale(cls, d: SmoothingSettings, batch_size: int, steps: int) -> dict:
        """A buffer of one batch: full after the first step (after the first push with push_before_retrieval),
        so retrieval, aggregation and the loss run from the second; the neighbours and clusters it can hold."""
        if d.buffer_size <= batch_size:
            return {}
        out = {"buffer_size": batch_size}
        if d.retrieval == "knn" and d.neighbors >= batch_size:
            out["neighbors"] = batch_size - 1
        if d.retrieval in ("kmeans", "pddp") and d.clusters > batch_size:
            out["clusters"] = batch_size
        return out

    # ------------------------------------------------------------------ smoothing

    def alpha(self, progress: float) -> float:
        s = self.settings
        if s.alpha_schedule == "cosine":
            return cosine_alpha(progress, s.alpha_start, s.alpha_end)
        return s.alpha

    def smooth(self, positives: torch.Tensor, bank: torch.Tensor) -> torch.Tensor:
        """h^{s+} for each row of ``positives`` (N, D) given buffer rows ``bank`` (constants)."""
        s = self.settings
        bank = bank.detach().float()  # retrieved rows and centres are stop-gradient (paper, after Eq. 5)
        query = F.normalize(positives.float(), dim=-1)
        if s.retrieval == "pddp":
            return self.pddp_smooth(query, bank)
        with torch.no_grad():
            sims = query.detach() @ bank.T  # cosine: bank rows are unit norm
        if s.retrieval == "kmeans":
            with torch.no_grad():
                centres = spherical_kmeans(bank, s.clusters, s.kmeans_iterations)
                centre = centres[(query.detach() @ centres.T).argmax(dim=1)]
            return s.gamma * query + (1.0 - s.gamma) * centre
        skip = int(s.push_before_retrieval)  # push-first: the top hit is the query's own copy
        top = torch.topk(sims, s.neighbors + skip, dim=1).indices[:, skip:]
        group = torch.cat([query.unsqueeze(1), bank[top]], dim=1)  # (N, k+1, D); only row 0 has grad
        weights = torch.softmax(torch.einsum("nd,nkd->nk", query, group) / s.beta, dim=1)
        return torch.einsum("nk,nkd->nd", weights, group)

    def pddp_smooth(self, query: torch.Tensor, bank: torch.Tensor) -> torch.Tensor:
        """The released pddp mode: [h+ rows; the newest L - B rows of previous steps] grouped by pddp_groups, each
        h+ attending (softmax of dot / beta) to its own group's rows; the h+ rows keep their gradient."""
        s, n = self.settings, query.shape[0]
        if s.push_before_retrieval:  # the batch's own copies are the newest rows: the differentiable ones replace them
            others = bank[: max(bank.shape[0] - n, 0)]
        else:
            keep = max(s.buffer_size - n, 0)
            others = bank[bank.shape[0] - min(keep, bank.shape[0]):]
        members = torch.cat([query, others])
        gid = pddp_groups(members, s.clusters)
        scores = (query @ members.T / s.beta).masked_fill(gid[:n, None] != gid[None, :], float("-inf"))
        return torch.softmax(scores, dim=1) @ members

    def extra_loss(self, ctx: StepContext) -> torch.Tensor | None:
        s = self.settings
        self._alpha = self.alpha(ctx.progress)
        if s.push_before_retrieval and self.training:
            self.push(ctx.z2)
        loss = ctx.z1.new_zeros((), dtype=torch.float32)
        self._active = 0.0
        if self.ready():
            smoothed = self.smooth(ctx.z2, self.entries())
            logits = cosine_matrix(ctx.z1, smoothed) / ctx.temperature
            loss = self._alpha * F.cross_entropy(logits, ctx.labels)
            self._active = 1.0
        if not s.push_before_retrieval and self.training:
            self.push(ctx.z2)
        return loss

    def logs(self) -> dict[str, float]:
        return {"alpha": self._alpha, "active": self._active}

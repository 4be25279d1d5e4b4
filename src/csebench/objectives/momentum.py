"""ESimCSE (Wu et al., "ESimCSE: Enhanced Sample Building Method for Contrastive Learning of
Unsupervised Sentence Embedding", arXiv 2109.04380; COLING 2022).

Word repetition (the positive): view 2 is the sentence with some of its subword tokens duplicated in
place, so the positive pair no longer shares its length. With N the sentence's subword tokens (no
[CLS]/[SEP]), dup_len is drawn uniformly from [0, max(2, int(dup_rate * N))] (capped at N) and dup_len
distinct tokens, drawn uniformly, are each repeated once.

Momentum contrast (the negatives): a momentum copy of the encoder (backbone and training head),
theta_m <- m theta_m + (1 - m) theta every step, encodes the anchors' sentences without dropout; the
results of the previous steps wait in a FIFO queue of Q rows and are extra negatives of InfoNCE:

    l_i = -log e^{sim(h_i, h_i^+)/tau} / ( sum_j e^{sim(h_i, h_j^+)/tau} + sum_{q in queue} e^{sim(h_i, q)/tau} )

The queue holds constants; the current batch joins it after its loss (so never its own negative).

Sources. The paper's text was not readable from here (the stored pages hold its opening only); its
abstract and a translated summary (repetition "taking subword repetition as an example", the dup_len
range, the momentum update, the queue) are. The released code (caskcsg/sentemb ESimCSE/, read, not
copied: train.py, esimcse/models.py, esimcse/trainers.py and logs/roberta-base.log) gives: queue 160
at batch 64 (run name ``esimcse-roberta-base-0.1-bpe-0.3-160-bs64``), subword ("bpe") repetition with
dup_rate 0.3 for RoBERTa-base, lr 1e-5, fp16. Defaults here: dup_rate 0.32 and momentum 0.995 are the
values third-party reimplementations attribute to the paper (not checked against its text: flagged in
docs/methods.md); queue 160 is the released run's.

Released-code differences, selectable:
  * ``dup_bound: released``: dup_len from randrange(min(10, int(dup_rate * L))) with L counting
    [CLS]/[SEP] (so at most 9 and never the upper bound), no repetition when int(dup_rate * L) = 0.
  * ``momentum_init: random``: the released model builds its momentum encoder in __init__, before
    from_pretrained loads the weights, so it starts from random weights (the log lists every
    momentum_model weight as newly initialized); ``copy`` (default) starts it as the encoder (MoCo).
  * ``momentum_head: shared``: the released code applies the current (not a momentum) MLP head to
    the momentum backbone's output; ``ema`` (default) keeps a momentum copy of the head too.
  * the released trainer empties the queue at every epoch start; ours keeps it (one epoch is the
    papers' setting, where the two agree).
One process only (the queue and the momentum pass are this rank's).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from csebench.core.errors import ConfigError
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix

BOUNDS = ("paper", "released")
INITS = ("copy", "random")
HEADS = ("ema", "shared")


@dataclass
class MomentumSettings:
    repetition: bool = True  # word (subword) repetition positives
    dup_rate: float = 0.32  # maximum repetition rate (third-party reimplementations' value; released RoBERTa run: 0.3)
    dup_bound: str = "paper"  # paper: dup_len in [0, max(2, int(rate N))] | released: randrange(min(10, int(rate L)))
    queue_size: int = 160  # Q (released run: 160 at batch 64)
    momentum: float = 0.995  # m (not checked against the paper's text)
    momentum_init: str = "copy"  # copy (MoCo) | random (what the released code's loading does)
    momentum_head: str = "ema"  # ema | shared (released: the current head over the momentum backbone)
    seed: int | None = None  # base seed of the repetition draws; None: the run's seed

    def validate(self, where: str) -> None:
        if not 0 <= self.dup_rate <= 1:
            raise ConfigError(f"{where}.dup_rate must be in [0, 1], got {self.dup_rate}")
        if self.queue_size < 1:  # 0 holds no negative: the momentum encoder would run every step for nothing
            raise ConfigError(f"{where}.queue_size must be at least 1, got {self.queue_size}: an empty queue adds no "
                              "momentum negative, while the momentum encoder still encodes every batch")
        if not 0 <= self.momentum <= 1:
            raise ConfigError(f"{where}.momentum must be in [0, 1], got {self.momentum}")
        for name, valid in (("dup_bound", BOUNDS), ("momentum_init", INITS), ("momentum_head", HEADS)):
            if getattr(self, name) not in valid:
                raise ConfigError(f"{where}.{name}: unknown '{getattr(self, name)}' (valid: {', '.join(valid)})")


def repeat_tokens(ids: torch.Tensor, mask: torch.Tensor, dup_len: torch.Tensor, keys: torch.Tensor,
                  pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row with ``dup_len[r]`` of its sentence tokens (not the first or last, i.e. [CLS]/[SEP])
    repeated once in place: those with the smallest ``keys`` (uniform random keys make a uniform
    choice). Vectorized: positions by a cumulative sum of the tokens' copy counts, one scatter each."""
    b, width = ids.shape
    n = mask.long().sum(1, keepdim=True)
    col = torch.arange(width, device=ids.device).unsqueeze(0)
    inner = (col >= 1) & (col < n - 1)
    k = torch.where(inner, keys, torch.full_like(keys, float("inf")))
    rank = k.argsort(dim=1).argsort(dim=1)
    dup = inner & (rank < dup_len.unsqueeze(1))
    counts = mask.long() + dup.long()
    start = counts.cumsum(1) - counts  # where each token's first copy goes
    out_w = width + int(dup_len.max().item()) if dup_len.numel() else width
    out = torch.full((b, out_w + 1), pad_id, dtype=ids.dtype, device=ids.device)
    spare = torch.full_like(start, out_w)
    out.scatter_(1, torch.where(mask.bool(), start, spare), ids)
    out.scatter_(1, torch.where(dup, start + 1, spare), ids)
    new_n = counts.sum(1, keepdim=True)
    new_mask = (torch.arange(out_w, device=ids.device).unsqueeze(0) < new_n).to(mask.dtype)
    return out[:, :out_w], new_mask


def draw_dup_len(n_tokens: torch.Tensor, u: torch.Tensor, rate: float, bound: str) -> torch.Tensor:
    """dup_len per row from uniforms ``u`` in [0, 1): paper: U{0 .. max(2, int(rate N))} capped at N;
    released: U{0 .. min(10, int(rate L)) - 1} with L = N + 2, 0 where int(rate L) = 0."""
    if bound == "paper":
        hi = torch.clamp((rate * n_tokens.double()).floor().long(), min=2)
        d = (u * (hi + 1).double()).floor().long()
        return torch.minimum(d, n_tokens)
    top = torch.clamp((rate * (n_tokens + 2).double()).floor().long(), max=10)
    d = (u * top.double()).floor().long()
    return torch.where(top > 0, torch.minimum(d, n_tokens), torch.zeros_like(d))


class MomentumNegatives(ObjectiveTerm):
    key = "momentum_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "esimcse"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = MomentumSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("encoder", "run_config")
    adds = "word repetition"

    @classmethod
    def own_positives(cls, settings: MomentumSettings) -> str | None:
        return "word repetition in view 2" if settings.repetition else None

    @classmethod
    def added_tokens(cls, settings: MomentumSettings, tokenizer, max_seq_length: int) -> int:
        """The most tokens repetition adds to a row (draw_dup_len's bound at the longest row's N = length - 2)."""
        if not settings.repetition:
            return 0
        n = max(max_seq_length - 2, 0)
        if settings.dup_bound == "paper":
            return min(n, max(2, math.floor(settings.dup_rate * n)))
        return max(min(n, min(10, math.floor(settings.dup_rate * max_seq_length)) - 1), 0)

    def __init__(self, settings: MomentumSettings, hidden_size: int, num_layers: int, encoder=None, run_config=None):
        super().__init__(settings, hidden_size, num_layers)
        if encoder is None:
            raise ConfigError("objectives.momentum_negatives needs the encoder (the trainer passes it)")
        self._encoder = [encoder]  # a plain reference, not a submodule
        run_seed = int(getattr(run_config, "seed", 0) or 0)
        self.base_seed = settings.seed if settings.seed is not None else run_seed
        self.momentum_backbone = copy.deepcopy(encoder.backbone)
        if settings.momentum_init == "random":
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.base_seed)
                self.momentum_backbone.apply(self.momentum_backbone._init_weights)
        self.momentum_head = copy.deepcopy(encoder.head) if (encoder.head is not None and settings.momentum_head == "ema") else None
        for p in self.momentum_parameters():
            p.requires_grad_(False)
        self.register_buffer("queue", torch.zeros(settings.queue_size, hidden_size))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        self._filled = 0
        self._pad = encoder.tokenizer.pad_token_id or 0

    def momentum_parameters(self) -> list[torch.nn.Parameter]:
        return list(self.momentum_backbone.parameters()) + (list(self.momentum_head.parameters()) if self.momentum_head is not None else [])

    def online_parameters(self) -> list[torch.nn.Parameter]:
        enc = self._encoder[0]
        return list(enc.backbone.parameters()) + (list(enc.head.parameters()) if self.momentum_head is not None else [])

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._filled = int(self.filled)

    # ------------------------------------------------------------------ word repetition

    def input_views(self, views, indices, step):
        if not self.settings.repetition:
            return views
        ids, mask = views["view2"]
        gen = torch.Generator(device=ids.device)
        seed = np.random.SeedSequence([self.base_seed, step, 0xE51]).generate_state(1, dtype=np.uint64)[0]
        gen.manual_seed(int(seed) & ((1 << 63) - 1))
        u = torch.rand(ids.shape[0], generator=gen, device=ids.device, dtype=torch.float64)
        keys = torch.rand(ids.shape, generator=gen, device=ids.device)
        n_tokens = mask.long().sum(1) - 2
        dup_len = draw_dup_len(n_tokens, u, self.settings.dup_rate, self.settings.dup_bound)
        return {**views, "view2": repeat_tokens(ids, mask, dup_len, keys, self._pad)}

    # ------------------------------------------------------------------ momentum contrast

    @torch.no_grad()
    def momentum_update(self) -> None:
        m = self.settings.momentum
        mom, online = self.momentum_parameters(), self.online_parameters()
        torch._foreach_mul_(mom, m)
        torch._foreach_add_(mom, [p.detach() for p in online], alpha=1.0 - m)

    @torch.no_grad()
    def momentum_encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        from csebench.model.encoder import pool

        enc = self._encoder[0]
        self.momentum_backbone.eval()  # no dropout (the released code encodes under model.eval())
        out = self.momentum_backbone(input_ids=ids, attention_mask=mask, output_hidden_states=enc.needs_all_layers(),
                                     return_dict=True)
        hs = out.hidden_states if out.hidden_states is not None else (out.last_hidden_state,)
        pooled = pool(enc.pooler, hs, mask)
        head = self.momentum_head if self.settings.momentum_head == "ema" else enc.head
        return head(pooled) if head is not None else pooled

    @torch.no_grad()
    def push(self, rows: torch.Tensor) -> None:
        q = self.settings.queue_size
        if q == 0:
            return
        rows = rows.detach().float()[-q:]
        self.queue.copy_(torch.cat([self.queue[rows.shape[0]:], rows.to(self.queue.dtype)]))  # oldest first
        self._filled = min(self._filled + rows.shape[0], q)
        self.filled.fill_(self._filled)

    def entries(self) -> torch.Tensor:
        return self.queue[self.settings.queue_size - self._filled:]

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        if ctx.world_size > 1:
            raise RuntimeError("objectives.momentum_negatives runs on one process only")
        cols = cosine_matrix(ctx.z1, self.entries()) / ctx.temperature if self._filled else None
        if self.training and ctx.inputs:
            self.momentum_update()
            ids, mask = ctx.inputs["view1"]
            self.push(self.momentum_encode(ids, mask))
        return cols

    def logs(self) -> dict[str, float]:
        return {"queue": float(self._filled)}

"""The training objective: InfoNCE plus the configured terms (csebench.objectives), as one module."""

from __future__ import annotations

import torch
from torch import nn

from csebench.core.errors import ConfigError
from csebench.core.schema import from_dict
from csebench.objectives import term_class
from csebench.objectives.base import StepContext
from csebench.objectives.contrastive import info_nce


EMBEDDINGS = "the embeddings (z1, z2)"  # Objective.checks' first entry: what every other is computed from


class Objective(nn.Module):
    """InfoNCE + the configured terms. ``forward`` returns (loss, {name: value}) for logging."""

    def __init__(self, objectives: dict[str, dict], hidden_size: int, num_layers: int, **term_kwargs):
        super().__init__()
        terms = {}
        for key, settings in objectives.items():
            cls = term_class(key)
            obj = from_dict(cls.Settings, settings, f"objectives.{key}")
            kwargs = {k: v for k, v in term_kwargs.items() if k in cls.extra_init_args}
            terms[key] = cls(obj, hidden_size=hidden_size, num_layers=num_layers, **kwargs)
        self.terms = nn.ModuleDict(terms)
        # what each term did at the last step (acted): Python-side facts, no value read from the device
        self._acts: dict[str, list[str]] = {k: [] for k in self.terms}
        self._acts_step: int | None = None
        # what the last step's loss was computed from, as 0-d tensors on the device, for the trainer to read back
        # with the losses (``checks``): nothing is read here
        self.checks: dict[str, tuple[torch.Tensor, bool]] = {}

    def input_views(self, ids: torch.Tensor, mask: torch.Tensor, indices: torch.Tensor,
                    step: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The views to encode this step (ObjectiveTerm.input_views, terms in their view_order)."""
        self._new_step(step)
        views = {"view1": (ids, mask), "view2": (ids, mask)}
        for key, term in sorted(self.terms.items(), key=lambda kt: kt[1].view_order):
            changed = term.input_views(views, indices, step)
            if changed is not views:
                self._acts[key].append("input views")
            views = changed
        return views

    def pool(self, encoder, hidden_states, ids, mask, segments) -> torch.Tensor | None:
        """The one term's pooling (PromptBERT's [MASK] state), or None for the backbone's pooler."""
        pooled = [(k, p) for k, t in self.terms.items() if (p := t.pool(encoder, hidden_states, ids, mask, segments)) is not None]
        if len(pooled) > 1:
            raise ConfigError("two objective terms pool the representation; at most one may")
        for key, _ in pooled:
            self._acts[key].append("pooling")
        return pooled[0][1] if pooled else None

    def _new_step(self, step: int) -> None:
        if self._acts_step != step:
            self._acts = {k: [] for k in self.terms}
            self._acts_step = step

    def acted(self) -> dict[str, list[str]]:
        """What each term did at the last step: "input views", "pooling", "extra negatives", "negative weights",
        "contrastive context", "replaces the contrastive loss" (it changed what the loss is computed from), or
        "extra loss" (it added a loss part: logs' loss_<key>, whose value says whether it counted)."""
        return {k: list(v) for k, v in self._acts.items()}

    def intermediate_layers(self) -> list[int]:
        layers: set[int] = set()
        for term in self.terms.values():
            layers.update(term.intermediate_layers())
        return sorted(layers)

    def forward(self, ctx: StepContext) -> tuple[torch.Tensor, dict[str, float | torch.Tensor]]:
        """The loss, and the logs: each loss part as a detached 0-d tensor on the device (reading it
        here would make the host wait for the GPU every step; the trainer reads them back every
        log_steps), the terms' own logs (``logs()``) as floats."""
        self._new_step(ctx.step)
        acts = self._acts
        # what the contrastive loss is computed from, for the message of a loss that is not finite (the trainer reads
        # them back with the losses): the embeddings' sum (not finite where any entry is not), the largest logit a
        # term adds (-inf is a dropped column, so only NaN or +inf is wrong there)
        checks = {EMBEDDINGS: (ctx.z1.detach().sum(dtype=torch.float32) + ctx.z2.detach().sum(dtype=torch.float32),
                                              True)}
        extra = []
        for key, term in self.terms.items():
            if (e := term.extra_negatives(ctx)) is not None:
                extra.append(e)
                if e.shape[-1]:
                    acts[key].append("extra negatives")
                    checks[f"the extra negatives of term {key}"] = (e.detach().amax().float(), False)
        candidates = ctx  # the InfoNCE candidates: view 2, unless a term says otherwise (positives: self)
        for key, term in self.terms.items():
            changed = term.contrastive_context(candidates)
            if changed is not candidates:
                acts[key].append("contrastive context")
                checks[f"the contrastive candidates of term {key}"] = (changed.z2.detach().sum(dtype=torch.float32), True)
            candidates = changed
        weights = []
        for key, term in self.terms.items():
            if (w := term.negative_weights(candidates)) is not None:
                weights.append(w)
                acts[key].append("negative weights")
                checks[f"the negative weights of term {key}"] = (w.detach().amax().float(), False)
        self.checks = {k: (v.detach().reshape(()), finite) for k, (v, finite) in checks.items()}
        contrastive = info_nce(candidates, extra, sum(weights[1:], weights[0]) if weights else None)
        for key, term in self.terms.items():
            changed = term.replaces_contrastive(contrastive, candidates)
            if changed is not contrastive:
                acts[key].append("replaces the contrastive loss")
            contrastive = changed
        loss = contrastive
        parts = {"loss_contrastive": contrastive}
        for key, term in self.terms.items():
            add = term.extra_loss(ctx)
            if add is not None:
                loss = loss + add
                parts[f"loss_{key}"] = add
                acts[key].append("extra loss")
        logs: dict[str, float | torch.Tensor] = {k: v.detach().float().reshape(()) for k, v in parts.items()}
        for key, term in self.terms.items():
            logs.update({f"{key}/{k}": v for k, v in term.logs().items()})
        return loss, logs

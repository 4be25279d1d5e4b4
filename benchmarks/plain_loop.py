"""The hardware's anchor: unsup-SimCSE's training step written plainly, as a researcher would in about
forty lines of torch, with nothing of csebench in the step.

It runs the same math as csebench's SimCSE step: a Hugging Face encoder on the doubled batch [x; x] (two
dropout views in one forward pass), the [CLS] state through SimCSE's training head (dense + tanh), the
cosine matrix over the temperature in float32, cross-entropy against the diagonal, gradients clipped to
one norm, a fused AdamW step with SimCSE's two parameter groups and a linear schedule. Batches are
tokenized beforehand and moved to the device before the clock starts, each padded to its longest row or
(``fixed``) all to the maximum length, the one shape a compiler likes. ``compile`` wraps the
encoder and head in torch.compile.

benchmarks/device.py times it beside csebench's step and sentence-transformers' in the same call;
tests/test_step_cost.py counts its operators and host reads against csebench's step on the CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class PlainSimCSE(torch.nn.Module):
    """The backbone (a Hugging Face encoder module, trained in place) and SimCSE's dense + tanh head."""

    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Linear | None = None):
        super().__init__()
        self.backbone = backbone
        hidden = backbone.config.hidden_size
        self.head = head if head is not None else torch.nn.Linear(hidden, hidden)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        cls = self.backbone(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0]
        return torch.tanh(self.head(cls))


def device_batches(tokenizer, sentences: list[str], batches, max_len: int, device,
                   fixed: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each batch tokenized (truncated to ``max_len``) and on the device as (ids, mask), its rows doubled
    ([x; x]); padded to its longest row, or (``fixed``) to ``max_len``."""
    out = []
    for idx in batches:
        enc = tokenizer([sentences[i] for i in idx], truncation=True, max_length=max_len, return_tensors="pt",
                        padding="max_length" if fixed else "longest")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        out.append((torch.cat([ids, ids]).to(device), torch.cat([mask, mask]).to(device)))
    return out


class PlainLoop:
    """One optimizer step per call of ``step(ids, mask)``; the loss stays on the device."""

    def __init__(self, model: PlainSimCSE, lr: float, temperature: float, total_steps: int,
                 amp_dtype: torch.dtype | None = None, weight_decay: float = 0.0, eps: float = 1e-8,
                 max_grad_norm: float = 1.0, compile_: bool = False):
        self.model, self.temperature, self.amp_dtype, self.max_grad_norm = model, temperature, amp_dtype, max_grad_norm
        self.device = next(model.parameters()).device
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=lr, eps=eps, fused=self.device.type in ("cuda", "cpu"))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: max(0.0, (total_steps - s) / total_steps))
        self.scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
        self.forward = torch.compile(model, dynamic=False) if compile_ else model
        model.train()

    def step(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            z = self.forward(ids, mask)
        z1, z2 = z.float().chunk(2)
        sim = F.cosine_similarity(z1[:, None], z2[None, :], dim=-1) / self.temperature
        loss = F.cross_entropy(sim, torch.arange(sim.shape[0], device=sim.device))
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        return loss.detach()

"""Prompt templates (PromptBERT, Jiang et al. 2022): a sentence x is encoded as the template
``[CLS] prefix x suffix [SEP]`` whose suffix holds the tokenizer's mask token, and represented by
the last layer's hidden state at that mask token.

A template is two texts, ``prefix`` and ``suffix``, with ``{mask}`` standing for the tokenizer's
mask token ([MASK] for BERT, <mask> for RoBERTa), e.g. PromptBERT's BERT template
``This sentence of "`` + ``" means {mask} .``. Each is tokenized without special tokens, so for a
byte-level BPE the suffix's leading space is kept (`` ' means`` -> Ġ' Ġmeans, as the released code).

Wrapping works on token ids already tokenized with special tokens (the training corpus, the
evaluator's batches): one vectorized scatter per batch, no Python loop over rows.
"""

from __future__ import annotations

import torch

from csebench.core.errors import ConfigError


def template_ids(tokenizer, prefix: str, suffix: str, where: str = "template") -> tuple[list[int], list[int]]:
    """The prefix's and suffix's token ids; the mask token must occur exactly once in the suffix."""
    mask = getattr(tokenizer, "mask_token", None)
    if not mask:
        raise ConfigError(f"{where}: the tokenizer has no mask token, which the template representation needs")
    if "{mask}" in prefix or suffix.count("{mask}") != 1:
        raise ConfigError(f"{where}: the suffix must hold {{mask}} exactly once and the prefix none (got {prefix!r}, {suffix!r})")
    pre = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
    suf = tokenizer(suffix.replace("{mask}", mask), add_special_tokens=False)["input_ids"]
    if suf.count(tokenizer.mask_token_id) != 1:
        raise ConfigError(f"{where}: the suffix {suffix!r} does not tokenize to exactly one mask token")
    return list(pre), list(suf)


def wrap(ids: torch.Tensor, mask: torch.Tensor, prefix: list[int], suffix: list[int], mask_token_id: int,
         pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[CLS] x [SEP] rows -> [CLS] prefix x suffix [SEP] rows (right-padded), their attention mask, and
    each row's mask-token column (B,).

    ``ids``/``mask``: (B, L) rows that start with the first special token and end (at column n-1,
    n = the row's length) with the closing one; the result is (B, L + P + S)."""
    b, width = ids.shape
    p, s = len(prefix), len(suffix)
    out_w = width + p + s
    dev = ids.device
    n = mask.long().sum(1, keepdim=True)  # (B, 1)
    col = torch.arange(width, device=dev).unsqueeze(0).expand(b, width)
    # where each original column goes: the first special token stays at 0, sentence tokens move right by
    # P, the closing special token goes after the suffix, padding goes to a spare column (dropped)
    target = torch.where(col == 0, col, col + p)
    target = torch.where(col == n - 1, n - 1 + p + s, target)
    target = torch.where(col >= n, torch.full_like(col, out_w), target)
    out = torch.full((b, out_w + 1), pad_id, dtype=ids.dtype, device=dev)
    out.scatter_(1, target, ids)
    if p:
        out[:, 1 : 1 + p] = torch.as_tensor(prefix, dtype=ids.dtype, device=dev)
    suffix_cols = (n - 1 + p) + torch.arange(s, device=dev).unsqueeze(0)  # (B, S)
    out.scatter_(1, suffix_cols, torch.as_tensor(suffix, dtype=ids.dtype, device=dev).expand(b, s))
    new_mask = (torch.arange(out_w, device=dev).unsqueeze(0) < n + p + s).to(mask.dtype)
    return out[:, :out_w], new_mask, n.squeeze(1) - 1 + p + suffix.index(mask_token_id)


def template_only(prefix: list[int], suffix: list[int], mask_token_id: int, cls_id: int, sep_id: int, lengths: int,
                  position_offset: int, device) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Template denoising's inputs (PromptBERT Sec. 4.2): the template without the sentence,
    ``[CLS] prefix suffix [SEP]``, once per sentence length k = 0 .. lengths-1, with the position ids a
    k-token sentence would give it (the suffix's positions shifted by k). Returns ids (K, T), position
    ids (K, T) and the mask token's column."""
    row = [cls_id, *prefix, *suffix, sep_id]
    ids = torch.as_tensor(row, device=device).unsqueeze(0).repeat(lengths, 1)
    pos = torch.arange(len(row), device=device).unsqueeze(0).repeat(lengths, 1)
    pos[:, 1 + len(prefix):] += torch.arange(lengths, device=device).unsqueeze(1)
    return ids, pos + position_offset, 1 + len(prefix) + suffix.index(mask_token_id)

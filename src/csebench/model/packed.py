"""The forward pass of a BERT-family encoder on its real tokens only.

A training batch is a random sample of sentences, padded to its longest: on the demo corpus the padded
batch holds 2.3x as many positions as real tokens, and the dense layers (query, key, value, attention
output, feed-forward), nearly all of a step's FLOPs, compute every position. Padding never changes a
real token's output (attention masks it as a key), so ``forward_hidden`` runs the dense layers, their
layer norms and dropouts on the real tokens packed into one (tokens, hidden) matrix, and only the
attention itself on the padded (batch, heads, length, length) layout, with the same mask, scaling and
dropout probability as the library's SDPA path. The result equals the library's forward at every real
position (to float rounding; tests/test_packed.py) and is zero at padded ones, which no pooler reads.
Dropout draws its masks for fewer positions, so a seed gives other masks than the padded forward did.

Used for BERT and RoBERTa architectures (absolute positions, encoder only, no cross-attention: what
``supports`` checks); anything else runs the library's own forward. ``CSEBENCH_PACKED=0`` turns it off.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

_LAYER_PARTS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm")


def enabled() -> bool:
    return os.environ.get("CSEBENCH_PACKED", "").strip() != "0"


def supports(backbone) -> bool:
    """A BERT or RoBERTa encoder whose layers have the parts this forward uses, absolute positions."""
    config = getattr(backbone, "config", None)
    if config is None or getattr(config, "model_type", None) not in ("bert", "roberta"):
        return False
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return False
    if getattr(config, "position_embedding_type", "absolute") not in (None, "absolute"):
        return False
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if not layers or not hasattr(backbone, "embeddings"):
        return False
    try:
        for part in _LAYER_PARTS:
            layers[0].get_submodule(part)
    except AttributeError:
        return False
    return True


def _layer(layer, x: torch.Tensor, rows: torch.Tensor, shape: tuple[int, int], key_mask: torch.Tensor,
           heads: int, training: bool) -> torch.Tensor:
    """One encoder layer on packed tokens ``x`` (N, hidden); ``rows`` their places in the padded (B*L) layout."""
    b, length = shape
    sa, so = layer.attention.self, layer.attention.output
    qkv = torch.cat([sa.query(x), sa.key(x), sa.value(x)], dim=1)  # (N, 3 hidden)
    padded = qkv.new_zeros(b * length, qkv.shape[1]).index_copy(0, rows, qkv)
    q, k, v = padded.view(b, length, 3, heads, -1).permute(2, 0, 3, 1, 4)  # each (B, heads, L, head size)
    p = sa.dropout.p if training else 0.0
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, dropout_p=p)
    ctx = ctx.transpose(1, 2).reshape(b * length, -1).index_select(0, rows)
    h = so.LayerNorm(so.dropout(so.dense(ctx)) + x)
    ff = layer.output.dense(layer.intermediate.intermediate_act_fn(layer.intermediate.dense(h)))
    return layer.output.LayerNorm(layer.output.dropout(ff) + h)


def forward_hidden(backbone, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   all_layers: bool, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """The hidden states (embeddings, then every layer's output with ``all_layers``; else the last only),
    (batch, length, hidden) each, computed on the real tokens; zeros at padded positions. ``rows``: the real
    tokens' places in the flattened batch, in order (found here from the mask when not given: on a GPU that
    reads the mask back, a host wait)."""
    b, length = input_ids.shape
    emb = backbone.embeddings(input_ids=input_ids)  # positions and token types as the library sets them
    if rows is None:
        rows = attention_mask.reshape(-1).nonzero().squeeze(1)
    x = emb.reshape(b * length, -1).index_select(0, rows)
    # keys only: a padded query row is computed and never read (as in the library's SDPA path)
    key_mask = attention_mask.bool()[:, None, None, :]
    heads = backbone.config.num_attention_heads

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t.new_zeros(b * length, t.shape[1]).index_copy(0, rows, t).view(b, length, -1)

    states = [emb] if all_layers else []
    for layer in backbone.encoder.layer:
        x = _layer(layer, x, rows, (b, length), key_mask, heads, backbone.training)
        if all_layers:
            states.append(unpack(x))
    return tuple(states) if all_layers else (unpack(x),)

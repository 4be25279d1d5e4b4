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

Used for the model types whose layers it reproduces, each proven against the library's forward by
tests/test_packed.py: BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA (its factorised embeddings' projection too) and
DistilBERT (the module paths of each: csebench.model.model_types); with absolute positions, encoder only, no
cross-attention (what ``why_not`` checks). Anything else runs the library's own forward, and ``why_not`` says why
(train.json's ``packed_forward``). ``CSEBENCH_PACKED=0`` turns it off.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

from csebench.model.model_types import MODEL_TYPES, Layout


def enabled() -> bool:
    return os.environ.get("CSEBENCH_PACKED", "").strip() != "0"


def why_not(backbone) -> str | None:
    """Why this forward cannot run ``backbone`` (None: it can): a model type it does not reproduce, relative
    positions, a decoder, or layers without the parts its layout names."""
    config = getattr(backbone, "config", None)
    model_type = getattr(config, "model_type", None)
    entry = MODEL_TYPES.get(model_type) if model_type else None
    if entry is None:
        return f"model_type {model_type}: not in csebench.model.model_types, not proven"
    if entry.packed is None:
        return f"model_type {model_type}: {entry.not_packed}"
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return f"model_type {model_type}: a decoder or cross-attention"
    if getattr(config, "position_embedding_type", "absolute") not in (None, "absolute"):
        return f"model_type {model_type}: position_embedding_type {config.position_embedding_type}, not absolute"
    try:
        layers = backbone.get_submodule(entry.packed.layers)
        if not hasattr(backbone, "embeddings") or not len(layers):
            raise AttributeError("embeddings")
        for part in entry.packed.parts():
            layers[0].get_submodule(part)
    except AttributeError as exc:
        return f"model_type {model_type}: its modules are not the layout csebench knows ({exc})"
    return None


def supports(backbone) -> bool:
    """A backbone of a model type whose layers this forward reproduces (``why_not`` says why not)."""
    return why_not(backbone) is None


def _layer(layer, lay: Layout, x: torch.Tensor, rows: torch.Tensor, shape: tuple[int, int], key_mask: torch.Tensor,
           heads: int, training: bool) -> torch.Tensor:
    """One encoder layer on packed tokens ``x`` (N, hidden); ``rows`` their places in the padded (B*L) layout."""
    b, length = shape
    part = layer.get_submodule
    qkv = torch.cat([part(lay.query)(x), part(lay.key)(x), part(lay.value)(x)], dim=1)  # (N, 3 hidden)
    padded = qkv.new_zeros(b * length, qkv.shape[1]).index_copy(0, rows, qkv)
    q, k, v = padded.view(b, length, 3, heads, -1).permute(2, 0, 3, 1, 4)  # each (B, heads, L, head size)
    p = part(lay.attention_dropout).p if training else 0.0
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, dropout_p=p)
    ctx = ctx.transpose(1, 2).reshape(b * length, -1).index_select(0, rows)
    out = part(lay.attention_output)(ctx)
    if lay.attention_output_dropout:
        out = part(lay.attention_output_dropout)(out)
    h = part(lay.attention_norm)(out + x)
    ff = part(lay.ffn_out)(part(lay.activation)(part(lay.ffn_in)(h)))
    return part(lay.output_norm)(part(lay.ffn_dropout)(ff) + h)


def forward_hidden(backbone, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   all_layers: bool, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """The hidden states (embeddings, then every layer's output with ``all_layers``; else the last only),
    (batch, length, hidden) each, computed on the real tokens; zeros at padded positions. ``rows``: the real
    tokens' places in the flattened batch, in order (found here from the mask when not given: on a GPU that
    reads the mask back, a host wait)."""
    b, length = input_ids.shape
    lay = MODEL_TYPES[backbone.config.model_type].packed
    emb = backbone.embeddings(input_ids=input_ids)  # positions and token types as the library sets them
    projection = getattr(backbone, lay.embedding_projection, None) if lay.embedding_projection else None
    if isinstance(projection, nn.Module):  # present only where embedding_size != hidden_size
        emb = projection(emb)  # ELECTRA's factorised embeddings: the library's hidden_states[0] is after it
    if rows is None:
        rows = attention_mask.reshape(-1).nonzero().squeeze(1)
    x = emb.reshape(b * length, -1).index_select(0, rows)
    # keys only: a padded query row is computed and never read (as in the library's SDPA path)
    key_mask = attention_mask.bool()[:, None, None, :]
    heads = backbone.config.num_attention_heads

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t.new_zeros(b * length, t.shape[1]).index_copy(0, rows, t).view(b, length, -1)

    states = [emb] if all_layers else []
    for layer in backbone.get_submodule(lay.layers):
        x = _layer(layer, lay, x, rows, (b, length), key_mask, heads, backbone.training)
        if all_layers:
            states.append(unpack(x))
    return tuple(states) if all_layers else (unpack(x),)

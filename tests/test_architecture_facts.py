"""The facts of transformers model types that csebench.model.model_types states (POSITIONS_AFTER_PADDING,
LAYER_INPUT_MODULE), each proven against the model's own forward on a tiny random config (1 layer, hidden 32)."""

from __future__ import annotations

import pytest
import torch

from csebench.model.model_types import (LAYER_INPUT_MODULE, POSITIONS_AFTER_PADDING, layer_input_module,
                                          position_offset)

pytestmark = pytest.mark.usefixtures("one_thread")
# model types that number from 0 (a sample of the encoders csebench trains), beside those the set names
FROM_ZERO = ("bert", "electra", "albert", "distilbert", "deberta-v2")


def tiny(model_type: str, **extra):
    from transformers import AutoConfig, AutoModel

    kw = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
              max_position_embeddings=40, pad_token_id=1, **extra)
    if model_type == "longformer":
        kw["attention_window"] = 4  # pads a row to a multiple of its window otherwise (512)
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.for_model(model_type, **kw)).eval()
    if model_type == "xmod":
        model.set_default_language(model.config.languages[0])
    return model


@pytest.mark.parametrize("model_type", sorted(POSITIONS_AFTER_PADDING) + list(FROM_ZERO))
def test_position_ids_start_where_the_facts_say(model_type):
    """The model's own forward on a row equals the forward given position ids offset + 0, 1, ...; the other offset
    (0 for those after the padding index, 2 for the rest) does not."""
    model = tiny(model_type)
    offset = position_offset(model.config)
    assert offset == (2 if model_type in POSITIONS_AFTER_PADDING else 0)
    ids = torch.tensor([[0, 5, 6, 7, 9, 11, 2, 3]])
    with torch.no_grad():
        own = model(input_ids=ids).last_hidden_state
        given = model(input_ids=ids, position_ids=torch.arange(8)[None] + offset).last_hidden_state
        other = model(input_ids=ids, position_ids=torch.arange(8)[None] + (2 - offset)).last_hidden_state
    assert torch.equal(own, given)
    assert (own - other).abs().max() > 1e-3


def test_the_usable_positions_follow_the_offset():
    from types import SimpleNamespace

    from csebench.model.encoder import max_positions

    assert max_positions(tiny("mpnet").config) == 38 and max_positions(tiny("bert").config) == 40
    assert max_positions(SimpleNamespace(max_position_embeddings=514, model_type="mpnet", pad_token_id=1)) == 512


@pytest.mark.parametrize("model_type,size", [("albert", 16), ("electra", 16), ("electra", 32), ("bert", 32)])
def test_the_layer_input_module_gives_the_first_layers_input(model_type, size):
    """layer_input_module's output is what the first transformer layer reads (hidden size): after ALBERT's mapping and
    ELECTRA-small's projection of factorised embeddings, the embeddings' own output where nothing projects them."""
    extra = {"embedding_size": size} if model_type in ("albert", "electra") else {}
    model = tiny(model_type, **extra)
    seen = {}
    module = layer_input_module(model)
    first = model.encoder.albert_layer_groups[0] if model_type == "albert" else model.encoder.layer[0]
    h1 = module.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out))
    h2 = first.register_forward_pre_hook(lambda m, args: seen.__setitem__("in", args[0]))
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([[0, 5, 6, 2]]))
    finally:
        h1.remove()
        h2.remove()
    assert seen["out"].shape[-1] == 32 and torch.equal(seen["out"], seen["in"])
    projects = model_type in LAYER_INPUT_MODULE and (model_type == "albert" or size != 32)
    assert (module is model.embeddings) == (not projects)

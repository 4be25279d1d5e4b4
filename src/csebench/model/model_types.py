"""What csebench knows of each transformers ``model_type`` it trains: one table (a leaf module, facts only).

For each model type:

  * ``dropout``: the config names ``training.dropout`` sets, every dropout of the encoder the method trains through
    (embeddings, attention probabilities, attention output, feed-forward). BERT and its copies name them
    ``hidden_dropout_prob`` and ``attention_probs_dropout_prob``; DistilBERT ``dropout`` and ``attention_dropout``;
    ModernBERT ``embedding_dropout``, ``attention_dropout`` (its attention probabilities and output) and
    ``mlp_dropout``. A task head's dropout (``classifier_dropout``, DeBERTa's ``pooler_dropout``) is not the
    encoder's: csebench never runs those heads. tests/test_architecture_matrix.py checks, for every entry, that the
    names reach every ``nn.Dropout`` of the built model.
  * ``packed``: the module paths csebench.model.packed reads to run a layer on the real tokens only, where its
    forward reproduces the library's (proven per model type by tests/test_packed.py); else ``not_packed``: why not.

Beside the table, two facts that reach beyond its model types: which number their positions after the padding
index (``POSITIONS_AFTER_PADDING``: RoBERTa, XLM-R, MPNet...; ``position_offset``), and which feed their first layer
from a projection of factorised embeddings (``LAYER_INPUT_MODULE``: ALBERT, ELECTRA-small; ``layer_input_module``).

The dropout a training run gets (csebench.training.trainer, docs/architectures.md): ``training.dropout`` where it
is set, else ``DEFAULT_DROPOUT`` = 0.1, SimCSE's p (Gao et al. 2021, Sec. 3 and Table 1: "the default dropout rate
p = 0.1"; every method of the zoo trains with it), on every name of the model type. A model whose config turns
dropout off (ModernBERT, nomic-bert and ALBERT default to 0) gets it too: with p = 0 the two views of a sentence
are the same, and a method whose positives come from dropout learns nothing. A model type this table does not know
is refused where the setting would have to reach it (``DropoutSetting.resolve``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from csebench.core.errors import ConfigError

DEFAULT_DROPOUT = 0.1  # SimCSE's p (Gao et al. 2021, Table 1), the BERT/RoBERTa configs' own


@dataclass(frozen=True)
class Layout:
    """Where csebench.model.packed finds the parts of a post-LayerNorm encoder layer (paths from one layer; ``layers``
    and ``embedding_projection`` from the backbone). A layer computes
    ``h = attention_norm(attention_output_dropout(attention_output(attention(query, key, value))) + x)`` and
    ``out = output_norm(ffn_dropout(ffn_out(activation(ffn_in(h)))) + h)``; ``attention_dropout`` is the module whose
    p drops attention probabilities."""

    layers: str
    query: str
    key: str
    value: str
    attention_dropout: str
    attention_output: str
    attention_output_dropout: str | None  # None: no dropout there (DistilBERT)
    attention_norm: str
    ffn_in: str
    activation: str
    ffn_out: str
    ffn_dropout: str
    output_norm: str
    embedding_projection: str | None = None  # a Linear after the embeddings (ELECTRA's factorised embeddings)

    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.query, self.key, self.value, self.attention_dropout, self.attention_output,
                                 self.attention_output_dropout, self.attention_norm, self.ffn_in, self.activation,
                                 self.ffn_out, self.ffn_dropout, self.output_norm) if p)


BERT_LAYOUT = Layout("encoder.layer", "attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.self.dropout", "attention.output.dense", "attention.output.dropout",
                     "attention.output.LayerNorm", "intermediate.dense", "intermediate.intermediate_act_fn",
                     "output.dense", "output.dropout", "output.LayerNorm")
DISTILBERT_LAYOUT = Layout("transformer.layer", "attention.q_lin", "attention.k_lin", "attention.v_lin",
                           "attention.dropout", "attention.out_lin", None, "sa_layer_norm", "ffn.lin1",
                           "ffn.activation", "ffn.lin2", "ffn.dropout", "output_layer_norm")


@dataclass(frozen=True)
class ModelType:
    dropout: tuple[str, ...]  # the config names training.dropout sets
    packed: Layout | None = None  # None: the library's padded forward (not_packed says why)
    not_packed: str = ""


# Two more facts of model types, each proven against the model's own forward on tiny random configs
# (tests/test_architecture_facts.py). They cover model types beyond MODEL_TYPES' (their positions are known
# whatever their dropout names).
#
# Position ids numbered after the padding index: the model's own forward gives the token at column t the position
# padding_idx + 1 + t (transformers' create_position_ids_from_input_ids, padding_idx = config.pad_token_id), so
# max_position_embeddings holds padding_idx + 1 fewer usable positions, and a pass given explicit position ids (the
# template alone of PromptBERT's denoising) must number them so too. BERT, ELECTRA, ALBERT, DistilBERT,
# DeBERTa-v2, ModernBERT and nomic-bert number from 0.
POSITIONS_AFTER_PADDING = frozenset({
    "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text", "roberta-prelayernorm",
    "longformer", "ibert", "xmod", "luke"})
# The module whose output is the first transformer layer's input, where it is not the embeddings module: factorised
# embeddings (embedding_size != hidden_size) are projected to the hidden size after the embeddings. ALBERT always
# maps them (AlbertTransformer's embedding_hidden_mapping_in); ELECTRA has embeddings_project only where the two
# sizes differ (ELECTRA-small), so a model without that module reads the embeddings' output (None: the embeddings).
# DiffCSE's discriminator is conditioned there (objectives/replaced_tokens.py).
LAYER_INPUT_MODULE = {"albert": "encoder.embedding_hidden_mapping_in", "electra": "embeddings_project"}


def position_offset(config) -> int:
    """The position id of a sequence's first token in the model's own forward: padding_idx + 1 for the model
    types of POSITIONS_AFTER_PADDING (2 for RoBERTa and MPNet, whose pad id is 1), else 0."""
    if getattr(config, "model_type", "") not in POSITIONS_AFTER_PADDING:
        return 0
    pad = getattr(config, "pad_token_id", None)
    return (1 if pad is None else int(pad)) + 1  # 1: the pad id every model type of the set defaults to


def layer_input_module(model):
    """The submodule of a backbone whose output is its first layer's input (LAYER_INPUT_MODULE), else its
    ``embeddings``; None where it has neither."""
    path = LAYER_INPUT_MODULE.get(getattr(getattr(model, "config", None), "model_type", ""))
    if path:
        found = model
        for part in path.split("."):
            found = getattr(found, part, None)
        if found is not None:
            return found
    return getattr(model, "embeddings", None)


BERT_DROPOUT = ("hidden_dropout_prob", "attention_probs_dropout_prob")

MODEL_TYPES: dict[str, ModelType] = {
    "bert": ModelType(BERT_DROPOUT, BERT_LAYOUT),
    "roberta": ModelType(BERT_DROPOUT, BERT_LAYOUT),
    "xlm-roberta": ModelType(BERT_DROPOUT, BERT_LAYOUT),
    "camembert": ModelType(BERT_DROPOUT, BERT_LAYOUT),
    "electra": ModelType(BERT_DROPOUT, replace(BERT_LAYOUT, embedding_projection=LAYER_INPUT_MODULE["electra"])),
    "distilbert": ModelType(("dropout", "attention_dropout"), DISTILBERT_LAYOUT),
    "albert": ModelType(BERT_DROPOUT, None, "its layers share weights in groups, another module layout: not proven"),
    "mpnet": ModelType(BERT_DROPOUT, None, "a relative position bias in every layer's attention: not reproduced"),
    "deberta": ModelType(BERT_DROPOUT, None, "disentangled relative attention: not reproduced"),
    "deberta-v2": ModelType(BERT_DROPOUT, None, "disentangled relative attention: not reproduced"),
    "nomic_bert": ModelType(BERT_DROPOUT, None, "rotary positions and a gated MLP: not reproduced"),
    "modernbert": ModelType(("embedding_dropout", "attention_dropout", "mlp_dropout"), None,
                            "transformers' ModernBertModel has no unpadded path of its own here (its dense layers run "
                            "on every position; flash_attention_2, CUDA only, unpads inside the attention alone), and "
                            "its rotary, alternating local and global attention is not reproduced"),
}


def known(model_type: str) -> bool:
    return model_type in MODEL_TYPES


def dropout_config(model_type: str, p: float, where: str = "the backbone") -> dict[str, float]:
    """The config values that give every dropout of a ``model_type`` encoder probability ``p``; a model type this
    table does not know is an error naming it."""
    entry = MODEL_TYPES.get(model_type)
    if entry is None:
        raise ConfigError(f"training.dropout {p} cannot be applied to {where}: csebench does not know the dropout "
                          f"settings of model_type '{model_type}' (it knows {', '.join(sorted(MODEL_TYPES))}; "
                          "csebench.model.model_types)")
    return {name: float(p) for name in entry.dropout}


@dataclass(frozen=True)
class DropoutSetting:
    """What a training run asks of its backbone's dropout: ``p`` (training.dropout; None: not set) and whether the
    run's positives come from dropout alone (``needed``: no objective term makes its own)."""

    p: float | None = None
    needed: bool = True

    def resolve(self, model_type: str, where: str = "the backbone") -> tuple[float | None, str]:
        """(the p to set on the model type's dropout names, None: its config's own; where it comes from)."""
        if model_type in MODEL_TYPES:
            if self.p is not None:
                return float(self.p), "training.dropout"
            return DEFAULT_DROPOUT, f"training.dropout not set: SimCSE's p = {DEFAULT_DROPOUT}"
        if self.p is not None:
            dropout_config(model_type, self.p, where)  # the one-line refusal
        if self.needed:
            raise ConfigError(f"the run's positives come from dropout, and csebench does not know the dropout settings "
                              f"of model_type '{model_type}' ({where}), so training.dropout cannot reach it (it knows "
                              f"{', '.join(sorted(MODEL_TYPES))}; csebench.model.model_types); use a model of a known "
                              "type, or add its config names there")
        return None, f"the backbone's own: model_type '{model_type}' is not in csebench.model.model_types, and the " \
                     "run's positives do not come from dropout"

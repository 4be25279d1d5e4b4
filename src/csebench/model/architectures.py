"""The four paper backbones as published: their architecture facts, by hub id (a leaf module).

Each entry is what the backbone's own config.json on the Hugging Face hub says (bert-base-uncased,
bert-large-uncased: Devlin et al. 2019; roberta-base, roberta-large: Liu et al. 2019), and the ids of
its tokenizer's special tokens. csebench reads them where it cannot read the hub:

  * the rehearsal (csebench.model.standins): each run's backbone is the real class (BertModel,
    RobertaModel) built from these facts with random weights, with an offline tokenizer of the
    right kind;
  * the parameter counts of the GPU-hour plan (csebench.results.plan), checked against these facts and
    against the built models by tests/test_architectures.py;
  * the device benchmark's models (benchmarks/gpu.py).

RoBERTa's position table has max_position_embeddings = 514 rows for 512 tokens: its position ids
start after the padding index (1), so the first two rows are never a token's position
(csebench.model.encoder.max_positions). RoBERTa has one token type (type_vocab_size 1), and its tokenizer
returns no token_type_ids.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from csebench.model.model_types import dropout_config


@dataclass(frozen=True)
class Architecture:
    family: str  # "bert" | "roberta": the transformers model class and the tokenizer kind
    layers: int
    hidden: int
    heads: int
    ffn: int  # intermediate_size
    vocab: int
    max_positions: int  # max_position_embeddings (RoBERTa: 512 tokens + 2)
    type_vocab: int
    layer_norm_eps: float
    special_tokens: dict  # token -> id in the published vocabulary
    pad_token: str
    hidden_act: str = "gelu"
    dropout: float = 0.1  # every dropout of the model (its config names: csebench.model.model_types)
    initializer_range: float = 0.02

    @property
    def pad_id(self) -> int:
        return self.special_tokens[self.pad_token]

    @property
    def model_class(self) -> str:
        return {"bert": "BertModel", "roberta": "RobertaModel", "distilbert": "DistilBertModel"}[self.family]

    @property
    def mlm_class(self) -> str:
        """The transformers masked-language-model class (a generator's: DiffCSE's)."""
        return {"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM", "distilbert": "DistilBertForMaskedLM"}[self.family]

    def config_kwargs(self) -> dict:
        """The transformers config (BertConfig / RobertaConfig / DistilBertConfig) keyword arguments of this architecture."""
        if self.family == "distilbert":  # DistilBertConfig's own names; its LayerNorm eps is fixed at 1e-12 in the model
            return dict(vocab_size=self.vocab, dim=self.hidden, n_layers=self.layers, n_heads=self.heads,
                        hidden_dim=self.ffn, activation=self.hidden_act, **dropout_config(self.family, self.dropout),
                        max_position_embeddings=self.max_positions,
                        sinusoidal_pos_embds=False, initializer_range=self.initializer_range, pad_token_id=self.pad_id)
        kw = dict(vocab_size=self.vocab, hidden_size=self.hidden, num_hidden_layers=self.layers,
                  num_attention_heads=self.heads, intermediate_size=self.ffn, hidden_act=self.hidden_act,
                  **dropout_config(self.family, self.dropout), max_position_embeddings=self.max_positions, type_vocab_size=self.type_vocab,
                  initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps,
                  pad_token_id=self.pad_id)
        if self.family == "roberta":
            kw.update(bos_token_id=self.special_tokens["<s>"], eos_token_id=self.special_tokens["</s>"])
        return kw

    def parameters(self, pooler: bool = True) -> tuple[int, int]:
        """(total, of which the embeddings: token, position, token type and their LayerNorm) of the
        model built from these facts; ``pooler``: with the dense + tanh pooler the hub checkpoints carry."""
        h, f = self.hidden, self.ffn
        embeddings = (self.vocab + self.max_positions + self.type_vocab) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + (h * f + f) + (f * h + h) + 2 * h  # attention, its LN, FFN, its LN
        return embeddings + self.layers * layer + ((h * h + h) if pooler else 0), embeddings

    def mlm_head_parameters(self) -> int:
        """The masked-LM head's weights as a forward pass multiplies them: transform dense + its LayerNorm and the
        vocabulary projection (tied to the token embeddings in the checkpoint, but a matrix product per token)."""
        h = self.hidden
        return (h * h + h) + 2 * h + (h * self.vocab + self.vocab)

    def facts(self) -> dict:
        return {**asdict(self), "model_class": self.model_class}


_BERT_SPECIAL = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
_ROBERTA_SPECIAL = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 50264}

ARCHITECTURES: dict[str, Architecture] = {
    "bert-base-uncased": Architecture("bert", 12, 768, 12, 3072, 30522, 512, 2, 1e-12, _BERT_SPECIAL, "[PAD]"),
    "bert-large-uncased": Architecture("bert", 24, 1024, 16, 4096, 30522, 512, 2, 1e-12, _BERT_SPECIAL, "[PAD]"),
    "roberta-base": Architecture("roberta", 12, 768, 12, 3072, 50265, 514, 1, 1e-5, _ROBERTA_SPECIAL, "<pad>"),
    "roberta-large": Architecture("roberta", 24, 1024, 16, 4096, 50265, 514, 1, 1e-5, _ROBERTA_SPECIAL, "<pad>"),
}
# Masked-language-model generators (DiffCSE's, objectives/replaced_tokens.py), as their hub config.json
# files say: distilbert-base-uncased (Sanh et al. 2019; DistilBertForMaskedLM: 6 layers, dim 768, 12 heads,
# hidden_dim 3072, vocab 30522, 512 positions, no token types, LayerNorm eps 1e-12) and distilroberta-base
# (RobertaForMaskedLM: 6 layers of roberta-base's shape, vocab 50265, 514 positions, one token type).
# They share their backbone's vocabulary (bert-base-uncased's, roberta-base's) and special-token ids.
GENERATORS: dict[str, Architecture] = {
    "distilbert-base-uncased": Architecture("distilbert", 6, 768, 12, 3072, 30522, 512, 0, 1e-12, _BERT_SPECIAL, "[PAD]"),
    "distilroberta-base": Architecture("roberta", 6, 768, 12, 3072, 50265, 514, 1, 1e-5, _ROBERTA_SPECIAL, "<pad>"),
}
# the hub's organisation-qualified ids of the same repositories
ALIASES = {"google-bert/bert-base-uncased": "bert-base-uncased", "google-bert/bert-large-uncased": "bert-large-uncased",
           "FacebookAI/roberta-base": "roberta-base", "FacebookAI/roberta-large": "roberta-large",
           "distilbert/distilbert-base-uncased": "distilbert-base-uncased", "distilbert/distilroberta-base": "distilroberta-base"}


def architecture(model: str) -> Architecture | None:
    """The published architecture of a backbone's hub id (``backbones.X.model``), None for any other model."""
    return ARCHITECTURES.get(ALIASES.get(model, model))


def generator_architecture(model: str) -> Architecture | None:
    """The published architecture of a masked-LM generator's hub id (a term's ``generator``), None for any other."""
    return GENERATORS.get(ALIASES.get(model, model))

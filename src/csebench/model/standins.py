"""Stand-ins for the paper backbones in a rehearsal: their real architecture classes with random weights,
offline (the rehearsal itself: csebench.workflow.rehearse).

No pretrained BERT or RoBERTa can be read without the hub. While a rehearsal is active (``activate``;
``csebench rehearse`` and its tests turn it on, in their own process only), a backbone whose model is
one of the four paper hub ids (csebench.model.architectures) is built as the published architecture:

  * the model: ``BertModel`` or ``RobertaModel`` from a ``BertConfig``/``RobertaConfig`` of the published
    facts (layers, hidden size, heads, FFN, vocabulary, positions, token types, layer-norm eps,
    special-token ids), weights drawn from the run's seed, its pooler detached as for a hub checkpoint;
  * the tokenizer: one of the right kind, trained in seconds with the ``tokenizers`` library on the
    demo corpus: uncased WordPiece whose special tokens have bert-base-uncased's ids ([PAD] 0, [UNK]
    100, [CLS] 101, [SEP] 102, [MASK] 103), or byte-level BPE with RoBERTa's <s> 0, <pad> 1, </s> 2,
    <unk> 3 and <mask> after the learnt vocabulary (no token type ids).

Everything after that is the ordinary code: the Trainer, checkpoints, saving the model folder,
evaluation and the analyses, which load the saved folders as usual. Every result written meanwhile says
so in its provenance (``"rehearsal"``), so rehearsal numbers cannot pass for results.

Trap (transformers 5): ``RobertaTokenizerFast(vocab_file=..., merges_file=...)`` silently ignores the
files, and every sentence becomes ``<s></s>``; the vocabulary and merges are passed as ``vocab=`` and
``merges=`` here (tests/test_architectures.py checks that a sentence has more than 2 tokens).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from csebench.model.architectures import Architecture, architecture, generator_architecture
from csebench.model.model_types import dropout_config
from csebench.core.errors import ConfigError

log = logging.getLogger(__name__)

TOKENIZER_VOCAB = 8192  # learnt entries (special tokens included); the model keeps the published vocabulary size
ROBERTA_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0-3, as published; <mask> follows the learnt vocabulary


@dataclass
class Rehearsal:
    folder: Path  # the offline tokenizers, one folder per family
    corpus: Path  # what they are trained on (the demo corpus)
    depth: int | None = None  # None: the published depth; a number: that many layers (the build-only check)
    shape: dict = field(default_factory=dict)  # config overrides (benchmarks/device.py --tiny: hidden 32); {}: published
    _tokenizers: dict = field(default_factory=dict)

    def describe(self) -> dict:
        out = {"backbones": "random weights, published architectures", "depth": self.depth or "published"}
        return {**out, "shape": dict(self.shape)} if self.shape else out


_ACTIVE: Rehearsal | None = None


def active() -> Rehearsal | None:
    return _ACTIVE


@contextlib.contextmanager
def activate(folder: str | os.PathLike, corpus: str | os.PathLike, depth: int | None = None, shape: dict | None = None):
    """Rehearse within the block: paper backbones are built offline, at random (this process only)."""
    global _ACTIVE
    corpus = Path(corpus)
    if not corpus.is_file():
        raise ConfigError(f"rehearsal: the corpus the offline tokenizers are trained on is missing: {corpus}")
    if depth is not None and depth < 1:
        raise ConfigError(f"rehearsal depth must be >= 1 layer, got {depth}")
    from csebench.core import provenance

    before = _ACTIVE
    _ACTIVE = Rehearsal(Path(folder), corpus, depth, dict(shape or {}))
    provenance.set_rehearsal(_ACTIVE)  # results made inside say so
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = before
        provenance.set_rehearsal(before)


def _sentences(corpus: Path) -> list[str]:
    from csebench.core.corpus import read_corpus

    return read_corpus(corpus)


def train_tokenizer(family: str, sentences: list[str], vocab_size: int = TOKENIZER_VOCAB):
    """A transformers tokenizer of the family's kind (BertTokenizer / RobertaTokenizer), learnt from ``sentences``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if family == "bert":
        from transformers import BertTokenizer

        special = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids as published
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.train_from_iterator(sentences, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special,
                                                                     show_progress=False))
        return BertTokenizer(vocab=tok.get_vocab(), do_lower_case=True)
    if family == "roberta":
        from transformers import RobertaTokenizer

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(sentences, trainers.BpeTrainer(
            vocab_size=vocab_size - 1, special_tokens=ROBERTA_SPECIAL, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        vocab = tok.get_vocab()
        vocab["<mask>"] = len(vocab)
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in json.loads(tok.to_str())["model"]["merges"]]
        # vocab=/merges= (not vocab_file=/merges_file=, which transformers 5 ignores: every sentence would be <s></s>)
        return RobertaTokenizer(vocab=vocab, merges=merges)
    raise ConfigError(f"no offline tokenizer for the model family '{family}'")


def _tokenizer(r: Rehearsal, arch: Architecture):
    """The rehearsal's tokenizer of this family: trained once per folder, then loaded from it."""
    if arch.family not in r._tokenizers:
        from transformers import AutoTokenizer

        where = r.folder / f"tokenizer-{arch.family}"
        if not (where / "tokenizer_config.json").is_file():
            from csebench.core.io import atomic_path

            with atomic_path(where, is_dir=True) as tmp:
                train_tokenizer(arch.family, _sentences(r.corpus)).save_pretrained(tmp)
            log.info("trained the offline %s tokenizer on %s -> %s", arch.family, r.corpus, where)
        r._tokenizers[arch.family] = AutoTokenizer.from_pretrained(str(where))
    return r._tokenizers[arch.family]


def tokenizer_for(model: str):
    """The offline tokenizer standing in for a paper backbone's while rehearsing, else None."""
    arch = architecture(model)
    if _ACTIVE is None or arch is None:
        return None
    return _tokenizer(_ACTIVE, arch)


def model_config(arch: Architecture, dropout: float | None = None, depth: int | None = None, shape: dict | None = None):
    from transformers import BertConfig, DistilBertConfig, RobertaConfig

    if arch.family == "distilbert":  # a generator (DiffCSE's): DistilBertConfig's own names
        kw = arch.config_kwargs()
        shape = dict(shape or {})
        if "hidden_size" in shape:
            kw.update(dim=shape.pop("hidden_size"))
        if "num_attention_heads" in shape:
            kw.update(n_heads=shape.pop("num_attention_heads"))
        if "intermediate_size" in shape:
            kw.update(hidden_dim=shape.pop("intermediate_size"))
        if "num_hidden_layers" in shape:
            kw.update(n_layers=shape.pop("num_hidden_layers"))
        kw.update(shape)
        if dropout is not None:
            kw.update(dropout_config(arch.family, dropout))
        if depth is not None:
            kw["n_layers"] = depth
        return DistilBertConfig(**kw)
    kw = {**arch.config_kwargs(), **(shape or {})}
    if dropout is not None:
        kw.update(dropout_config(arch.family, dropout))
    if depth is not None:
        kw["num_hidden_layers"] = depth
    return (BertConfig if arch.family == "bert" else RobertaConfig)(**kw)


WEIGHTS_SEED = 0  # one set of "pretrained" weights per architecture, whatever the run's seed (as on the hub)


def build_model(arch: Architecture, seed: int = WEIGHTS_SEED, dropout: float | None = None, depth: int | None = None,
                shape: dict | None = None):
    """The published architecture's model class with random weights drawn from ``seed`` (the caller's RNG
    is left as loading a checkpoint leaves it), with its pooler, as a hub checkpoint has one."""
    import torch
    from transformers import BertModel, RobertaModel

    cls = BertModel if arch.family == "bert" else RobertaModel
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _initialised_once(lambda: cls(model_config(arch, dropout, depth, shape), add_pooling_layer=True))


def _initialised_once(make):
    """``make()``'s model with its weights drawn once, by the model class's own initialisation (what a hub
    checkpoint's weights stand in for): torch's module constructors draw every Linear and Embedding first (Kaiming),
    which the class's initialisation then overwrites; skipping that draw is 44% of building BERT-large (4.5 -> 2.5 s on
    a 2-core Zen 4 VM). Same distributions, padding rows zero, buffers as built; other draws than before."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # a transformers without it: draw twice, as the class's constructor does
        return make()
    with no_init_weights():
        model = make()
    model.init_weights()
    return model


def depth_for(cfg, depth: int | None) -> int | None:
    """Layers of a run's backbone in a rehearsal at ``depth`` (None: published): at least what the run's
    settings use (training.num_layers, the layer negatives' layers, two for the two-layer poolers); the
    published depth where that is more, so that a setting past the real model fails as it would."""
    arch = architecture(cfg.backbone.model)
    if arch is None or depth is None:
        return None
    need = max(depth, 2, cfg.training.num_layers or 0)
    negatives = cfg.objectives.get("layer_negatives")
    if negatives:
        need = max(need, (negatives.get("layer") or 0) + 1, (negatives.get("stacked") or 1) + 1)
    return None if need >= arch.layers else need


def backbone_for(model: str, dropout=None):
    """The random real-architecture model standing in for a paper backbone while rehearsing, else None.
    Its weights are the same for every run (WEIGHTS_SEED), as a pretrained checkpoint's are. ``dropout``: a p, or a
    training run's csebench.model.model_types.DropoutSetting (None: the published p)."""
    arch = architecture(model)
    if _ACTIVE is None or arch is None:
        return None
    if dropout is not None and not isinstance(dropout, (int, float)):
        dropout = dropout.resolve(arch.family, model)[0]
    return build_model(arch, WEIGHTS_SEED, dropout, _ACTIVE.depth, _ACTIVE.shape)


def generator_for(model: str):
    """The random real-architecture masked-LM standing in for a generator (DiffCSE's, a term's ``generator``)
    while rehearsing, else None: DistilBertForMaskedLM or RobertaForMaskedLM of the published facts
    (csebench.model.architectures.GENERATORS), weights from WEIGHTS_SEED, at the rehearsal's depth and shape."""
    arch = generator_architecture(model)
    if _ACTIVE is None or arch is None:
        return None
    import torch
    import transformers

    cls = getattr(transformers, arch.mlm_class)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(WEIGHTS_SEED)
        return _initialised_once(lambda: cls(model_config(arch, None, _ACTIVE.depth, _ACTIVE.shape)))

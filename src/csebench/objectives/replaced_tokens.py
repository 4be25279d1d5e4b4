"""DiffCSE (Chuang et al., "DiffCSE: Difference-based Contrastive Learning for Sentence Embeddings", NAACL
2022, arXiv 2204.10298): SimCSE's InfoNCE plus lambda times a conditional replaced-token-detection (RTD) loss.

    x'' = G(mask(x))          a frozen masked-LM generator G fills a masked copy of each view's sentence
    y_t = [x''_t != x_t]      which tokens it changed (padding: 0)
    p_t = softmax(W D(x'' | h)_t)   a discriminator D reads x'' with the sentence embedding h in place
                              of its first position's embedding output; W: a linear layer to 2 classes
    L = L_InfoNCE + lambda mean_{rows, positions} CE(p_t, y_t)

What the released code does (voidism/DiffCSE at commit f724b2c; read, not copied), and so this term:
  * the generator: ``AutoModelForMaskedLM.from_pretrained(--generator_name)``, default distilbert-base-uncased
    (diffcse/models.py line 122); the README (line 101) names distilroberta-base for roberta-base. It runs under
    no_grad and is never updated, but as a submodule of the trained model it is in training mode: its dropout
    is on (this term follows the objective's mode likewise). Its prediction is the argmax (models.py line 184),
    not a sample, at every position, not only the masked ones; position 0 is set back to the [CLS]/<s> id
    (line 185); the discriminator reads the prediction times the attention mask (line 187).
  * the masking: the data collator's BERT recipe (train.py lines 512-544) at ``--masking_ratio`` (0.30 in
    run_diffcse.sh; diffcse/trainers.py line 482 hands it to the collator): each token that is not one of
    the tokenizer's special ids is chosen with that probability (train.py's default fast tokenizer marks every id
    of ``all_special_ids``: [CLS], [SEP], [PAD], [UNK], [MASK]; transformers 4.2.1 tokenization_utils_base.py); 80% of the chosen become the mask token, half the rest a uniformly random id of the
    tokenizer's vocabulary, the rest stay. The two views of a sentence are masked independently (the
    collator masks the flattened batch of both copies, train.py line 499).
  * the discriminator: a second model of the backbone's class (BertModel / RobertaModel without pooler,
    models.py lines 338 and 398) loaded with the pretrained backbone's weights (train.py lines 374 and 388),
    trained with the encoder; here a copy of the encoder's backbone as loaded. Its 2-class head is a fresh
    ``torch.nn.Linear(768, 2)`` (train.py lines 373 and 387: PyTorch's default initialisation).
  * the condition: the modified modeling_bert.py (line 961) / modeling_roberta.py (line 800) replace the
    embedding layer's output (after its LayerNorm and dropout) at position 0 with ``cls_input``: the sentence
    embedding after the training head (``--before_mlp`` off, models.py lines 175-179 and 199), with its
    gradient: the RTD loss trains the encoder through it. That output is what the encoder's first layer reads;
    the released code has BERT and RoBERTa only. On a model whose embeddings are factorised (ALBERT; ELECTRA-small,
    embedding_size 128 < hidden 256) the first layer reads their projection to the hidden size, so the embedding
    (hidden size) replaces position 0 of that projection's output (ALBERT's embedding_hidden_mapping_in, ELECTRA's
    embeddings_project: csebench.model.model_types.LAYER_INPUT_MODULE), the same place in the computation.
  * the loss: ``CrossEntropyLoss`` over all rows x positions of both views, padding included with label 0
    (models.py line 272), times ``--lambda_weight`` (line 273; 0.005 in run_diffcse.sh).
The released trainer clips the gradient norm of all the model's parameters together (HF Trainer, max_grad_norm
1.0); so does csebench's trainer, the encoder's and the terms' trained parameters (the discriminator's). Under DDP each process detects the replaced tokens of its own rows (as the released code does).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from csebench.core.errors import ConfigError
from csebench.model.model_types import layer_input_module
from csebench.objectives.base import ObjectiveTerm, StepContext

RANDOM = "random"  # a tiny random masked LM of the tokenizer's vocabulary (tests and the CPU demo backbone)


@dataclass
class ReplacedTokenSettings:
    generator: str = "distilbert-base-uncased"  # hub id (or folder) of the frozen masked LM; models.py line 122
    weight: float = 0.005  # lambda: run_diffcse.sh LAMBDA
    mask_ratio: float = 0.30  # run_diffcse.sh MASK (train.py's default is 0.15)

    def validate(self, where: str) -> None:
        if not isinstance(self.generator, str) or not self.generator.strip():
            raise ConfigError(f"{where}.generator must be a masked-LM hub id or folder (e.g. distilbert-base-uncased), "
                              f"got {self.generator!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or self.weight < 0:
            raise ConfigError(f"{where}.weight must be a number >= 0, got {self.weight!r}")
        if isinstance(self.mask_ratio, bool) or not isinstance(self.mask_ratio, (int, float)) or not 0 < self.mask_ratio < 1:
            raise ConfigError(f"{where}.mask_ratio must be in (0, 1), got {self.mask_ratio!r}")


def mask_tokens(ids: torch.Tensor, special: torch.Tensor, ratio: float, mask_id: int, vocab: int,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """The collator's masking (train.py mask_tokens): positions not ``special`` are chosen with probability
    ``ratio``; of those, 80% become ``mask_id``, half the others a random id in [0, vocab), the rest stay."""
    kw = {"generator": generator} if generator is not None else {}
    chosen = (torch.rand(ids.shape, device=ids.device, **kw) < ratio) & ~special
    to_mask = (torch.rand(ids.shape, device=ids.device, **kw) < 0.8) & chosen
    to_random = (torch.rand(ids.shape, device=ids.device, **kw) < 0.5) & chosen & ~to_mask
    words = torch.randint(vocab, ids.shape, device=ids.device, **kw)
    out = ids.masked_fill(to_mask, mask_id)
    return torch.where(to_random, words, out)


def generate(generator: nn.Module, masked: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor,
             cls_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the discriminator's input ids, the replaced-token labels): the generator's argmax at every position,
    position 0 set to ``cls_id``, times the attention mask; label 1 where that differs from ``ids`` (not padding)."""
    with torch.no_grad():
        pred = generator(input_ids=masked, attention_mask=mask).logits.argmax(-1)
    pred[:, 0] = cls_id
    labels = ((pred != ids) & mask.bool()).long()
    return pred * mask, labels


def conditioned_logits(discriminator: nn.Module, head: nn.Module, inputs: torch.Tensor, mask: torch.Tensor,
                       condition: torch.Tensor) -> torch.Tensor:
    """(B, L, 2) logits of the discriminator reading ``inputs`` with its first layer's input at position 0
    replaced by ``condition`` (B, H) (the released modeling_bert.py's ``cls_input``, which replaces the embedding
    output the encoder reads): the embeddings' output, or where a model projects factorised embeddings to the
    hidden size (ALBERT, ELECTRA-small) that projection's (csebench.model.model_types.layer_input_module)."""
    def replace_first(module, args, output):
        return torch.cat([condition.unsqueeze(1).to(output.dtype), output[:, 1:]], dim=1)

    hook = layer_input_module(discriminator).register_forward_hook(replace_first)
    try:
        hidden = discriminator(input_ids=inputs, attention_mask=mask, return_dict=True).last_hidden_state
    finally:
        hook.remove()
    return head(hidden)


def rtd_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over every row and position (padding included, label 0), as models.py line 272."""
    return F.cross_entropy(logits.reshape(-1, 2).float(), labels.reshape(-1))


def load_generator(spec: str, tokenizer, seed: int = 0) -> nn.Module:
    """The frozen masked LM: ``random`` (a tiny random BERT MLM of the tokenizer's vocabulary), a generator's
    published architecture with random weights while rehearsing (csebench.model.standins), else from_pretrained."""
    if spec == RANDOM:
        from transformers import BertConfig, BertForMaskedLM

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                              num_attention_heads=2, intermediate_size=64, max_position_embeddings=128))
    from csebench.model.standins import generator_for

    offline = generator_for(spec)
    if offline is not None:
        return offline
    from transformers import AutoModelForMaskedLM

    from csebench.model.encoder import resolve_model_path

    try:
        with torch.random.fork_rng(devices=[]):
            return AutoModelForMaskedLM.from_pretrained(resolve_model_path(spec))
    except OSError as exc:
        from csebench.study.fetch import hub_id, offline as is_offline, offline_hint

        if is_offline() and hub_id(spec):
            raise ConfigError(f"objectives.replaced_token_detection.generator: {offline_hint(spec)}") from None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"objectives.replaced_token_detection.generator: cannot load '{spec}': {first}") from None


class ReplacedTokenDetection(ObjectiveTerm):
    key = "replaced_token_detection"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "diffcse"  # Chuang et al., NAACL 2022 (resources/citations.yaml)
    Settings: ClassVar[type] = ReplacedTokenSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("encoder", "device", "run_config")

    def __init__(self, settings: ReplacedTokenSettings, hidden_size: int, num_layers: int, encoder=None, device=None,
                 run_config=None, generator: nn.Module | None = None):
        super().__init__(settings, hidden_size, num_layers)
        if encoder is None:
            raise ConfigError("objectives.replaced_token_detection needs the encoder (its discriminator is a copy of the backbone)")
        tok = encoder.tokenizer
        backbone = encoder.backbone
        if hidden_size != backbone.config.hidden_size:
            raise ConfigError(f"objectives.replaced_token_detection: the sentence embedding ({hidden_size}) must have the "
                              f"backbone's hidden size ({backbone.config.hidden_size}) to condition the discriminator: "
                              "leave training.projection_dim unset")
        if layer_input_module(backbone) is None:  # before training: nothing to put the sentence embedding on
            raise ConfigError(f"objectives.replaced_token_detection: a {backbone.__class__.__name__} (model_type "
                              f"'{getattr(backbone.config, 'model_type', '?')}') has no embeddings module whose output its "
                              "first layer reads, where DiffCSE conditions the discriminator on the sentence embedding; "
                              "add its module to csebench.model.model_types.LAYER_INPUT_MODULE")
        # the discriminator: the pretrained backbone's weights, trained with the encoder (train.py lines 374, 388)
        self.discriminator = copy.deepcopy(backbone)
        if getattr(self.discriminator, "pooler", None) is not None:
            self.discriminator.pooler = None
        self.head = nn.Linear(backbone.config.hidden_size, 2)  # train.py line 387: torch.nn.Linear(768, 2)
        seed = int(getattr(run_config, "seed", 0) or 0)
        gen = generator if generator is not None else load_generator(settings.generator, tok, seed)
        gen_vocab = gen.config.vocab_size
        if gen_vocab < len(tok):
            raise ConfigError(f"objectives.replaced_token_detection.generator '{settings.generator}' has a vocabulary of "
                              f"{gen_vocab} ids, the backbone's tokenizer {len(tok)}: the generator must share the "
                              "backbone's vocabulary (distilbert-base-uncased for BERT, distilroberta-base for RoBERTa)")
        for p in gen.parameters():
            p.requires_grad_(False)
        # kept out of the module's state: frozen and re-read from the hub, it does not enter checkpoints
        self.__dict__["generator"] = gen.to(device) if device is not None else gen
        self.mask_id = tok.mask_token_id
        self.cls_id = tok.cls_token_id
        self.vocab = len(tok)
        self.special_ids = sorted(set(tok.all_special_ids))
        if self.mask_id is None or self.cls_id is None:
            raise ConfigError("objectives.replaced_token_detection: the backbone's tokenizer has no mask or [CLS] token")
        self.amp_dtype = None
        if device is not None and run_config is not None:
            from csebench.model.encoder import autocast_dtype

            self.amp_dtype = autocast_dtype(run_config.training.precision, torch.device(device))

    def _special(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.isin(ids, torch.tensor(self.special_ids, device=ids.device))

    def extra_loss(self, ctx: StepContext) -> torch.Tensor:
        s = self.settings
        b = ctx.z1.shape[0]
        rows = {"view1": ctx.z1, "view2": ctx.z2[ctx.positive_offset: ctx.positive_offset + b]}
        gen = self.generator
        gen.train(self.training)  # the released generator is a submodule of the trained model: dropout on
        if next(gen.parameters()).device != ctx.z1.device:
            gen.to(ctx.z1.device)
        logits, labels = [], []
        amp = torch.autocast(ctx.z1.device.type, dtype=self.amp_dtype) if self.amp_dtype else _Null()
        with amp:
            for view, z in rows.items():
                ids, mask = ctx.inputs[view]
                masked = mask_tokens(ids, self._special(ids) | ~mask.bool(), s.mask_ratio, self.mask_id, self.vocab)
                inputs, y = generate(gen, masked, mask, ids, self.cls_id)
                logits.append(conditioned_logits(self.discriminator, self.head, inputs, mask, z).reshape(-1, 2))
                labels.append(y.reshape(-1))
        return s.weight * rtd_loss(torch.cat(logits), torch.cat(labels))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

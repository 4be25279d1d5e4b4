"""PromptBERT (Jiang et al., "PromptBERT: Improving BERT Sentence Embeddings with Prompts", arXiv
2201.04337): the template representation and template denoising. An input transform plus a pooler.

Representation: the sentence x is put in a template, ``[CLS] prefix x suffix [SEP]`` with the mask
token in the suffix, and represented by the last layer's hidden state h at that mask token
(csebench.model.prompts). Unsupervised training makes the two views with two different templates
(view 1: template 1, view 2 and any other view: template 2) instead of two dropout masks alone, and
removes the template's own contribution (template denoising):

    h_i = h(template(x_i)) - h(template(x = empty, positions of a |x_i|-token sentence))

the second term being the mask state of the template alone, its suffix's position ids shifted by the
sentence's length, in the same (training-mode) forward as the model; it keeps its gradient. The
training head (SimCSE's MLP, training only) follows.

Evaluation, as released (kongds/Prompt-BERT @690ba6e): the dev scores that select the checkpoint during
training (STS-B dev, and SICK-R dev of the selected one) are denoised with template 1 (``dev_denoise``,
by default as ``denoise``): the released trainer's ``sentemb_forward`` subtracts the template-only mask
state whenever ``--mask_embedding_sentence_delta`` is on and ``--mask_embedding_sentence_delta_no_delta_eval``
is off (its default; prompt_bert/models.py 290-302 and 364-368, train.py 184-198, run.sh unsup-bert /
unsup-roberta pass the first and not the second), in eval mode, positions 0-based plus the sentence's
length. The test evaluation encodes with template 1 and no denoising, without the head: run.sh's
``eargs`` for the unsupervised runs give evaluation.py no ``--mask_embedding_sentence_delta``.
``dev_denoise: false`` selects on the plain template representation (this term's behaviour before).

Facts from the released code (kongds/Prompt-BERT, run.sh and prompt_bert/models.py; read, not copied):
templates (BERT) ``This sentence of "[X]" means [MASK] .`` and ``This sentence : "[X]" means [MASK] .``,
(RoBERTa) ``This sentence : '[X]' means <mask> .`` and ``The sentence : '[X]' means <mask> .``;
batch 256, lr 1e-5, 1 epoch, max length 32, fp16, temperature 0.05 for both backbones.
Differences kept selectable:
  * positions: the released delta passes position ids 0.. (``positions: released``) also for RoBERTa,
    whose own position ids start after the padding index (as MPNet's and the other model types of
    csebench.model.model_types.POSITIONS_AFTER_PADDING); ``positions: model`` (default) gives the
    template alone the ids the model gives it inside a sentence.
  * length: the released code truncates the sentence to 32 tokens before adding the template; ours
    wraps the corpus rows as tokenized for training (at most max_seq_length tokens with [CLS]/[SEP]).
Under DDP the denoising pass would run outside the DDP wrapper: one process only with ``denoise``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from csebench.core.errors import ConfigError
from csebench.model.model_types import position_offset
from csebench.model.prompts import template_ids, template_only, wrap
from csebench.objectives.base import ObjectiveTerm

# the released unsupervised templates (run.sh, unsup-bert / unsup-roberta): (prefix, suffix) of templates 1 and 2
TEMPLATES = {
    "bert": (('This sentence of "', '" means {mask} .'), ('This sentence : "', '" means {mask} .')),
    "roberta": (("This sentence : '", " ' means{mask}."), ("The sentence : '", " ' means{mask}.")),
}
POSITIONS = ("model", "released")


def _template(value: Any, where: str) -> tuple[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"prefix", "suffix"} or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: expected {{prefix: TEXT, suffix: TEXT with {{mask}}}}, got {value!r}")
    prefix, suffix = value["prefix"], value["suffix"]
    if "{mask}" in prefix or suffix.count("{mask}") != 1:  # the text alone says so: refused with the settings, no tokenizer
        raise ConfigError(f"{where}: the suffix must hold {{mask}} exactly once and the prefix none (got {prefix!r}, {suffix!r})")
    return prefix, suffix


def resolve_templates(settings: "PromptSettings", tokenizer) -> dict[int, tuple[str, str]]:
    """Template 1 (view 1, evaluation) and template 2 (the other views) as texts: the settings' own, else the
    released ones of the tokenizer's family."""
    family = settings.family or ("roberta" if tokenizer.mask_token == "<mask>" else "bert")
    t1 = _template(settings.template, "objectives.prompt.template") or TEMPLATES[family][0]
    t2 = _template(settings.template2, "objectives.prompt.template2") or TEMPLATES[family][1]
    return {1: t1, 2: t2 if settings.different_templates else t1}


@dataclass
class PromptSettings:
    template: Any = None  # {prefix, suffix} of template 1 (view 1, evaluation); None: the released one for the tokenizer
    template2: Any = None  # template 2 (view 2 and other views); None: the released one
    different_templates: bool = True  # false: template 1 for every view (dropout alone makes the positive)
    denoise: bool = True  # template denoising (PromptBERT's unsupervised objective)
    dev_denoise: bool | None = None  # denoise the dev scores that select the checkpoint; None: as denoise (released)
    positions: str = "model"  # model | released (0-based position ids for the template alone, also on RoBERTa)
    family: str | None = None  # bert | roberta: whose released templates are the default (None: from the tokenizer)

    def validate(self, where: str) -> None:
        _template(self.template, f"{where}.template")
        _template(self.template2, f"{where}.template2")
        if self.positions not in POSITIONS:
            raise ConfigError(f"{where}.positions: unknown '{self.positions}' (valid: {', '.join(POSITIONS)})")
        if self.family is not None and self.family not in TEMPLATES:
            raise ConfigError(f"{where}.family: unknown '{self.family}' (valid: {', '.join(TEMPLATES)})")


class PromptTemplates(ObjectiveTerm):
    key = "prompt"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "promptbert"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = PromptSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("encoder",)
    view_order: ClassVar[int] = 10  # after the terms that change or add content (negations, repetitions)
    adds = "its templates"

    @classmethod
    def own_positives(cls, settings: PromptSettings) -> str | None:
        return "view 2 in another template" if settings.different_templates else None

    @classmethod
    def added_tokens(cls, settings: PromptSettings, tokenizer, max_seq_length: int) -> int:
        """The longer template's prefix and suffix: [CLS] prefix x suffix [SEP] is that much longer than the row."""
        t1, t2 = resolve_templates(settings, tokenizer).values()
        ids = (template_ids(tokenizer, *t1, "objectives.prompt.template"),
               template_ids(tokenizer, *t2, "objectives.prompt.template2"))
        return max(len(pre) + len(suf) for pre, suf in ids)

    def __init__(self, settings: PromptSettings, hidden_size: int, num_layers: int, encoder=None):
        super().__init__(settings, hidden_size, num_layers)
        if encoder is None:
            raise ConfigError("objectives.prompt needs the encoder (the trainer passes it)")
        self._encoder = [encoder]  # a plain reference: the encoder is not a submodule of the objective
        tok = encoder.tokenizer
        t1, t2 = resolve_templates(settings, tok).values()
        self.templates = {1: template_ids(tok, *t1, "objectives.prompt.template"),
                          2: template_ids(tok, *t2, "objectives.prompt.template2")}
        self.mask_id, self.pad_id = tok.mask_token_id, tok.pad_token_id or 0
        self.cls_id = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        self.sep_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        # the template alone numbered as the model numbers a sequence (RoBERTa, MPNet: from padding_idx + 1)
        self.position_offset = position_offset(encoder.backbone.config) if settings.positions == "model" else 0
        # evaluation: template 1; the dev scores that select the checkpoint denoised (released trainer), the test not
        dev = settings.denoise if settings.dev_denoise is None else settings.dev_denoise
        encoder.set_prompt({"prefix": t1[0], "suffix": t1[1]}, dev_denoise=self.position_offset if dev else None)
        self._cols: dict[str, torch.Tensor] = {}
        self._lengths: dict[str, torch.Tensor] = {}
        self._which: dict[str, int] = {}
        self._widths: dict[str, int] = {}

    def template_of(self, view: str) -> int:
        return 1 if view == "view1" else 2

    def input_views(self, views, indices, step):
        out = {}
        self._cols, self._lengths, self._which, self._widths = {}, {}, {}, {}
        for name, (ids, mask) in views.items():
            which = self.template_of(name)
            pre, suf = self.templates[which]
            out[name] = wrap(ids, mask, pre, suf, self.mask_id, self.pad_id)[:2]
            self._cols[name] = wrap_cols(mask, pre, suf, self.mask_id)
            self._lengths[name] = mask.long().sum(1) - 2  # the sentence's tokens, without [CLS] and [SEP]
            self._which[name] = which
            self._widths[name] = ids.shape[1]  # before wrapping: at most width - 2 sentence tokens
        return out

    def delta(self, which: int, lengths: int, device) -> torch.Tensor:
        """(lengths, H): the template's mask state alone for sentence lengths 0 .. lengths-1."""
        pre, suf = self.templates[which]
        ids, pos, col = template_only(pre, suf, self.mask_id, self.cls_id, self.sep_id, lengths, self.position_offset, device)
        out = self._encoder[0].backbone(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos,
                                        return_dict=True)
        return out.last_hidden_state[:, col]

    def pool(self, encoder, hidden_states, ids, mask, segments):
        last = hidden_states[-1]
        cols = torch.cat([self._cols[name] for name in segments])
        rep = last[torch.arange(last.shape[0], device=last.device), cols]
        if not (self.settings.denoise and self.training):
            return rep
        if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            raise RuntimeError("objectives.prompt with denoise runs on one process only")
        # one pass per template over the sentence lengths its views can hold (0 .. width - 2 of the rows before
        # wrapping, known without a host read); the wrapped width would reach past the position table
        parts, deltas = [], {}
        for name, rows in segments.items():
            which = self._which[name]
            if which not in deltas:
                width = max(self._widths[n] for n in segments if self._which[n] == which)
                deltas[which] = self.delta(which, width - 1, last.device)
            parts.append(rep[rows] - deltas[which][self._lengths[name].clamp(min=0)].to(rep.dtype))
        return torch.cat(parts)


def wrap_cols(mask: torch.Tensor, prefix: list[int], suffix: list[int], mask_id: int) -> torch.Tensor:
    """The mask token's column in each wrapped row (csebench.model.prompts.wrap)."""
    return mask.long().sum(1) - 1 + len(prefix) + suffix.index(mask_id)

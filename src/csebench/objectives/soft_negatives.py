"""SNCSE (Wang et al., "SNCSE: Contrastive Learning for Unsupervised Sentence Embedding with Soft
Negative Samples", arXiv 2201.05979): the negation of each training sentence is a soft negative, brought
in by the bidirectional margin loss (BML) on the difference of two cosines,

    Delta_i = cos(h_i, h_i^neg) - cos(h_i, h_i^+)
    L_BML   = mean_i [ ReLU(Delta_i + alpha) + ReLU(-Delta_i - beta) ]      (zero iff -beta <= Delta_i <= -alpha)
    L       = L_InfoNCE + lambda L_BML

h_i^neg is the negated sentence, encoded as a third view (``negation``; in the same forward pass, with
dropout, through the training head). Defaults alpha = 0.1, beta = 0.3, lambda = 1e-3 (BERT; 5e-4 for
RoBERTa, a per-backbone setting in params.yaml) are the released code's (Sense-GVT/SNCSE,
train_SNCSE.py and simcse/models.py); the paper's text is not readable from here, so they are not
checked against it. The released code builds SNCSE on PromptBERT's template representation (two
templates, no denoising): method ``sncse`` composes this term with ``prompt`` (objectives/prompt.py).

Negations are generated before training, deterministically, by ``negate`` (rules below). The released
code parses every sentence with spaCy's en_core_web_sm (generate_soft_negative_samples.py); no parser
is installed here, so the rules keep its order but decide without a parse:

  1. a sentence holding the word "not" loses its first "not";
  2. else "not" goes after the first auxiliary, modal or form of "be"/"do"/"have" used as one
     (AUXILIARIES below; the released code's list of special words plus do/does/did/has/have/had);
  3. else "Not" goes before the sentence (the released code's fallback; it does do-support on a
     parsed main verb, "runs" -> "does not run", which needs a tagger and a lemmatizer).
Tokens are split on whitespace and joined with single spaces; matching ignores case and a trailing
comma or period; nothing else of the sentence changes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.objectives.base import ObjectiveTerm, StepContext

log = logging.getLogger(__name__)

AUXILIARIES = ("am", "is", "are", "was", "were", "can", "could", "will", "would", "shall", "should", "may", "must",
               "might", "do", "does", "did", "has", "have", "had")
_WORD = re.compile(r"^[\"'(\[]*(.*?)[\"').,;:!?\]]*$")


def _bare(token: str) -> str:
    return _WORD.match(token).group(1).lower()


def negate(sentence: str) -> str:
    """The soft negative of ``sentence`` by the three rules of the module docstring (deterministic)."""
    tokens = sentence.split()
    if not tokens:
        return "Not"
    bare = [_bare(t) for t in tokens]
    if "not" in bare:
        del tokens[bare.index("not")]
        return " ".join(tokens)
    for k, word in enumerate(bare):
        if word in AUXILIARIES:
            tokens.insert(k + 1, "not")
            return " ".join(tokens)
    return " ".join(["Not", *tokens])


@dataclass
class SoftNegativeSettings:
    alpha: float = 0.1  # lower margin: Delta <= -alpha (released code)
    beta: float = 0.3  # upper margin: Delta >= -beta (released code)
    weight: float = 1.0e-3  # lambda (released code: 1e-3 BERT, 5e-4 RoBERTa)

    def validate(self, where: str) -> None:
        if self.alpha < 0 or self.beta < 0:
            raise ConfigError(f"{where}: alpha and beta must be >= 0, got {self.alpha}, {self.beta}")
        if self.alpha > self.beta:
            raise ConfigError(f"{where}: alpha ({self.alpha}) must be <= beta ({self.beta}): the loss is zero for -beta <= Delta <= -alpha")
        if self.weight < 0:
            raise ConfigError(f"{where}.weight must be >= 0, got {self.weight}")


def bml_loss(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """The bidirectional margin loss over rows (mean), in float32."""
    delta = F.cosine_similarity(anchor.float(), negative.float(), dim=-1) - F.cosine_similarity(anchor.float(), positive.float(), dim=-1)
    return (F.relu(delta + alpha) + F.relu(-delta - beta)).mean()


class SoftNegatives(ObjectiveTerm):
    key = "soft_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "sncse"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = SoftNegativeSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("corpus_path", "tokenizer", "run_config")

    def __init__(self, settings: SoftNegativeSettings, hidden_size: int, num_layers: int, corpus_path=None,
                 tokenizer=None, run_config=None, negations: list[str] | None = None):
        super().__init__(settings, hidden_size, num_layers)
        self._tokens = None
        self._pad = 0
        if negations is None and corpus_path is not None:
            from csebench.core.corpus import read_corpus  # the trainer's own reading: row k is corpus sentence k

            sentences = read_corpus(corpus_path)
            negations = [negate(s) for s in sentences]
            empty = [s for s, n in zip(sentences, negations) if not n.strip()]
            if empty:  # its soft negative would be [CLS] [SEP]: said, with the count, not left silent
                shown = ", ".join(repr(s) for s in empty[:3]) + (", ..." if len(empty) > 3 else "")
                log.warning("objectives.soft_negatives: %d of %d corpus sentences cannot be negated (%s): the sentence is "
                            "the word \"not\" alone, which negating removes, so its soft negative is the empty sentence",
                            len(empty), len(sentences), shown)
        if negations is not None and tokenizer is not None:
            from csebench.model.tokens import TokenizedCorpus

            length = run_config.training.max_seq_length if run_config is not None else 32
            enc = tokenizer(negations, truncation=True, max_length=length, padding=False, return_attention_mask=False)
            self._tokens = TokenizedCorpus.from_lists(enc["input_ids"])
            self._pad = tokenizer.pad_token_id or 0

    def input_views(self, views, indices, step):
        if self._tokens is None:
            raise ConfigError("objectives.soft_negatives needs the training corpus and tokenizer (the trainer passes them)")
        ids, mask = (torch.from_numpy(np.asarray(a)) for a in self._tokens.batch(np.asarray(indices), self._pad))
        device = views["view1"][0].device
        return {**views, "negation": (ids.to(device, dtype=views["view1"][0].dtype), mask.to(device, dtype=views["view1"][1].dtype))}

    def extra_loss(self, ctx: StepContext) -> torch.Tensor:
        if ctx.world_size > 1:
            raise RuntimeError("objectives.soft_negatives runs on one process only")
        s = self.settings
        z2 = ctx.z2[ctx.positive_offset : ctx.positive_offset + ctx.z1.shape[0]]
        return s.weight * bml_loss(ctx.z1, z2, ctx.extra["negation"], s.alpha, s.beta)

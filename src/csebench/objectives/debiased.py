"""DCLR (Zhou et al., "Debiased Contrastive Learning of Unsupervised Sentence Representations",
arXiv 2205.00656, ACL 2022): instance weights from a frozen complementary model against false
negatives, and noise-based negatives against anisotropy.

The computation (``loss: released``, the default) is the authors' released code, RUCAIBox/DCLR at
commit e2c3430 (read, not copied): ``simcse/models.py``, ``cl_vat_forward`` lines 676-710. With
s_ij = sim(h_i, h_j^+)/tau over the B in-batch candidates and s_ik = sim(h_i, n_k)/tau over k noise
vectors, each row i of the B x (B + k) logits:

    a_ij = 0 if sim_C(x_i, x_j) > phi and j != i else 1        (sim_C: the complementary model's cosine;
                                                                 models.py 705-707: the positive never)
    p_i  = softmax_j( a_ij s_ij  ++  s_ik )                     (models.py 708: a false negative's logit is
                                                                 multiplied by 0, so e^0 = 1 stays in the sum)
    loss = mean over all B x (B + k) entries of  -[y log p + (1 - y) log(1 - p)],
           y = 1 on the positive column (j = i), 0 elsewhere (noise columns included)   (models.py 704, 709-710)

The noise (models.py 677-696): g ~ N(0, I), k = int(noise_ratio x B) vectors (``--noise_times``), moved
``noise_steps`` times (``--pgd``, 4 by default in train.py line 145; run.sh does not set it)
    g <- g + beta grad / ||grad||,  grad = d CE([s_ij ++ sim(h_i, g)/tau], i) / d g,   beta = 1e-3,
the cross-entropy's in-batch logits without the instance weights; NaN entries set to 0; no gradient
reaches the encoder through the noise (the n_k are constants of the final loss).

Selectable readings (``loss: infonce``, ``false_negatives: dropped``, ``noise_steps: 1``,
``noise_weighted: true``) give the form this term had before the released code was read, from the README
and abstract alone: InfoNCE over [a_ij-weighted in-batch logits ++ noise logits],
    l_i = -log  e^{s_ii} / ( sum_{j != i, a_ij = 1} e^{s_ij} + sum_k e^{s_ik} + e^{s_ii} ),
false negatives dropped (-inf) rather than zeroed, one noise step whose loss includes the weights.
``false_negatives: zeroed`` under InfoNCE adds -s_ij to the zeroed logits (exactly 0, no gradient).

``attention: unmasked`` runs the encoder as the released code does, with no attention mask: its
``cl_forward_denoised`` and ``sentemb_forward_vat`` (models.py 561-567, 758-764) call the encoder's layers with
the embeddings and ``noise`` (None) in the mask's place, so every position attends to the batch's padding too,
in training and in the dev scores that select the checkpoint (its trainer's ``sent_emb`` forward); the test
evaluation loads the saved model with its mask. Default ``masked``: nothing readable here shows that the printed
numbers were trained with that forward (docs/methods.md, DCLR).

The complementary model is a frozen SimCSE run of the same suite, read through the teacher machinery
DistillCSE uses (``teachers: {run: simcse}``; ``csebench teacher-cache`` caches its corpus embeddings), in the
representation ``teacher_representation`` names: ``eval`` (the default), its evaluation embedding, the raw [CLS]
state; ``training``, its [CLS] state through the MLP head the run saved, which is what the released code compares
(teacher/training.npy, ``csebench teacher-cache --representation training``).
Every difference from the released code (the same list as docs/methods.md, DCLR):
  * sim_C, head against raw [CLS]: there the frozen checkpoint's ``encoder.pooler`` output, which for the SimCSE
    checkpoint run.sh names (princeton-nlp's, converted by SimCSE's simcse_to_huggingface.py, which renames
    ``mlp`` to ``pooler``) is SimCSE's trained MLP head over [CLS]; here, by default, the raw [CLS] state of a
    SimCSE run (``teacher_representation: training`` reads the run's saved head instead: the ``dclr`` method of
    params.yaml sets it);
  * sim_C's views: there the frozen model's outputs on the batch's two dropout views (in training mode, run
    without an attention mask too) compared against phi x 20 = phi / tau at tau = 0.05; here the cosine of
    the run's cached corpus embeddings (dropout-free, masked) against phi, a SimCSE run of the suite rather than
    the released SimCSE checkpoint;
  * the representation: there the backbone's pretrained pooler (dense + tanh, trained along) over [CLS], then the
    MLP head in training, and that pooler's output without the head in the dev scores (models.py 767); here
    the [CLS] state, then the MLP head in training and the raw [CLS] state in the dev scores, as SimCSE (the
    test evaluation reads the raw [CLS] state in both);
  * attention (default): masked here, unmasked there (``attention: unmasked`` selects it; the dev batches' padding
    then follows csebench's length-sorted batches, not SentEval's);
  * precision: fp32 there (run.sh's --fp16 commented out), ``precision: auto`` here;
  * one process only here (its large rows train on 4 GPUs from SimCSE-large checkpoints: not run). In run.sh's
    large rows (``--is_base False``) the complementary model is still SimCSE-base (``--c_model_name_or_path
    unsup-simcse-bert-base-uncased`` / ``-roberta-base``) with its head: ``is_base`` only skips the trained
    model's extra MLP (models.py 588: ``if is_base and is_fix == False``), so the large model trains on its
    own pooler, i.e. the SimCSE-large head it starts from, and no MLP is added.
The paper's own equations were not readable here (only its opening); the settings' sources are in
docs/methods.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.study.teacherspec import TEACHER_REPRESENTATIONS, parse_teachers
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix
from csebench.objectives.contrastive import contrastive_logits


LOSSES = ("released", "infonce")
FALSE_NEGATIVES = ("zeroed", "dropped")
ATTENTIONS = ("masked", "unmasked")


@dataclass
class DebiasedSettings:
    teachers: Any = None  # the complementary model(s): {run: simcse, seeds: [..]} (runs of the same suite)
    loss: str = "released"  # released (softmax, then binary cross-entropy over every entry) | infonce
    false_negatives: str = "zeroed"  # zeroed (logit x 0, released) | dropped (-inf: out of the softmax)
    threshold: float = 0.9  # phi: run.sh BERT-base (RoBERTa-base: 0.85, params.yaml by_backbone)
    noise_ratio: float = 1.0  # k = int(noise_ratio x batch size): run.sh --noise_times, BERT-base (RoBERTa-base: 2.5)
    noise_std: float = 1.0  # sigma: torch.randn in models.py 677
    step: float = 1.0e-3  # beta of each gradient step on the noise: models.py 694
    noise_steps: int = 4  # gradient steps on the noise: train.py --pgd default (run.sh does not set it)
    noise_weighted: bool = False  # the noise steps' loss with the instance weights (released: without)
    seed: int | None = None  # base seed of the noise draws; None: the run's seed
    attention: str = "masked"  # masked | unmasked: the encoder attends to padding in training and dev selection (released)
    # the complementary model's representation: eval (its evaluation embedding: raw [CLS] for a SimCSE run) | training
    # (its pooler and saved MLP head: a converted SimCSE checkpoint's pooler_output, what the released code compares)
    teacher_representation: str = "eval"

    def validate(self, where: str) -> None:
        parse_teachers(self.teachers, where)
        if self.loss not in LOSSES:
            raise ConfigError(f"{where}.loss: unknown '{self.loss}' (valid: {', '.join(LOSSES)})")
        if self.false_negatives not in FALSE_NEGATIVES:
            raise ConfigError(f"{where}.false_negatives: unknown '{self.false_negatives}' (valid: {', '.join(FALSE_NEGATIVES)})")
        if self.attention not in ATTENTIONS:
            raise ConfigError(f"{where}.attention: unknown '{self.attention}' (valid: {', '.join(ATTENTIONS)})")
        if self.teacher_representation not in TEACHER_REPRESENTATIONS:
            raise ConfigError(f"{where}.teacher_representation: unknown '{self.teacher_representation}' "
                              f"(valid: {', '.join(TEACHER_REPRESENTATIONS)})")
        if not -1 <= self.threshold <= 1:
            raise ConfigError(f"{where}.threshold must be a cosine in [-1, 1], got {self.threshold}")
        if self.noise_ratio < 0:
            raise ConfigError(f"{where}.noise_ratio must be >= 0, got {self.noise_ratio}")
        if self.noise_std <= 0:
            raise ConfigError(f"{where}.noise_std must be > 0, got {self.noise_std}")
        if self.step < 0:
            raise ConfigError(f"{where}.step must be >= 0, got {self.step}")
        if self.noise_steps < 0:
            raise ConfigError(f"{where}.noise_steps must be >= 0, got {self.noise_steps}")

    def check_with_training(self, where: str, training) -> None:
        # a compiled step pads every batch to a multiple of its width, which unmasked attention would attend to
        if self.attention == "unmasked" and training.compile:
            raise ConfigError(f"{where}.attention: unmasked attends to the padding, which training.compile widens: "
                              "not with training.compile")


def false_negative_mask(teacher_cos: torch.Tensor, labels: torch.Tensor, threshold: float) -> torch.Tensor:
    """(B, N) True where the complementary model calls an in-batch negative a false negative (a_ij = 0:
    its cosine above phi, strictly, as models.py 705 compares); the positive column is never masked."""
    mask = teacher_cos > threshold
    mask[torch.arange(mask.shape[0], device=mask.device), labels] = False
    return mask


def perturb_noise(noise: torch.Tensor, inbatch_logits: torch.Tensor, anchors: torch.Tensor, labels: torch.Tensor,
                  temperature: float, step: float, steps: int = 1) -> torch.Tensor:
    """``steps`` times n <- n + step * grad / ||grad|| (per vector; NaN entries set to 0, as models.py 696),
    grad of the cross-entropy over [in-batch logits as given, noise logits] (constants but the noise)
    with respect to the noise vectors."""
    if step == 0 or steps == 0:
        return noise
    inbatch = inbatch_logits.detach().float()
    fixed = anchors.detach()
    n = noise.detach()
    for _ in range(steps):
        with torch.enable_grad():
            g = n.clone().requires_grad_(True)
            logits = torch.cat([inbatch, cosine_matrix(fixed, g) / temperature], dim=1)
            (grad,) = torch.autograd.grad(F.cross_entropy(logits, labels), g)
        n = n + step * (grad / grad.norm(dim=-1, keepdim=True))
        n = torch.where(torch.isnan(n), torch.zeros_like(n), n)
    return n.detach()


def released_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over every entry of the (B, C) logits of the binary cross-entropy of softmax(logits) against
    one-hot ``labels`` (models.py 708-710). log(1 - p) is log1p(-p); each entry takes only its own term, so
    a positive whose p rounds to 1 gives 0 * log(0) = NaN neither here nor anywhere the released code is finite.
    Nor in the gradient: log(1 - p) is computed at the negative entries only (the positive's input is -inf there,
    whose log1p(-e^x) is 0 with gradient 0), so a positive that takes the whole softmax (a row whose negatives are
    all zeroed by a complementary model that calls every other sentence a false negative, beside noise far from
    it) gives its row's loss, about 0, and a finite gradient, where log1p(-p) at the positive was -inf, its
    gradient inf, and the where's 0 x inf a NaN."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    y = torch.zeros_like(logp, dtype=torch.bool)
    y[torch.arange(logp.shape[0], device=logp.device), labels] = True
    neg = torch.log1p(-logp.masked_fill(y, float("-inf")).exp().clamp(max=1.0))
    return -torch.where(y, logp, neg).mean()


class DebiasedNegatives(ObjectiveTerm):
    key = "debiased_negatives"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "dclr"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = DebiasedSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("run_config", "corpus_size", "teacher_cache", "corpus_path", "tokenizer",
                                                  "encoder")

    def __init__(self, settings: DebiasedSettings, hidden_size: int, num_layers: int, run_config=None,
                 corpus_size=None, teacher_cache=None, corpus_path=None, tokenizer=None, bank=None, encoder=None):
        super().__init__(settings, hidden_size, num_layers)
        if encoder is not None:  # training and the dev selection attend as the setting says (the saved model: masked)
            encoder.unmasked_attention = settings.attention == "unmasked"
        run_seed = int(getattr(run_config, "seed", 0) or 0)
        self.base_seed = settings.seed if settings.seed is not None else run_seed
        if bank is None:
            from csebench.objectives.distillation import open_teacher_bank

            bank = open_teacher_bank(self.key, settings.teachers, run_seed, run_config, corpus_size, teacher_cache,
                                     corpus_path, tokenizer, representation=settings.teacher_representation)
        self.bank = bank
        self._masked = torch.zeros(())

    def false_negatives(self, ctx: StepContext) -> torch.Tensor:
        """(B, N) True where a_ij = 0."""
        with torch.no_grad():
            cos = self.bank.logits(ctx.indices, ctx.all_indices, ctx.z1.device)
            mask = false_negative_mask(cos.to(ctx.z1.device), ctx.labels, self.settings.threshold)
        self._masked = mask.float().sum(1).mean().detach()
        return mask

    def weighted(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The in-batch logits with a_ij applied: zeroed (logit x 0) or dropped (-inf)."""
        if self.settings.false_negatives == "zeroed":
            return logits * (~mask).to(logits.dtype)
        return logits.masked_fill(mask, float("-inf"))

    def negative_weights(self, ctx: StepContext) -> torch.Tensor | None:
        """InfoNCE only: (B, N) log-weights of the in-batch columns, -inf where a_ij = 0 (dropped) or
        -s_ij (zeroed: the logit becomes exactly 0, and carries no gradient)."""
        if self.settings.loss != "infonce":
            return None
        mask = self.false_negatives(ctx)
        if self.settings.false_negatives == "dropped":
            return torch.zeros(mask.shape, device=ctx.z1.device).masked_fill(mask, float("-inf"))
        return torch.where(mask, -contrastive_logits(ctx), torch.zeros((), device=ctx.z1.device))

    def noise(self, ctx: StepContext) -> torch.Tensor:
        k = int(self.settings.noise_ratio * ctx.z2.shape[0])
        gen = torch.Generator(device=ctx.z1.device)
        state = np.random.SeedSequence([self.base_seed, ctx.step, 0xDC1]).generate_state(1, dtype=np.uint64)[0]
        gen.manual_seed(int(state) & ((1 << 63) - 1))
        return torch.randn(k, ctx.z1.shape[1], generator=gen, device=ctx.z1.device) * self.settings.noise_std

    def noise_logits(self, ctx: StepContext, inbatch: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
        """(B, k) logits of the anchors against the moved noise vectors; None without noise."""
        if ctx.world_size > 1:
            raise RuntimeError("objectives.debiased_negatives runs on one process only")
        g = self.noise(ctx)
        if g.shape[0] == 0:
            return None
        target = self.weighted(inbatch, mask) if self.settings.noise_weighted else inbatch
        n = perturb_noise(g, target, ctx.z1, ctx.labels, ctx.temperature, self.settings.step, self.settings.noise_steps)
        return cosine_matrix(ctx.z1, n) / ctx.temperature

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        if self.settings.loss != "infonce":
            return None
        with torch.no_grad():
            inbatch = contrastive_logits(ctx)
        mask = self.false_negatives(ctx) if self.settings.noise_weighted else torch.zeros_like(inbatch, dtype=torch.bool)
        return self.noise_logits(ctx, inbatch, mask)

    def replaces_contrastive(self, contrastive: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """``loss: released``: the released loss in place of InfoNCE (other terms' extra negative columns and
        log-weights do not reach it: no method of params.yaml composes DCLR with such a term)."""
        if self.settings.loss != "released":
            return contrastive
        inbatch = contrastive_logits(ctx)
        mask = self.false_negatives(ctx)
        noise = self.noise_logits(ctx, inbatch, mask)
        logits = self.weighted(inbatch, mask)
        if noise is not None:
            logits = torch.cat([logits, noise], dim=1)
        return released_loss(logits, ctx.labels)

    def logs(self) -> dict[str, float]:
        return {}

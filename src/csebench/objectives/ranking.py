"""RankCSE (Liu et al., "RankCSE: Unsupervised Sentence Representations Learning via Learning to
Rank", arXiv 2305.16726, ACL 2023): listwise ranking distillation from frozen teachers plus ranking
consistency between the two dropout views.

    s_ij = cos(h_i, h_j^+),  t_ij = the teachers' cosine of sentences i and j (mean over teachers)
    L = L_InfoNCE + beta L_consistency + gamma L_rank

  ListNet (``loss: listnet``), over j != i:
      L_rank = mean_i  - sum_{j != i} softmax_j(t_ij / tau_t) log softmax_j(s_ij / tau_s)
  ListMLE (``loss: listmle``), over all j (the positive included), pi_i sorting t_i. descending:
      L_rank = mean_i  sum_k [ log sum_{m >= k} e^{s_{i pi(m)}/tau_s} - s_{i pi(k)}/tau_s ]
      (``positions: mean`` divides each row's sum by its B positions; ``listmle_eps``, default 1e-7: the log is
      log(sum_{m >= k} e^{s_{i pi(m)}/tau_s - c_i} + eps) + c_i, c_i the row's largest s_ij/tau_s)
  consistency: Jensen-Shannon divergence of the rows of softmax(s / tau) and softmax(s^T / tau)
      (view 1 against view 2, and view 2 against view 1), mean over rows.

Teachers: the paper distils from two teachers (SimCSE and DiffCSE models); the zoo's rows distil from the
suite's DiffCSE and SimCSE runs of the student's seed (``teachers: [{run: ...-diffcse}, {run: ...-simcse}]``),
and a SimCSE run alone stays selectable (``teachers: {run: ...-simcse}``), read through DistillCSE's teacher
machinery (cached corpus embeddings). Several teachers are averaged with equal weights (the paper weighs two
by alpha; equal weights = alpha 0.5).

Sources: the paper's text is not readable from here. The code read (perceptiveshawty/RankCSE, a
community implementation by someone who is not an author, its README says; rankcse/models.py,
trainers.py, run_rankcse.sh, at its head 17c5226) gives: the student's scores are cos / --temp (models.py's
cls.sim, the InfoNCE logits themselves) and only the teacher's are divided by --tau2 (trainers.py 508, 526-527),
both 0.05 in run_rankcse.sh, so tau_s = --temp and tau_t = --tau2 (the ListNet and ListMLE classes build
Similarity(tau2) and, for ListNet, Similarity(tau2 / 2) objects that their forwards never use); beta = gamma = 1,
ListMLE, batch 128, lr 3e-5, fp16; its README quotes the paper for a ListNet teacher temperature tau2 / 2. Its
ListMLE adds 1e-7 inside the log (log(sum + 1e-7) after the row's largest logit is taken out): ``listmle_eps``,
1e-7 by default, 0 the plain log (this term's earlier default). Its ListMLE sums each row's loss over
the ranked positions and averages the rows (``positions: sum``): what its head computes, since its commit
3f04480 ("Fix ListMLE loss reduction"); its earlier revision 338e00d averaged over the positions as well
(``positions: mean``, a term B times smaller at batch B). Neither revision printed a number: the printed
rows are the authors' withdrawn ICLR 2023 submission's, whose code is not this one (docs/methods.md).
Defaults here: ListMLE summed over positions with eps 1e-7, tau_s 0.05, tau_t 0.05 (listnet: the README's paper
value 0.025 is selectable), beta = gamma = 1: not checked against the paper's text.

The community code's consistency term (``consistency: released``) is not the JS divergence: it
clamps log((p+q)/2) at 1e-7 from below, which turns every entry into 1e-7, so it computes
0.5 (mean_i sum_j p log p + mean_i sum_j q log q) - 1e-7: the negative mean entropy of the two rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from csebench.core.errors import ConfigError
from csebench.study.teacherspec import parse_teachers
from csebench.objectives.base import ObjectiveTerm, StepContext, cosine_matrix

LOSSES = ("listnet", "listmle")
CONSISTENCIES = ("js", "released", "none")
REDUCTIONS = ("mean", "sum")


@dataclass
class RankingSettings:
    teachers: Any = None  # {run: simcse, seeds: [..]}: runs of the same suite
    loss: str = "listmle"  # listnet | listmle
    student_temperature: float = 0.05  # tau_s: the community code's --temp (its student scores are the InfoNCE logits)
    teacher_temperature: float = 0.05  # tau_t: the community code's --tau2 (ListNet in the paper, per its README: tau_s / 2)
    weight: float = 1.0  # gamma
    consistency_weight: float = 1.0  # beta
    consistency: str = "js"  # js (the paper's divergence) | released (what the community code computes) | none
    positions: str = "sum"  # ListMLE over the ranked positions: sum (community code's head) | mean (its revision 338e00d)
    listmle_eps: float = 1.0e-7  # ListMLE: log(sum + eps), the community code's 1e-7 (caps each position's loss); 0: the plain log

    def validate(self, where: str) -> None:
        parse_teachers(self.teachers, where)
        for name, valid in (("loss", LOSSES), ("consistency", CONSISTENCIES), ("positions", REDUCTIONS)):
            if getattr(self, name) not in valid:
                raise ConfigError(f"{where}.{name}: unknown '{getattr(self, name)}' (valid: {', '.join(valid)})")
        for name in ("student_temperature", "teacher_temperature"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{where}.{name} must be > 0, got {getattr(self, name)}")
        for name in ("weight", "consistency_weight", "listmle_eps"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{where}.{name} must be >= 0, got {getattr(self, name)}")


def listnet(student: torch.Tensor, teacher: torch.Tensor, tau_s: float, tau_t: float) -> torch.Tensor:
    """Top-1 ListNet over the in-batch candidates other than the positive (the diagonal)."""
    eye = torch.eye(student.shape[0], dtype=torch.bool, device=student.device)
    log_p = F.log_softmax((student.float() / tau_s).masked_fill(eye, float("-inf")), dim=1)
    q = F.softmax((teacher.float() / tau_t).masked_fill(eye, float("-inf")), dim=1)
    return -(q * log_p.masked_fill(eye, 0.0)).sum(1).mean()


def listmle(student: torch.Tensor, teacher: torch.Tensor, tau_s: float, positions: str = "sum",
            eps: float = 1.0e-7) -> torch.Tensor:
    """ListMLE: the negative log-likelihood of the teacher's order under the student's Plackett-Luce model, each
    row's positions summed (``positions: mean``: averaged), the rows averaged (``eps``: log(sum + eps) after
    subtracting the row's maximum, as the community code)."""
    order = teacher.float().argsort(dim=1, descending=True)
    s = student.float().gather(1, order) / tau_s
    s = s - s.max(dim=1, keepdim=True).values
    tail = torch.logcumsumexp(s.flip(1), dim=1).flip(1)  # log sum_{m >= k} e^{s_m}
    if eps:
        tail = torch.logaddexp(tail, torch.full_like(tail, math.log(eps)))
    per = tail - s
    return (per.mean(1) if positions == "mean" else per.sum(1)).mean()


def js_consistency(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean over rows of JS(softmax(a_i), softmax(b_i)) for logit rows a, b."""
    log_p, log_q = F.log_softmax(a.float(), dim=1), F.log_softmax(b.float(), dim=1)
    p, q = log_p.exp(), log_q.exp()
    log_m = torch.log((p + q) / 2)
    return 0.5 * ((p * (log_p - log_m)).sum(1) + (q * (log_q - log_m)).sum(1)).mean()


def released_consistency(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """The community code's Divergence on rows softmax(a), softmax(b) clamped at eps, as computed."""
    p, q = F.softmax(a.float(), dim=1).clamp(min=eps), F.softmax(b.float(), dim=1).clamp(min=eps)
    log_m = torch.log(0.5 * (p + q)).clamp(min=eps)
    kl = lambda target: (target * (target.log() - log_m)).sum() / target.shape[0]  # KLDivLoss(log_m, log target, batchmean)
    return 0.5 * (kl(p) + kl(q))


class RankingDistillation(ObjectiveTerm):
    key = "ranking_distillation"  # its name in params.yaml's objectives (csebench.objectives.TERMS finds it here)
    citation = "rankcse"  # its paper: resources/citations.yaml
    Settings: ClassVar[type] = RankingSettings
    extra_init_args: ClassVar[tuple[str, ...]] = ("run_config", "corpus_size", "teacher_cache", "corpus_path", "tokenizer")

    def __init__(self, settings: RankingSettings, hidden_size: int, num_layers: int, run_config=None,
                 corpus_size=None, teacher_cache=None, corpus_path=None, tokenizer=None, bank=None):
        super().__init__(settings, hidden_size, num_layers)
        if bank is None:
            from csebench.objectives.distillation import open_teacher_bank

            bank = open_teacher_bank(self.key, settings.teachers, int(getattr(run_config, "seed", 0) or 0), run_config,
                                     corpus_size, teacher_cache, corpus_path, tokenizer)
        self.bank = bank

    def extra_loss(self, ctx: StepContext) -> torch.Tensor:
        if ctx.world_size > 1:
            raise RuntimeError("objectives.ranking_distillation runs on one process only")
        s = self.settings
        sim = cosine_matrix(ctx.z1, ctx.z2)  # (B, B) student cosines, view 1 x view 2
        with torch.no_grad():
            teacher = self.bank.logits(ctx.indices, ctx.all_indices, sim.device)
        if s.loss == "listnet":
            rank = listnet(sim, teacher, s.student_temperature, s.teacher_temperature)
        else:
            rank = listmle(sim, teacher, s.student_temperature, s.positions, s.listmle_eps)
        loss = s.weight * rank
        if s.consistency != "none" and s.consistency_weight:
            a, b = sim / ctx.temperature, sim.T / ctx.temperature  # rows: h_i vs view 2; h_i^+ vs view 1
            cons = js_consistency(a, b) if s.consistency == "js" else released_consistency(a, b)
            loss = loss + s.consistency_weight * cons
        return loss

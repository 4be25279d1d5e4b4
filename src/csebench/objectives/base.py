"""The contract between the training loop and the objective terms.

The loop encodes two dropout views of a batch (one forward of the doubled batch) and hands
each term a StepContext. A term may
  * add extra negative columns to the InfoNCE denominator (``extra_negatives``: GS-InfoNCE's
    Gaussian vectors, SSCL's intermediate-layer representations), and/or
  * add a weighted loss of its own (``extra_loss``: IS-CSE's smoothing loss, DistillCSE's
    distillation loss),
  * change what is encoded (``input_views``: ESimCSE's repeated-word positives, PromptBERT's templates,
    SNCSE's negated sentences as a third view) and how it is pooled (``pool``: PromptBERT's [MASK] state).
So any combination of methods is a config entry: the loop never knows which method runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn
from csebench.model.encoder import no_autocast


@dataclass
class StepContext:
    z1: torch.Tensor  # (B, D) anchors: view 1 of this rank's sentences, after the training head
    z2: torch.Tensor  # (N, D) positives/in-batch candidates: view 2 of all ranks' sentences (N = B on one process)
    temperature: float
    step: int  # 0-based optimizer step
    total_steps: int
    indices: torch.Tensor  # (B,) corpus indices of this rank's sentences (on the host: teachers are looked up there)
    all_indices: torch.Tensor  # (N,) corpus indices of z2's rows (on the host)
    positive_offset: int = 0  # row of z1[0]'s positive in z2 (rank * B under DDP)
    layer_z1: dict[int, torch.Tensor] = field(default_factory=dict)  # hidden_states index -> (B, D)
    layer_z2: dict[int, torch.Tensor] = field(default_factory=dict)  # hidden_states index -> (N, D)
    num_layers: int = 12
    world_size: int = 1
    rank: int = 0
    # views beyond the two (input_views): name -> (B, D) this rank's rows, after the training head
    extra: dict[str, torch.Tensor] = field(default_factory=dict)
    # what was encoded: view name -> (input ids, attention mask) on the device, this rank's rows
    inputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    @property
    def labels(self) -> torch.Tensor:
        return torch.arange(self.z1.shape[0], device=self.z1.device) + self.positive_offset

    @property
    def progress(self) -> float:
        """Fraction of training done, in [0, 1] (IS-CSE's cosine alpha schedule)."""
        return self.step / max(self.total_steps, 1)


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise cosine similarity, (n, d) x (m, d) -> (n, m), computed in float32.

    Autocast is switched off here: under a bf16/fp16 autocast region the product would otherwise
    run (and round) in the low precision whatever the inputs' dtype, and logits = cos / 0.05 turn
    bf16's ~4e-3 relative rounding into errors of ~0.08 (torch's own cosine_similarity is on
    autocast's float32 list for the same reason)."""
    with no_autocast(a.device):
        a = nn.functional.normalize(a.float(), dim=-1)
        b = nn.functional.normalize(b.float(), dim=-1)
        return a @ b.T


class ObjectiveTerm(nn.Module):
    """One method's contribution. Its name in params.yaml is its ``key`` (declared by the class, written
    there only: ``csebench.objectives.TERMS`` finds it in the source). Subclasses set ``Settings``: a
    dataclass of its hyperparameters with their defaults, built from params.yaml by ``schema.from_dict``,
    which calls its ``validate(where)`` (ranges, choices) if it has one; ``validate_objectives`` then
    calls ``check_with_training(where, training)``, if it has one, for checks against the run's training
    settings (e.g. IS-CSE's push-first buffer against the batch size). ``extra_init_args`` names the keyword arguments the trainer passes besides settings and shapes."""

    Settings: ClassVar[type] = object
    key: ClassVar[str] = ""  # each term class declares its own: its params.yaml name
    citation: ClassVar[str] = ""  # and its paper: a key of resources/citations.yaml's papers (required with key)
    # order among the terms' input_views: content changes (repetition, negation) before templates
    view_order: ClassVar[int] = 0
    extra_init_args: ClassVar[tuple[str, ...]] = ()
    adds: ClassVar[str] = ""  # what added_tokens counts, for the message of a row past the position table

    def __init__(self, settings: Any, hidden_size: int, num_layers: int):
        super().__init__()
        self.settings = settings
        self.hidden_size = hidden_size
        self.num_layers = num_layers

    @classmethod
    def own_positives(cls, settings: Any) -> str | None:
        """How this term makes a sentence's positive other than by dropout (a second template, repeated words, the
        anchor as its own positive), in a few words; None: the positive is the same sentence as the anchor, so the
        two views differ by their dropout masks alone. A run none of whose terms makes its own positives (SimCSE and
        most of the zoo) checks at its first step that its two views differ (csebench.training.trainer)."""
        return None

    @classmethod
    def added_tokens(cls, settings: Any, tokenizer, max_seq_length: int) -> int:
        """At most how many tokens this term adds to a corpus row of ``max_seq_length`` tokens before it is encoded
        (a template, repeated words): they count against the backbone's position table too, which the trainer
        checks before tokenizing (encoder.check_max_seq_length). ``adds`` says what they are."""
        return 0

    def intermediate_layers(self) -> list[int]:
        """hidden_states indices whose pooled representation this term needs in StepContext."""
        return []

    def extra_negatives(self, ctx: StepContext) -> torch.Tensor | None:
        """(B, K) logits appended to the InfoNCE denominator: already divided by the temperature
        and shifted by log(weight) where the equation weights them."""
        return None

    def extra_loss(self, ctx: StepContext) -> torch.Tensor | None:
        """A scalar added to the total loss, weight included."""
        return None

    def negative_weights(self, ctx: StepContext) -> torch.Tensor | None:
        """(B, N) log-weights added to the in-batch InfoNCE logits (-inf drops a negative: DCLR's
        instance weights); the positive's column must stay 0."""
        return None

    def contrastive_context(self, ctx: StepContext) -> StepContext:
        """The context the InfoNCE loss (and ``replaces_contrastive``) reads: another term may change its
        candidates, e.g. the released SSCL-BERT compares the anchors with themselves (default: unchanged)."""
        return ctx

    def replaces_contrastive(self, contrastive: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """Hook for terms that change how the InfoNCE loss itself is combined (default: unchanged)."""
        return contrastive

    def input_views(self, views: dict[str, tuple[torch.Tensor, torch.Tensor]], indices: torch.Tensor,
                    step: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """What the encoder sees this step: view name -> (ids, mask), padded (B, L) tensors of this rank's
        sentences (``indices``: their corpus indices, on the host). "view1" (anchors) and "view2"
        (positives) always exist; a term may replace them or add views (rows in ``StepContext.extra``).
        Default: unchanged (both views are the sentence itself: dropout is the augmentation)."""
        return views

    def pool(self, encoder, hidden_states: tuple[torch.Tensor, ...], ids: torch.Tensor, mask: torch.Tensor,
             segments: dict[str, slice]) -> torch.Tensor | None:
        """The pooled (B_all, H) representation of the encoded rows (``segments``: view name -> its rows),
        before the training head; None: the backbone's pooler (at most one term pools)."""
        return None

    def logs(self) -> dict[str, float]:
        """Scalars to log for the last step (e.g. the current alpha)."""
        return {}

    def waiting(self) -> str | None:
        """Why this term has not acted yet, where it waits for something that builds up over steps (a buffer
        or queue that fills, a weight schedule still at 0): said when a run ends without the term having
        changed its loss (train.json's terms_fired, the rehearsal's failure line). None: nothing to wait for."""
        return None

    @classmethod
    def at_rehearsal_scale(cls, settings: Any, batch_size: int, steps: int) -> dict:
        """Settings that let this term act within the rehearsal's few steps of a small batch (`csebench rehearse`:
        a buffer of one batch, say), keeping the code path the run's own settings select; merged over the run's
        settings there only (docs/rehearsal.md lists them). Default: none needed."""
        return {}

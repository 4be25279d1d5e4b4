"""The one training loop. Methods enter only through the composed Objective (objectives/).

Per step: take B sentences, run the doubled batch [x; x] through the encoder in one forward
pass (different dropout masks = the two views), pool (+ MLP head), build a StepContext and
ask the Objective for the loss. STS-B dev is evaluated every ``eval_steps``; the best model is
saved in Hugging Face + sentence-transformers format. A resumable checkpoint (model, optimizer,
scheduler, RNG states, data position, objective state such as IS-CSE's buffer, best dev score)
is written atomically every ``checkpoint_steps`` as safetensors + JSON with a manifest (checkpoint.py,
never a pickle); rerunning the same command resumes from it once the manifest checks out.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from csebench.training import checkpoint
from csebench.core import distributed, provenance
from csebench.study.resolve import RunConfig
from csebench.training.data import load_tokenized_corpus
from csebench.training.teachers import model_teacher_caches
from csebench.evaluation.locate import senteval_root
from csebench.model.encoder import (MODEL_FILES, SentenceEncoder, build_encoder, check_max_seq_length, pool,
                                    model_files, autocast_dtype, dropout_in_effect)
from csebench.model.model_types import DEFAULT_DROPOUT, DropoutSetting
from csebench.core.errors import TrainingError
from csebench.evaluation.sts import (PairSet, cap_pairs, load_sickr, load_stsb, load_sts_pairs, spearman100,
                                     sts_pair_similarities)
from csebench.core.io import atomic_path, dumps_json, remove_path, replace_dir, staged_outputs, write_csv, write_json
from csebench.training.loader import BatchLoader
from csebench.objectives import added_tokens, own_positives, term_packages
from csebench.objectives.compose import EMBEDDINGS, Objective
from csebench.objectives.base import StepContext

log = logging.getLogger(__name__)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def seed_step_generators(seed: int, device: torch.device) -> None:
    """Seed what a training step draws from: Python's, NumPy's and torch's default generators of the host and
    of ``device``. The same state as ``set_seed`` for those generators, without torch.manual_seed's work for
    every other device type it knows (a stack trace captured per lazily seeded type, thousands of Python
    calls a step)."""
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()].manual_seed(seed)


def step_seed(seed: int, rank: int, step: int) -> int:
    """The RNG seed of one optimizer step on one rank: dropout masks (and anything else drawn from
    the global generators) are a pure function of (seed, rank, step), so a resumed run draws
    exactly what the uninterrupted run drew, and DDP ranks draw different masks."""
    digest = hashlib.sha256(f"csebench-step:{seed}:{rank}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def configure_determinism() -> None:
    """Deterministic kernels where PyTorch has them (warn, not fail, where it has none).
    CUBLAS_WORKSPACE_CONFIG must be set before cuBLAS initialises for deterministic GEMMs.

    Deterministic mode also fills every new allocation with NaN by default, a debugging aid for kernels that
    read memory they never wrote: none of the step's kernels does (the losses and weights are bitwise the same
    without it, tests/test_step_cost.py), and the fills were about 1,300 extra kernels a step on BERT-base.
    These are process-wide switches: a Trainer sets them for its life only (``DeterministicMode``)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def _determinism_state() -> dict:
    """What configure_determinism changes, as it stands now."""
    return {"env": os.environ.get("CUBLAS_WORKSPACE_CONFIG"), "algorithms": torch.are_deterministic_algorithms_enabled(),
            "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "fill": torch.utils.deterministic.fill_uninitialized_memory,
            "benchmark": torch.backends.cudnn.benchmark, "cudnn": torch.backends.cudnn.deterministic}


def _restore_determinism(state: dict) -> None:
    if state["env"] is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = state["env"]
    torch.use_deterministic_algorithms(state["algorithms"], warn_only=state["warn_only"])
    torch.utils.deterministic.fill_uninitialized_memory = state["fill"]
    torch.backends.cudnn.benchmark = state["benchmark"]
    torch.backends.cudnn.deterministic = state["cudnn"]


# trainers holding deterministic mode now, the process's settings from before the first, and a generation that
# release_all() moves on (a holder of an earlier generation then releases nothing)
_DETERMINISM: list = [0, None, 0]


def release_all_determinism() -> None:
    """Give the process its own determinism settings back now, whoever still holds them: for a process that dropped
    trainers without closing them (a notebook cell that failed, a test session between tests). The holders left
    release nothing later."""
    if _DETERMINISM[0]:
        _restore_determinism(_DETERMINISM[1])
    _DETERMINISM[:] = [0, None, _DETERMINISM[2] + 1]


class DeterministicMode:
    """configure_determinism for a block (a context manager) or until ``release()``: the process's own settings
    (deterministic algorithms and their warn-only flag, the NaN fill of new memory, cuDNN's two flags,
    CUBLAS_WORKSPACE_CONFIG) come back when the last holder releases them, so a notebook, `csebench rehearse` or
    `csebench.cli.main(["train", ...])` leaves the process as it found it (torch.empty(4) holds NaN again where
    deterministic mode was on before). Holders may overlap (two Trainers): the settings stay until the last one
    is released. Releasing twice does nothing."""

    def __init__(self):
        if _DETERMINISM[0] == 0:
            _DETERMINISM[1] = _determinism_state()
        _DETERMINISM[0] += 1
        self.held, self.generation = True, _DETERMINISM[2]
        configure_determinism()

    def release(self) -> None:
        if not self.held or self.generation != _DETERMINISM[2]:
            return
        self.held = False
        _DETERMINISM[0] -= 1
        if _DETERMINISM[0] == 0:
            _restore_determinism(_DETERMINISM[1])
            _DETERMINISM[1] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", distributed.local_rank())
    return torch.device("cpu")


def data_order(n: int, batch_size: int, seed: int, epoch: int, world_size: int = 1) -> list[np.ndarray]:
    """The global batches (sentence indices) of one epoch; a pure function of (seed, epoch), so a
    resumed run sees exactly the same batches, whatever the number of processes. ``batch_size``
    is the global batch: under DDP each of the world_size ranks takes an equal slice. A last
    partial batch is cut to a multiple of world_size and kept if it has at least 2 sentences
    (and 1 per rank)."""
    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(n)
    steps = n // batch_size
    batches = [perm[i * batch_size : (i + 1) * batch_size] for i in range(steps)]
    rest = perm[steps * batch_size :]
    rest = rest[: (len(rest) // world_size) * world_size]
    if len(rest) >= max(2, world_size):
        batches.append(rest)
    return batches


class DevEvaluator:
    """STS-B dev Spearman for model selection (SimCSE's metric_for_best_model=stsb_spearman), and SICK-R
    dev (SentEval's SICK_trial.txt, 500 pairs) for the selected checkpoint: SimCSE's trainer, which
    IS-CSE's forks, reports eval_avg_sts = the mean of the two (IS-CSE Table 4's "Avg. STS development").
    With ``dev_pairs`` (training.dev_set: the dev rows of your own STS data) checkpoints are selected on
    that set instead, named ``dev_name``; no SentEval file is read and no SICK-R dev is scored.
    ``metric`` (training.dev_metric) "avg_sts" selects on eval_avg_sts itself (DCLR's run.sh,
    --metric_for_best_model avg_sts): both sets are scored at every evaluation."""

    def __init__(self, senteval_dir: str | os.PathLike, batch_size: int, precision: str = "auto",
                 max_pairs: int | None = None, dev_pairs: PairSet | None = None, dev_name: str | None = None,
                 metric: str | None = None):
        # max_pairs (training.dev_max_pairs, CPU demo only): the seeded subset eval-sts's cap would draw
        self.name = dev_name
        self.metric = metric or "stsb"
        if self.metric == "avg_sts" and dev_pairs is not None:
            raise TrainingError(f"training.dev_metric avg_sts needs STS-B and SICK-R dev, not dev_set '{dev_name}'")
        if dev_pairs is None:
            root = senteval_root(senteval_dir)
            self.pairs = cap_pairs(load_stsb(root, "dev"), max_pairs)
            self.sickr_pairs = cap_pairs(load_sickr(root, "dev"), max_pairs)
        else:
            self.pairs, self.sickr_pairs = cap_pairs(dev_pairs, max_pairs), None
        self.batch_size = batch_size
        self.precision = precision

    @classmethod
    def for_run(cls, cfg: RunConfig, senteval_dir: str | os.PathLike, dev_file: str | os.PathLike | None = None):
        """The run's development set: STS-B dev, or the file of its training.dev_set."""
        t = cfg.training
        if t.dev_set and dev_file is None:
            raise TrainingError(f"training.dev_set is '{t.dev_set}' for {cfg.run_id}: pass its file (data.{cfg.data_name}.sts_pairs)")
        pairs = load_sts_pairs(dev_file, "dev") if t.dev_set else None
        return cls(senteval_dir, t.eval_batch_size, t.eval_precision, t.dev_max_pairs, pairs, t.dev_set, t.dev_metric)

    @property
    def column(self) -> str:
        """dev_curve.csv's (first) score column."""
        return "stsb_dev" if self.name is None else "dev_spearman"

    @property
    def columns(self) -> list[str]:
        """dev_curve.csv's score columns: with dev_metric avg_sts, SICK-R dev and the mean beside STS-B dev."""
        return [self.column, "sickr_dev", "avg_sts_dev"] if self.metric == "avg_sts" else [self.column]

    @property
    def selects_on_avg(self) -> bool:
        return self.metric == "avg_sts"

    @property
    def selection(self) -> str:
        """The name of the score that selects the checkpoint (the training log's)."""
        return "avg_sts_dev" if self.selects_on_avg else self.column

    def select(self, encoder: SentenceEncoder) -> tuple[float, float, float]:
        """(the selection score, STS-B dev, SICK-R dev) of the current weights; SICK-R dev is NaN (scored later,
        for the selected checkpoint only) unless the selection reads it."""
        stsb = self(encoder)
        if not self.selects_on_avg:
            return stsb, stsb, math.nan
        sickr = self.sickr(encoder)
        return (stsb + sickr) / 2, stsb, sickr

    def _spearman(self, encoder: SentenceEncoder, pairs) -> float:
        sims = sts_pair_similarities(lambda s: encoder.encode(s, batch_size=self.batch_size, precision=self.precision,
                                                              selection=True),
                                     pairs)
        return spearman100(sims, pairs.scores)

    def __call__(self, encoder: SentenceEncoder) -> float:
        return self._spearman(encoder, self.pairs)

    def sickr(self, encoder: SentenceEncoder) -> float:
        return self._spearman(encoder, self.sickr_pairs) if self.sickr_pairs is not None else math.nan

    def scores(self, best: float, sickr: float) -> dict:
        """train.json's development scores of the selected checkpoint (null where not finite): ``best`` its
        STS-B dev (the best one seen unless dev_metric is avg_sts, which adds "dev_metric")."""
        score = round(best, 4) if math.isfinite(best) else None
        if self.name is not None:
            return {"dev_set": self.name, "dev_best": score, "dev_pairs": len(self.pairs.scores),
                    "dev_duplicates_dropped": len(self.pairs.duplicates_dropped)}
        extra = {"dev_metric": "avg_sts"} if self.selects_on_avg else {}
        return {"stsb_dev_best": score, **dev_summary(best, sickr), **extra}

    def capped(self) -> dict:
        """train.json's note of the CPU demo's subsets (training.dev_max_pairs): not the papers' dev scores."""
        if self.name is not None:
            return {"dev_protocol": "capped"}
        return {"stsb_dev_pairs": len(self.pairs.scores), "sickr_dev_pairs": len(self.sickr_pairs.scores),
                "stsb_dev_protocol": "capped"}


def dev_summary(stsb: float, sickr: float) -> dict:
    """train.json's development scores of the selected checkpoint: STS-B dev, SICK-R dev and their mean
    (None where a score is not finite)."""
    ok = math.isfinite(stsb) and math.isfinite(sickr)
    return {"sickr_dev": round(sickr, 4) if math.isfinite(sickr) else None,
            "avg_sts_dev": round((stsb + sickr) / 2, 4) if ok else None}


@dataclass
class TrainState:
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best_dev: float = -math.inf
    best_step: int = -1
    elapsed: float = 0.0
    best_sickr_dev: float = math.nan  # SICK-R dev of the best STS-B dev checkpoint
    best_stsb_dev: float = math.nan  # STS-B dev of the selected checkpoint when dev_metric avg_sts selects (best_dev: the mean)


def _rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def _set_rng_state(s: dict) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"].cpu())  # the checkpoint is loaded with map_location=device
    if s.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in s["cuda"]])


class Trainer:
    def __init__(self, cfg: RunConfig, corpus_path: str | os.PathLike, senteval_dir: str | os.PathLike,
                 out_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None,
                 show_progress: bool = True, teacher_cache: list[str] | None = None,
                 dev_file: str | os.PathLike | None = None):
        self.cfg = cfg
        self.t = cfg.training
        self.out_dir = Path(out_dir)
        self.ckpt_dir = self.out_dir / "checkpoint"
        self.show_progress = show_progress
        self.rank, self.world = distributed.rank(), distributed.world_size()
        self.device = pick_device()
        if self.t.batch_size % self.world:
            raise TrainingError(f"training.batch_size {self.t.batch_size} (the global batch) is not divisible by "
                                f"the {self.world} DDP processes; choose a multiple of {self.world}")
        self._determinism = DeterministicMode()  # released when run() ends (or close()): the process's own settings back
        try:
            self._build(cfg, corpus_path, senteval_dir, cache_dir, teacher_cache, dev_file)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Give the process its own determinism settings back (run() does when it ends; a trainer driven step by
        step, as the benchmarks and tests do, calls it when done). Safe to call twice."""
        self._determinism.release()

    def _build(self, cfg: RunConfig, corpus_path, senteval_dir, cache_dir, teacher_cache, dev_file) -> None:
        set_seed(cfg.seed)
        # the dropout the method gets: training.dropout, else SimCSE's p, on the model type's own config names; a
        # model type csebench does not know is refused where the method's positives come from dropout
        self.own_positives = own_positives(cfg.objectives)
        dropout = DropoutSetting(self.t.dropout, needed=not self.own_positives)
        self.encoder = build_encoder(cfg.backbone, seed=cfg.seed, dropout=dropout,
                                     projection_dim=self.t.projection_dim, num_layers=self.t.num_layers,
                                     projection_head=self.t.projection_head,
                                     what="--backbone" if cfg.suite == "cli" else f"backbones.{cfg.backbone_name}.model",
                                     prefix=self.t.prefix).to(self.device)  # cli: a run of your own, `train --backbone`
        # before tokenizing: a length past the position table fails mid-training otherwise, and the tokens an
        # objective term puts around or into each row (a PromptBERT template, ESimCSE's repetition) count too
        check_max_seq_length(self.encoder, self.t.max_seq_length, f"training.max_seq_length (suite {cfg.suite}, run {cfg.name})",
                             added=lambda n: added_tokens(cfg.objectives, self.encoder.tokenizer, n))
        self.tokens = load_tokenized_corpus(corpus_path, self.encoder.tokenizer, self.t.max_seq_length, cache_dir,
                                            self.encoder.prefix)
        n = len(self.tokens)
        if n < 2 * self.world:
            raise TrainingError(f"corpus {corpus_path} has {n} sentence{'' if n == 1 else 's'}: too few for "
                                f"in-batch negatives (need at least {2 * self.world})")
        self.fingerprint = cfg.fingerprint({"corpus_sentences": n})  # checkpoints also pin the corpus size
        sizes = [len(b) for b in data_order(n, self.t.batch_size, cfg.seed, 0, self.world)]  # same every epoch
        self.steps_per_epoch = len(sizes)
        self.total_steps = self.t.epochs * self.steps_per_epoch
        if self.t.max_steps:
            self.total_steps = min(self.total_steps, self.t.max_steps)
        # the batch sizes the steps run with (a last partial batch, or a corpus smaller than one batch)
        self.effective_batch_sizes = sorted(set(sizes if self.total_steps >= len(sizes) else sizes[: self.total_steps]))
        if n < self.t.batch_size and self.rank == 0:
            log.warning("corpus %s has %d sentences, fewer than training.batch_size %d: %d step%s of batch %d will run",
                        corpus_path, n, self.t.batch_size, self.total_steps, "" if self.total_steps == 1 else "s",
                        sizes[0])
        # model teachers (teachers: {model: M}, `train --teacher M`): their caches built here, once
        teacher_cache = model_teacher_caches(cfg, teacher_cache or [], corpus_path,
                                             cache_dir if cache_dir is not None else self.out_dir / "teachers", self.device)
        self.objective = Objective(cfg.objectives, self.encoder.out_dim, self.encoder.num_layers,
                                   run_config=cfg, corpus_size=n, teacher_cache=teacher_cache or [],
                                   device=self.device, corpus_path=str(corpus_path),
                                   tokenizer=self.encoder.tokenizer, encoder=self.encoder).to(self.device)
        self.layers = self.objective.intermediate_layers()
        self.loader = BatchLoader(self.tokens, self.encoder.tokenizer.pad_token_id or 0, self._local_batches,
                                  num_workers=self.t.num_workers, pin_memory=self.device.type == "cuda")
        params = [p for p in list(self.encoder.parameters()) + list(self.objective.parameters()) if p.requires_grad]
        self._clipped = params  # what the optimizer trains: the encoder's and a term's own trained parameters
        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        fused = self.device.type in ("cuda", "cpu")  # one fused kernel per step (CPU since torch 2.4)
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": self.t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=self.t.learning_rate, eps=self.t.adam_epsilon, fused=fused)
        warm, total = self.t.warmup_steps, self.total_steps

        def linear(step: int) -> float:  # HF get_linear_schedule_with_warmup
            if step < warm:
                return step / max(1, warm)
            return max(0.0, (total - step) / max(1, total - warm))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, linear)
        self.amp_dtype = autocast_dtype(self.t.precision, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.model = self.encoder
        if self.world > 1:
            self.model = torch.nn.parallel.DistributedDataParallel(
                self.encoder, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.encoder.compiled = bool(self.t.compile)
        p, origin = dropout.resolve(self.encoder.backbone.config.model_type, cfg.backbone.model)
        self.dropout_record = {"setting": self.t.dropout, "p": p, "origin": origin,
                               **dropout_in_effect(self.encoder.backbone)}
        # positives from dropout alone, and dropout not turned off on purpose (SSCL-BERT's 0): the first step checks
        # that the two views differ
        self._check_views = not self.own_positives and self.t.dropout != 0
        self.views_difference: float | None = None  # the check's largest difference of the views, relative
        self.packed_why = self.encoder.packed_why_not()
        if self.rank == 0:
            d = self.dropout_record
            log.info("%s: dropout %s (%s) on model_type %s: %s; nn.Dropout p %s", cfg.run_id, d["p"], d["origin"],
                     d["model_type"], ", ".join(f"{k}={v}" for k, v in d["config"].items()) or "no config name set",
                     ", ".join(f"{p} x{n}" for p, n in d["modules"].items()) or "none")
            log.info("%s: %s", cfg.run_id, f"padded forward: {self.packed_why}" if self.packed_why
                     else "packed forward (the dense layers on real tokens only)")
        self.forward_model = self.model
        # a compiled step's padded width is a multiple of this (1: each batch as long as its longest row)
        self.width_multiple = compile_width_multiple(self.t.max_seq_length) if self.t.compile else 1
        if self.t.compile:
            # static graphs, one per padded width: with dynamic lengths inductor's kernels ran a step 30x
            # slower than eager on an H200 (BENCHMARKS.md, GPU section)
            import torch._dynamo.config as dynamo_config

            need = -(-(self.t.max_seq_length + 64) // self.width_multiple)
            if getattr(dynamo_config, "recompile_limit", None) is not None:
                dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, need)
            mode = {"mode": self.t.compile} if isinstance(self.t.compile, str) else {}
            self.forward_model = torch.compile(self.model, dynamic=False, **mode)
        # every rank reads the dev data, so a malformed file stops all ranks (none waits in a collective)
        self.dev = DevEvaluator.for_run(cfg, senteval_dir, dev_file)
        self.state = TrainState()
        self.train_rows: list[list] = []
        self.dev_rows: list[list] = []
        self.log_keys: list[str] = []
        self._unread: list[_Unread] = []  # each step's loss, its parts and what it was computed from, on the device
        self._needs_train_mode = True  # set the modules' training mode before the next step (Module.train walks them all)
        self.terms_fired: dict[str, dict] = {}  # objective term -> the first step it changed the loss (_note_fired)
        self._widths_compiled: set[int] = set()  # training.compile: padded widths whose graph is built
        self._compiling: int | None = None
        self._last_logs: dict = {}
        # SICK-R dev of the selected checkpoint is still to be computed (``_sickr_pending``), from its weights kept on the
        # host (``_best_weights``) when later steps may change them: scored once, when a checkpoint is written or
        # training ends, not at every new best
        self._sickr_pending = False
        self._best_weights: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self) -> None:
        if self.rank != 0:
            return
        self.score_best_sickr()  # a resumed run starts without the weights it would need
        with atomic_path(self.ckpt_dir, is_dir=True) as tmp:
            if (self.out_dir / "best_model.partial").exists():
                # hard links: best_model.partial is only ever replaced as a whole, never edited in place
                _copy_tree(self.out_dir / "best_model.partial", tmp / "best_model")
            checkpoint.save(tmp, {  # its manifest last, covering best_model/ too
                "encoder": self.encoder.state_dict(), "objective": self.objective.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler else None,
                "state": self.state.__dict__, "rng": _rng_state(), "train_rows": self.train_rows,
                "dev_rows": self.dev_rows, "log_keys": self.log_keys, "terms_fired": self.terms_fired,
                "run": {"suite": self.cfg.suite, "name": self.cfg.name, "seed": self.cfg.seed,
                        "total_steps": self.total_steps, "fingerprint": self.fingerprint, "world_size": self.world},
            })

    def _checkpoint_dirs(self) -> tuple[Path, Path]:
        # a kill between the two renames of the atomic directory swap leaves only the previous one, as .checkpoint.old
        return self.ckpt_dir, self.out_dir / f".{self.ckpt_dir.name}.old"

    def checkpoint_file(self) -> Path | None:
        """The manifest of the last checkpoint written (not verified: see usable_checkpoint)."""
        return next((d / checkpoint.MANIFEST for d in self._checkpoint_dirs() if (d / checkpoint.MANIFEST).is_file()), None)

    def usable_checkpoint(self) -> Path | None:
        """The folder of the last checkpoint that matches its manifest; a warning names what is wrong
        with any other (then the run starts over)."""
        problems = []
        for d in self._checkpoint_dirs():
            if not d.is_dir():
                continue
            try:
                state = checkpoint.read_state(d) if (d / checkpoint.STATE).is_file() else {}
                # a best model was kept (best_step >= 0): its weights must be in the checkpoint too
                needed = ("best_model/model.safetensors",) if (state.get("state") or {}).get("best_step", -1) >= 0 else ()
                problem = checkpoint.verify(d, needed)
            except (OSError, ValueError, AttributeError, TypeError) as exc:
                problem = f"is unreadable ({exc})"
            if problem is None:
                return d
            problems.append(f"checkpoint {d} {problem}")
        if problems:
            log.warning("%s; starting over", "; ".join(problems))
        return None

    def _clean_stale(self) -> None:
        """Remove what an interrupted earlier attempt may have left: temporaries of atomic writes,
        an unfinished best model, and outputs without the train.json that marks them finished. A
        finished run (train --force) stays whole until the new one replaces it in finish()."""
        if self.rank != 0:
            return
        for p in self.out_dir.iterdir():  # a link among them is unlinked, never deleted through (io.remove_path)
            if p.name.startswith(".") and (p.name.endswith(".tmp") or p.name.endswith(".old")) \
                    and p.name != f".{self.ckpt_dir.name}.old":
                remove_path(p)
        remove_path(self.out_dir / "best_model.partial")
        if not (self.out_dir / "train.json").is_file():
            for name in ("train_timing.json", "train_curve.csv", "dev_curve.csv"):
                (self.out_dir / name).unlink(missing_ok=True)
            remove_path(self.out_dir / "model")

    def maybe_resume(self) -> bool:
        self._clean_stale()
        ckpt = self.usable_checkpoint()
        if ckpt is None:
            return False
        try:
            blob = checkpoint.load(ckpt, self.device)
        except Exception as exc:  # an unreadable checkpoint is a lost checkpoint, not a failed run
            log.warning("checkpoint %s is unreadable (%s); starting over", ckpt, exc)
            return False
        if blob["run"].get("fingerprint") != self.fingerprint:
            log.warning("checkpoint %s was written with a different configuration or corpus (fingerprint %s, "
                        "this run %s); starting over", ckpt, blob["run"].get("fingerprint"), self.fingerprint)
            return False
        if blob["run"].get("world_size", 1) != self.world:
            log.warning("checkpoint %s was written by %s processes, resuming with %d: dropout masks "
                        "differ from an uninterrupted run from here on", ckpt, blob["run"].get("world_size"), self.world)
        self.encoder.load_state_dict(blob["encoder"])
        self.objective.load_state_dict(blob["objective"])
        self.optimizer.load_state_dict(blob["optimizer"])
        self.scheduler.load_state_dict(blob["scheduler"])
        if self.scaler and blob["scaler"]:
            self.scaler.load_state_dict(blob["scaler"])
        self.state = TrainState(**blob["state"])
        _set_rng_state(blob["rng"])
        self.train_rows, self.dev_rows, self.log_keys = blob["train_rows"], blob["dev_rows"], blob["log_keys"]
        self.terms_fired = blob.get("terms_fired") or {}
        if self.rank == 0 and (ckpt / "best_model").is_dir():
            _copy_tree(ckpt / "best_model", self.out_dir / "best_model.partial")
        log.info("resumed %s from step %d (best dev %.2f at step %d)", self.cfg.run_id, self.state.step,
                 self.state.best_dev, self.state.best_step)
        return True

    # ------------------------------------------------------------------ one step

    def _local_batches(self, epoch: int) -> list[np.ndarray]:
        """This process's share of each batch of ``epoch`` (what encode_views will be asked for)."""
        batches = data_order(len(self.tokens), self.t.batch_size, self.cfg.seed, epoch, self.world)
        return batches if self.world == 1 else [np.split(np.asarray(b), self.world)[self.rank] for b in batches]

    def encode_views(self, batch_idx: np.ndarray) -> StepContext:
        local = batch_idx if self.world == 1 else np.split(np.asarray(batch_idx), self.world)[self.rank]
        host_ids, host_mask = self.loader.get(self.state.epoch, self.state.batch_in_epoch, local)  # pinned on CUDA
        ids = host_ids.to(self.device, non_blocking=True)
        mask = host_mask.to(self.device, non_blocking=True)
        idx_local = torch.as_tensor(local)
        # the views to encode (two dropout views of the sentence unless a term changes them), in one forward pass
        views = self.objective.input_views(ids, mask, idx_local, self.state.step)
        ids2, mask2, segments = _stack_views(views, self.encoder.tokenizer.pad_token_id or 0, self.width_multiple)
        if self.t.compile and ids2.shape[1] not in self._widths_compiled:
            self._widths_compiled.add(ids2.shape[1])
            self._compiling = ids2.shape[1]  # this step compiles a graph: run() says how long it took
        rows = None
        if all(v[0] is ids and v[1] is mask for v in views.values()) and self.encoder.uses_packed:
            # the real tokens' places, from the host's copy of the mask: found on the device, they would be a
            # host wait in the middle of every step (nonzero's size is data)
            rows = _token_rows(host_mask, len(views), ids2.shape[1]).to(self.device, non_blocking=True)
        need_all = bool(self.layers)
        hs = _call_hidden(self.forward_model, ids2, mask2, need_all, rows)
        pooled = self.objective.pool(self.encoder, hs, ids2, mask2, segments)
        if pooled is None:
            pooled = pool(self.encoder.pooler, hs, mask2)
        pooled = self.encoder.project(pooled, train_head=True)
        z1, z2 = pooled[segments["view1"]], pooled[segments["view2"]]
        extra = {name: pooled[rows] for name, rows in segments.items() if name not in ("view1", "view2")}
        layer_z1, layer_z2 = {}, {}
        for layer in self.layers:
            rep = self.encoder.project(pool(self.encoder.pooler, hs, mask2, layer=layer), train_head=True)
            layer_z1[layer], layer_z2[layer] = rep[segments["view1"]], rep[segments["view2"]]
        # corpus indices stay on the host: DistillCSE looks its teacher rows up there (sending them to
        # the GPU only for the lookup to read them back was a host wait mid-step)
        offset = 0
        if self.world > 1:
            z2, offset = distributed.gather_with_grad(z2)
            layer_z2 = {k: distributed.gather_with_grad(v)[0] for k, v in layer_z2.items()}
            all_idx = torch.as_tensor(batch_idx)
        else:
            all_idx = idx_local
        return StepContext(z1=z1, z2=z2, temperature=self.t.temperature, step=self.state.step,
                           total_steps=self.total_steps, indices=idx_local, all_indices=all_idx,
                           positive_offset=offset, layer_z1=layer_z1, layer_z2=layer_z2,
                           num_layers=self.encoder.num_layers, world_size=self.world, rank=self.rank,
                           extra=extra, inputs=views)

    def forward_loss(self, batch_idx: np.ndarray, read: bool = True) -> tuple[torch.Tensor, dict[str, float] | None]:
        """This rank's loss on its slice of the global batch, and (``read``) the logs read back by
        ``read_logs``. Unread, the loss and its parts stay on the device: a host read waits for the
        GPU to finish the step, so the training loop reads only where it needs the values."""
        if self._needs_train_mode:  # the first step and the first after a dev evaluation, not every step
            self.model.train()
            self.objective.train()
            self._needs_train_mode = False
        seed_step_generators(step_seed(self.cfg.seed, self.rank, self.state.step), self.device)
        ctx_amp = torch.autocast(self.device.type, dtype=self.amp_dtype) if self.amp_dtype else _Null()
        with ctx_amp:
            ctx = self.encode_views(batch_idx)
        if self._check_views and self.state.step == 0:
            self.check_views_differ(ctx)
        # the loss outside autocast: every term's similarities, softmaxes and buffers in float32
        # (under autocast their matrix products would run in bf16/fp16 whatever the inputs' dtype)
        loss, logs = self.objective(ctx)
        # the step's loss, its parts and the checks of what they were computed from, in one vector that stays on the
        # device until the next read: a loss that is not finite is then said at the step it appeared, naming its part
        parts = [k for k in sorted(logs) if isinstance(logs[k], torch.Tensor)]
        checks = self.objective.checks
        values = torch.stack([loss.detach().float().reshape(()), *(logs[k] for k in parts), *(v for v, _ in checks.values())])
        self._unread.append(_Unread(self.state.step + 1, parts, [(k, finite) for k, (_, finite) in checks.items()],
                                    values, self.objective.acted()))
        self._last_logs = {k: v for k, v in logs.items() if k not in parts}  # the terms' own logs, on the host
        return loss, (self.read_logs() if read else None)

    def check_views_differ(self, ctx: StepContext) -> None:
        """The first step of a run whose positives come from dropout alone: its two views of the first batch must
        differ, or the method learns nothing (a model whose dropout csebench's settings do not reach). One host read,
        once; every rank decides on the same numbers."""
        self._check_views = False
        z1 = ctx.z1.detach().float()
        z2 = ctx.z2[ctx.positive_offset:ctx.positive_offset + z1.shape[0]].detach().float()
        diff, scale = distributed.all_reduce_mean(torch.stack([(z1 - z2).abs().max(), z1.abs().max()]).double()).tolist()
        self.views_difference = diff / max(scale, 1e-12)
        if self.views_difference > VIEWS_SAME:
            return
        d = self.dropout_record
        names = ", ".join(f"{k}={v}" for k, v in d["config"].items()) or "no config name"
        modules = ", ".join(f"p {p} x{n}" for p, n in d["modules"].items()) or "none"
        raise TrainingError(f"{self.cfg.run_id}: the two views of the first batch are the same (largest difference "
                            f"{diff:.3g}): method {self.cfg.method} takes its positives from dropout, and no dropout "
                            f"acted in the backbone (model_type {d['model_type']}: {names}; nn.Dropout modules: {modules}), "
                            f"so each positive is its anchor; set training.dropout above 0 (SimCSE's {DEFAULT_DROPOUT}) or, "
                            "if it is, name the dropout settings this model reads in csebench.model.model_types; "
                            "training.dropout: 0 trains without dropout positives on purpose")

    def reads_logs_at(self, step: int) -> bool:
        """Steps (1-based) after which the loop reads the losses back: log rows, dev evaluations,
        checkpoints and the last step, so nothing non-finite is evaluated or saved. A non-finite
        loss therefore stops training at most log_steps - 1 steps after the step that produced it."""
        t = self.t
        return (step == 1 or step % t.log_steps == 0 or step % t.eval_steps == 0
                or step % t.checkpoint_steps == 0 or step == self.total_steps)

    def read_logs(self) -> dict[str, float]:
        """Read back, in one copy (one all-reduce under DDP), every step's loss, loss parts and checks since the
        last read and the last step's logs, averaged over ranks (so they equal the single-process values). A
        non-finite loss at any of those steps on any rank stops all ranks, naming the first such step and what was
        not finite there (a term's loss part, or what the contrastive loss was computed from)."""
        unread, host = self._unread, self._last_logs
        on_host = sorted(host)  # the terms' own logs
        vec = torch.cat([torch.cat([u.values for u in unread]).double(),
                         torch.tensor([float(host[k]) for k in on_host], dtype=torch.float64).to(self.device)])
        values = distributed.all_reduce_mean(vec).tolist()
        self._unread = []
        per_step, at = [], 0
        for u in unread:
            per_step.append(values[at : at + len(u.values)])
            at += len(u.values)
        for u, got in zip(unread, per_step):
            if not math.isfinite(got[0]):
                ckpt = self.checkpoint_file()
                last = (f"the last good checkpoint is {ckpt.parent} (step {self._ckpt_step(ckpt)})" if ckpt
                        else "no checkpoint was written yet")
                raise TrainingError(f"loss is {got[0]} at step {u.step} of {self.cfg.run_id}{self._non_finite_parts(u, got)}; "
                                    f"{last}. Lower training.learning_rate or check the objective settings.")
        last, got = unread[-1], per_step[-1]
        logs = dict(zip(last.parts, got[1 : 1 + len(last.parts)]))
        logs.update(zip(on_host, values[at:]))
        logs["loss"] = got[0]
        self._note_fired(logs, last.step)
        return logs

    def _non_finite_parts(self, u: "_Unread", got: list[float]) -> str:
        """What was not finite at the step whose loss was not (``got``: its loss, parts and checks, read back): each
        term whose loss part was not, with the package of a term that is not csebench's own; for the contrastive
        part, what it was computed from: the embeddings, another term's extra negatives, candidates or weights, or
        the term that replaces it. ' (not finite at step 8: ...)'."""
        packages = term_packages(self.cfg.objectives)
        parts = dict(zip(u.parts, got[1 : 1 + len(u.parts)]))
        checks = dict(zip([k for k, _ in u.checks], got[1 + len(u.parts):]))
        term = lambda key: f"term {key}" + (f" (package {packages[key]})" if key in packages else "")  # noqa: E731
        bad = []
        for key in sorted(k for k, v in parts.items() if not math.isfinite(v)):
            if key != "loss_contrastive":
                bad.append(term(key[len("loss_"):]))
                continue
            inputs = [name for name, finite in u.checks
                      if (not math.isfinite(checks[name]) if finite else (math.isnan(checks[name]) or checks[name] == math.inf))]
            replaced = [k for k, acts in u.acts.items() if "replaces the contrastive loss" in acts]
            if inputs and inputs[0] == EMBEDDINGS:  # what the terms add is computed from them: not finite either
                views = [k for k, acts in u.acts.items() if {"input views", "pooling"} & set(acts)]
                shaped = f", encoded as term{'s' if len(views) > 1 else ''} {', '.join(views)} changed them" if views else ""
                bad.append(f"the contrastive loss (InfoNCE), from {EMBEDDINGS}{shaped}")
            elif inputs:
                bad.append(f"the contrastive loss (InfoNCE), from {', '.join(inputs)}")
            elif replaced:
                bad.append(f"the contrastive loss as {', '.join(map(term, replaced))} replaces it")
            else:
                bad.append("the contrastive loss (InfoNCE)")
        return f" (not finite at step {u.step}: {', '.join(bad)})" if bad else ""

    def _note_fired(self, logs: dict[str, float], step: int) -> None:
        """Record the first read step at which each objective term changed the loss: it changed what the loss is
        computed from (views, pooling, negatives, weights), or added a loss part that is finite and not 0. A
        term that only waited (a buffer still filling adds a part of 0) has not fired."""
        for key, acts in self.objective.acted().items():
            if key in self.terms_fired:
                continue
            how = [a for a in acts if a != "extra loss"]
            part = logs.get(f"loss_{key}", math.nan)
            if "extra loss" in acts and math.isfinite(part) and part != 0:
                how.append("extra loss")
            if how:
                self.terms_fired[key] = {"step": step, "how": how}

    def terms_report(self) -> dict[str, dict]:
        """train.json's terms_fired: for each objective term, the first step at which it changed the loss (as read
        every log_steps) and how, or null and why it never did (a waiting term says what it waited for)."""
        out = {}
        for key, term in self.objective.terms.items():
            if key in self.terms_fired:
                out[key] = self.terms_fired[key]
            else:
                why = term.waiting() or "no step read changed the loss (nothing it returned was used, its loss part was 0)"
                out[key] = {"step": None, "why": f"never ran in {self.state.step} steps of {self.t.batch_size} sentences: {why}"}
        return out

    def backward(self, loss: torch.Tensor) -> None:
        """Gradients of the mean loss over the global batch (DDP averages the encoder's; the
        objective's own parameters, outside DDP, are averaged here)."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            loss.backward()
        distributed.average_gradients(p for p in self.objective.parameters() if p.requires_grad)

    def train_step(self, batch_idx: np.ndarray, read: bool = True) -> dict[str, float] | None:
        """One optimizer step; the logs read back (``read``) or None."""
        loss, logs = self.forward_loss(batch_idx, read)
        self.backward(loss)
        if self.t.max_grad_norm > 0:
            # every trained parameter's gradient under one norm, as the HF Trainer clips the whole model: the
            # encoder's and a term's own trained ones (DiffCSE's discriminator, in its released model); no other
            # term has trained parameters, so their norm is the encoder's as before
            torch.nn.utils.clip_grad_norm_(self._clipped, self.t.max_grad_norm)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        if logs is not None:
            logs["lr"] = self.scheduler.get_last_lr()[0]
        return logs

    @staticmethod
    def _ckpt_step(ckpt: Path) -> int | str:
        try:
            return int(checkpoint.read_state(ckpt.parent)["state"]["step"])
        except Exception:
            return "unknown"

    # ------------------------------------------------------------------ evaluation / saving

    def evaluate_and_keep_best(self) -> float:
        score = float("nan")
        self._needs_train_mode = True
        with distributed.fail_together():  # rank 0 evaluates and saves; a failure there stops every rank
            if self.rank == 0:
                score, stsb, sickr = self.dev.select(self.encoder)
                self.dev_rows.append([self.state.step] + [round(v, 4) for v in (stsb, sickr, score)[:len(self.dev.columns)]])
                if score > self.state.best_dev:
                    self.state.best_dev, self.state.best_step = score, self.state.step
                    # SICK-R dev of the selected checkpoint only, scored once it is final (score_best_sickr),
                    # unless the selection scored it already
                    self.state.best_sickr_dev, self.state.best_stsb_dev = sickr, stsb
                    self._best_weights = None
                    self._sickr_pending = not self.dev.selects_on_avg and self.dev.sickr_pairs is not None
                    if self._sickr_pending and self.state.step < self.total_steps:  # a later step changes the weights
                        self._best_weights = {k: v.detach().to("cpu", copy=True) for k, v in self.encoder.state_dict().items()}
                    # (at the last step no copy: score_best_sickr reads the weights as they stand; the copy of
                    # BERT-base's took 3.1 s on a 2-core Zen 4 with AVX2 kernels)
                    self.encoder.save(self.out_dir / "best_model.partial")
        return score

    def score_best_sickr(self) -> None:
        """SICK-R dev of the selected checkpoint, from its weights kept on the host: the same number as
        scoring it at selection, without a pass for every checkpoint that a later one beats."""
        if not self._sickr_pending:
            return
        self._needs_train_mode = True
        if self.state.best_step == self.state.step:  # no step since the selection: the weights are the selected ones
            self.state.best_sickr_dev = self.dev.sickr(self.encoder)  # (no copy out and back: 2.6 s for BERT-large)
        else:
            current = {k: v.detach().to("cpu", copy=True) for k, v in self.encoder.state_dict().items()}
            self.encoder.load_state_dict(self._best_weights)
            try:
                self.state.best_sickr_dev = self.dev.sickr(self.encoder)
            finally:
                self.encoder.load_state_dict(current)
        self._best_weights, self._sickr_pending = None, False

    def step_losses(self, n: int, like_run: bool = False, past_the_end: bool = False) -> list[float]:
        """``n`` optimizer steps of run()'s loop from where the trainer stands; no dev evaluation, checkpoint or output
        (what a comparison of two configurations over a few steps needs). Every step's loss is read back, or with
        ``like_run`` only where run() reads it (a timing then sees the loop's host waits and no more). The steps stop at
        the run's last unless ``past_the_end`` (a benchmark's warm-up and timed steps)."""
        losses = []
        end = float("inf") if past_the_end else self.total_steps
        while n > 0 and self.state.step < end:
            batches = data_order(len(self.tokens), self.t.batch_size, self.cfg.seed, self.state.epoch, self.world)
            while self.state.batch_in_epoch < len(batches) and n > 0 and self.state.step < end:
                logs = self.train_step(batches[self.state.batch_in_epoch],
                                       read=not like_run or self.reads_logs_at(self.state.step + 1))
                if logs is not None:
                    losses.append(logs["loss"])
                self.state.step += 1
                self.state.batch_in_epoch += 1
                n -= 1
            if self.state.batch_in_epoch >= len(batches):
                self.state.epoch, self.state.batch_in_epoch = self.state.epoch + 1, 0
        return losses

    def run(self) -> dict:
        if not self._determinism.held:  # run again after it ended (or after close())
            self._determinism = DeterministicMode()
        try:
            return self._run()
        finally:
            self.close()

    def _run(self) -> dict:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with distributed.fail_together():
            self.maybe_resume()
        n_before = self.state.step
        from tqdm import tqdm

        # a bar only where someone watches it: --no-progress, or stderr a file or a pipe (a Snakemake or
        # cluster log), logs a line every log_steps instead (and the bar's absence costs nothing to read)
        bar_on = self.show_progress and self.rank == 0 and _stderr_is_tty()
        bar = tqdm(total=self.total_steps, initial=self.state.step, desc=self.cfg.run_id, unit="step",
                   disable=not bar_on, dynamic_ncols=True, mininterval=1.0)
        last_dev = self.dev_rows[-1][1] if self.dev_rows else float("nan")
        resumed_from = n_before if n_before else None
        t0 = time.perf_counter() - self.state.elapsed
        rate = _Rate(self.state.step)
        last_loss, last_line = math.nan, time.perf_counter()
        while self.state.step < self.total_steps:
            batches = data_order(len(self.tokens), self.t.batch_size, self.cfg.seed, self.state.epoch, self.world)
            while self.state.batch_in_epoch < len(batches) and self.state.step < self.total_steps:
                batch = batches[self.state.batch_in_epoch]
                t_step = time.perf_counter()
                logs = self.train_step(batch, read=self.reads_logs_at(self.state.step + 1))
                if self._compiling is not None and self.rank == 0:
                    # the first step of each padded width compiles its graph: the rate of those steps is not the run's
                    log.info("%s: step %d compiled the graph of padded width %d in %.1f s (training.compile: one graph "
                             "per width, a multiple of %d; %d so far)", self.cfg.run_id, self.state.step + 1,
                             self._compiling, time.perf_counter() - t_step, self.width_multiple, len(self._widths_compiled))
                self._compiling = None
                self.state.step += 1
                self.state.batch_in_epoch += 1
                rate.sentences += len(batch)  # the global batch: every rank's sentences
                logged = logs is not None and (self.state.step % self.t.log_steps == 0 or self.state.step == 1)
                if logged:
                    if not self.log_keys:
                        self.log_keys = sorted(logs)
                    self.train_rows.append([self.state.step] + [round(logs.get(k, float("nan")), 6) for k in self.log_keys])
                evaluated = self.state.step % self.t.eval_steps == 0 or self.state.step == self.total_steps
                if evaluated:
                    last_dev = self.evaluate_and_keep_best()
                if logs is not None:
                    last_loss = logs["loss"]
                # without a bar: a line every log_steps, and at least every PROGRESS_SECONDS (a step can take
                # seconds on a CPU: ten of them apart was minutes of silence in a log)
                quiet = not bar_on and time.perf_counter() - last_line >= PROGRESS_SECONDS
                if self.rank == 0 and (evaluated or (logged and not bar_on) or quiet):
                    log.info("%s", self.progress_line(last_loss, last_dev, rate))
                    last_line = time.perf_counter()
                if logs is not None:
                    bar.set_postfix(loss=loss_text(logs["loss"]), dev=f"{last_dev:.2f}", refresh=False)
                bar.update(1)
                self.state.elapsed = time.perf_counter() - t0
                if self.state.step % self.t.checkpoint_steps == 0 and self.state.step < self.total_steps:
                    with distributed.fail_together():  # written by rank 0
                        self.save_checkpoint()
            if self.state.batch_in_epoch >= len(batches):
                self.state.epoch += 1
                self.state.batch_in_epoch = 0
        bar.close()
        elapsed = time.perf_counter() - t0
        return self.finish(elapsed, self.state.step - n_before, resumed_from)

    def progress_line(self, loss: float, dev: float, rate: "_Rate") -> str:
        """One line of progress, for a reader of the log: the step, the last logged loss, the last dev score and
        the best, the rate of this attempt and the time left at that rate, e.g.
        ``ci/simcse/seed1 step 40/63 loss 0.0123 stsb_dev 71.20 (best 72.05 @ 30) 0.161 steps/s 10.3 sentences/s ETA 2m23s``."""
        steps_s, sentences_s = rate.now(self.state.step)
        left = self.total_steps - self.state.step
        if math.isfinite(dev):
            dev_part = f"{self.dev.selection} {dev:.2f} (best {self.state.best_dev:.2f} @ {self.state.best_step})"
        else:
            dev_part = f"{self.dev.selection} - (first at step {min(self.t.eval_steps, self.total_steps)})"
        eta = "ETA 0s" if left == 0 else (f"ETA {_duration(left / steps_s)}" if steps_s > 0 else "ETA -")
        return (f"{self.cfg.run_id} step {self.state.step}/{self.total_steps} loss {loss_text(loss)} {dev_part} "
                f"{steps_s:.3g} steps/s {sentences_s:.3g} sentences/s {eta}")

    def finish(self, elapsed: float, steps_this_run: int, resumed_from: int | None = None) -> dict:
        """Write the outputs, all under temporary names first, then rename them into place together
        (a finished run there before is replaced only now); train.json last (it marks the run
        complete), then drop the checkpoint. Metrics files hold no timing, so the same seed gives
        byte-identical files; timing goes to train_timing.json."""
        with distributed.fail_together():  # every rank enters; rank 0 scores (it holds the weights)
            if self.rank == 0:
                self.score_best_sickr()
        summary = {
            "run": self.cfg.run_id, "suite": self.cfg.suite, "method": self.cfg.method,
            "backbone": self.cfg.backbone_name, "seed": self.cfg.seed,
            "steps": self.state.step, "best_step": self.state.best_step,
            # null when no dev score was ever finite (JSON has no -Infinity)
            **self.dev.scores(self.state.best_stsb_dev if self.dev.selects_on_avg else self.state.best_dev,
                              self.state.best_sickr_dev),
            "corpus_sentences": len(self.tokens), "batch_size": self.t.batch_size,
            "effective_batch_sizes": self.effective_batch_sizes, "world_size": self.world, "device": self.device.type,
            # the dropout in effect and whether the dense layers ran on real tokens only (and if not, why)
            "dropout": self.dropout_record,
            "packed_forward": {"used": self.packed_why is None, **({"why_not": self.packed_why} if self.packed_why else {})},
        }
        if self.t.dev_max_pairs is not None:  # the CPU demo's subset: not the papers' STS-B dev score
            summary.update(self.dev.capped())
        timing = {"train_seconds": round(elapsed, 1), "steps_this_attempt": steps_this_run,
                  "resumed_from_step": resumed_from}
        # no time, host or path in it: the same seed in the same environment still gives the same bytes
        summary["provenance"] = provenance.collect(
            self.device, self.world, self.t.precision,
            "fp32" if self.amp_dtype is None else str(self.amp_dtype).replace("torch.", ""))
        if packages := term_packages(self.cfg.objectives):  # terms of other installed packages, with their versions
            summary["provenance"]["term_packages"] = packages
        if self.objective.terms and self.state.step:
            summary["terms_fired"] = self.terms_report()
            for key, fired in summary["terms_fired"].items():
                if fired["step"] is None and self.rank == 0:
                    log.warning("%s: objective term %s %s", self.cfg.run_id, key, fired["why"])
        with distributed.fail_together():  # rank 0 writes; a failure there stops every rank
            if self.rank == 0:
                try:
                    self._write_outputs(summary, timing)
                except BaseException:  # nothing new is in place; the checkpoint stays for a rerun
                    shutil.rmtree(self.out_dir / "best_model.partial", ignore_errors=True)
                    raise
                shutil.rmtree(self.ckpt_dir, ignore_errors=True)
                shutil.rmtree(self.out_dir / f".{self.ckpt_dir.name}.old", ignore_errors=True)
        return summary

    def _write_outputs(self, summary: dict, timing: dict) -> None:
        partial = self.out_dir / "best_model.partial"
        if not partial.is_dir():  # dev score never finite: keep the final weights
            log.warning("%s: no finite STS-B dev score; saving the final model", self.cfg.run_id)
            self.encoder.save(partial)
        (partial / "training_config.json").write_text(dumps_json(self.cfg.record(), default=str) + "\n")
        summary[MODEL_FILES] = model_files(partial)  # what loading the run's model checks, what push uploads
        with staged_outputs(marker=self.out_dir / "train.json"):
            write_csv(self.out_dir / "train_curve.csv", ["step"] + self.log_keys, self.train_rows)
            write_csv(self.out_dir / "dev_curve.csv", ["step", *self.dev.columns], self.dev_rows)
            replace_dir(partial, self.out_dir / "model")
            write_json(self.out_dir / "train_timing.json", timing)
            write_json(self.out_dir / "train.json", summary)  # written last: marks the run complete


@dataclass
class _Unread:
    """One step not read back yet: its loss, loss parts (``parts``, the logs' keys) and checks of what they were
    computed from (``checks``: name, whether it must be finite or only not NaN/+inf), as one vector on the device
    (``values``); what each term did at that step (``acts``, on the host)."""

    step: int  # 1-based
    parts: list[str]
    checks: list[tuple[str, bool]]
    values: torch.Tensor
    acts: dict[str, list[str]]



# two views whose pooled rows differ by at most this much of their largest value are the same: identical rows of one
# batch computed without dropout (float rounding at most); dropout at p = 0.1 moves them by about a tenth
VIEWS_SAME = 1e-4
PROGRESS_SECONDS = 30.0  # the longest a log without a progress bar stays silent while training runs


def loss_text(loss: float) -> str:
    """A loss as the progress line prints it, with 4 significant digits: 3.1793, 0.4821, 2.000e-04 (a loss near zero,
    an easy corpus or a late step, would read 0.0000 with four decimals)."""
    return f"{loss:.4f}" if not math.isfinite(loss) or loss == 0 or abs(loss) >= 0.1 else f"{loss:.3e}"


class _Rate:
    """Steps and sentences per second of this attempt (a resumed run's earlier steps are not in it)."""

    def __init__(self, step: int):
        self.step0, self.t0, self.sentences = step, time.perf_counter(), 0

    def now(self, step: int) -> tuple[float, float]:
        seconds = max(time.perf_counter() - self.t0, 1e-9)
        return (step - self.step0) / seconds, self.sentences / seconds


def _duration(seconds: float) -> str:
    """5s, 2m03s, 1h02m: a time left, to the unit that matters."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _stderr_is_tty() -> bool:
    from csebench.core.io import stderr_is_tty

    return stderr_is_tty()


def _copy_tree(src: Path, dst: Path) -> None:
    """Replace ``dst`` by a copy of ``src`` made of hard links (plain copies where links fail)."""
    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=link)


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def compile_width_multiple(max_seq_length: int) -> int:
    """The padded width of a compiled step is a multiple of this: 8 up to 64 tokens, then coarser, so a
    run compiles at most about eight graphs (a width beyond max_seq_length comes from terms that add
    tokens, such as PromptBERT's template)."""
    return 8 * max(1, -(-max_seq_length // 64))


def _stack_views(views: dict, pad_id: int, width_multiple: int = 1) -> tuple[torch.Tensor, torch.Tensor, dict[str, slice]]:
    """The views' rows in one padded batch (view1 first, view2 next, then any others) and each view's
    rows; the width rounded up to ``width_multiple`` (compiled steps: few shapes, each compiled once).
    Extra padding changes no real position's output: attention masks it as a key and poolers read the mask."""
    names = ["view1", "view2"] + [n for n in views if n not in ("view1", "view2")]
    width = max(views[n][0].shape[1] for n in names)
    width = -(-width // width_multiple) * width_multiple
    ids, masks, segments, start = [], [], {}, 0
    for n in names:
        i, m = views[n]
        if i.shape[1] < width:
            i = torch.nn.functional.pad(i, (0, width - i.shape[1]), value=pad_id)
            m = torch.nn.functional.pad(m, (0, width - m.shape[1]), value=0)
        ids.append(i)
        masks.append(m)
        segments[n] = slice(start, start + i.shape[0])
        start += i.shape[0]
    return torch.cat(ids), torch.cat(masks), segments


def _token_rows(mask: torch.Tensor, copies: int, width: int) -> torch.Tensor:
    """The real tokens' places in the flattened (copies * B, width) batch of ``copies`` stacked copies of the
    host mask ``mask`` (B, L <= width): what ``attention_mask.reshape(-1).nonzero()`` finds there, in order."""
    m = mask.numpy()
    b, length = m.shape
    r, c = np.nonzero(m)
    one = r * width + c
    rows = (one[None, :] + (np.arange(copies) * b * width)[:, None]).reshape(-1)
    out = torch.from_numpy(rows.astype(np.int64))
    return out.pin_memory() if mask.is_pinned() else out


def _call_hidden(model, ids, mask, all_layers: bool, rows: torch.Tensor | None = None):
    # Call the (possibly DDP-wrapped or compiled) module itself so wrapper hooks run.
    if rows is None:
        return model(ids, mask, hidden_only=True, all_layers=all_layers)
    return model(ids, mask, hidden_only=True, all_layers=all_layers, rows=rows)

"""SentEval transfer tasks with the protocol SimCSE used for its transfer table.

SimCSE ran SentEval in "test" mode: ``usepytorch=True, kfold=10`` and a logistic-regression
classifier ``{'nhid': 0, 'optim': 'adam', 'batch_size': 64, 'tenacity': 5, 'epoch_size': 4}``.
This module re-implements that protocol (independently written; SentEval itself is not needed):

Data (SentEval's file layout and parsing):
  * MR, CR, SUBJ, MPQA: one sentence per line, two files per task (label 1 = the first file:
    ``rt-polarity.pos``, ``custrev.pos``, ``subj.objective``, ``mpqa.pos``; label 0 = the other),
    read as latin-1 and split with ``str.splitlines``; empty lines are kept as empty sentences.
  * SST-2: ``SST/binary/sentiment-{train,dev,test}``, UTF-8, ``sentence<TAB>label``.
  * TREC: ``train_5500.label`` / ``TREC_10.label``, latin-1, ``COARSE:fine question``; the six
    coarse classes ABBR DESC ENTY HUM LOC NUM are the labels.
  * MRPC: ``msr_paraphrase_{train,test}.txt``, UTF-8, tab-separated, the header line is skipped;
    column 0 = label, columns 3 and 4 = the two sentences.
  Sentences are whitespace-tokenized and re-joined with single spaces (SimCSE's batcher), and each
  set is ordered by (number of tokens, label) with a stable sort as SentEval does, which fixes the
  rows that SentEval's seeded fold splits and shuffles refer to.

Features: one embedding per distinct sentence (one ``encode`` call for all tasks). MRPC uses
SentEval's pair features ``[|u - v|, u * v]`` (senteval/mrpc.py; SentEval does not include u and v).

Classifier (SentEval tools/classifier.py, nhid=0): a linear layer initialised by
``torch.manual_seed(seed); nn.Linear(d, C)``, mean cross-entropy, Adam (lr 1e-3, torch defaults) with
coupled L2 ``weight_decay`` on weight and bias, minibatches of 64 from a ``np.random.seed(seed)``
permutation per pass; after every ``epoch_size`` passes the dev accuracy is measured, the best model
kept, and training stops once the dev accuracy failed to improve ``tenacity + 1`` times in total
(SentEval's counter is not reset) or after ``max_epoch`` (200) passes.

Model selection over L2 in {1e-5, 1e-4, 1e-3, 1e-2} (SentEval tools/validation.py, pytorch branch):
  * MR/CR/SUBJ/MPQA: nested 10-fold CV (InnerKFoldClassifier). Outer and inner folds are
    ``StratifiedKFold(10, shuffle=True, random_state=1111)`` (SentEval fixes 1111 here, whatever the
    seed); inner models early-stop on their inner test fold; the best L2 (by the mean inner accuracy,
    rounded to 2 decimals, first maximum) is refit on the outer training part with 5% of it held out
    for early stopping; the result is the mean outer-test accuracy.
  * TREC, MRPC: 10-fold CV on train (KFoldClassifier, folds seeded with ``seed``) chooses L2; a model
    refit on all of train with a 5% early-stopping split is scored on test.
  * SST-2: each L2 trained on train with early stopping on dev (SplitClassifier); the best dev
    accuracy picks L2 and that model is scored on test (SentEval's refit is identical: same seed,
    same data).

Speed: every classifier of a stage (all folds x all L2 values, up to 400 models for the nested CV)
is trained at once as one batched model on the shared feature matrix, each with its own data
stream, early-stopping state and Adam state, so the arithmetic is SentEval's but the Python loop
runs once per minibatch position instead of once per model.

Scores: accuracy x100 (rounded as SentEval rounds), and the average of the 7 tasks.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from csebench.core.errors import ConfigError, DataError
from csebench.core.provenance import record_data
from csebench.evaluation import TRANSFER_TASKS
from csebench.evaluation.encoded import encoded

log = logging.getLogger(__name__)

EncodeFn = Callable[[list[str]], torch.Tensor]

TASKS = TRANSFER_TASKS
BINARY_FILES = {  # task: (folder, label-1 file, label-0 file)
    "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("CR", "custrev.pos", "custrev.neg"),
    "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),
    "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
}
TREC_CLASSES = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
L2_GRID = tuple(10.0 ** t for t in range(-5, -1))  # 1e-5 .. 1e-2
INNER_KFOLD_RANDOM_STATE = 1111  # fixed in SentEval's InnerKFoldClassifier
VALIDATION_SPLIT = 0.05


@dataclass(frozen=True)
class ClassifierConfig:
    """SentEval's classifier settings; the defaults are SimCSE's "test" mode."""

    nhid: int = 0
    optim: str = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    kfold: int = 10
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self):
        if self.nhid != 0 or self.optim != "adam":
            raise ConfigError("only SentEval's logistic regression (nhid=0) with optim='adam' is implemented")
        if self.batch_size < 1 or self.epoch_size < 1 or self.tenacity < 0 or self.kfold < 2:
            raise ConfigError(f"invalid classifier settings: {self}")


SIMCSE_TEST_MODE = ClassifierConfig()


# ============================================================================ data


@dataclass
class Split:
    """Sentences (space-joined tokens) or sentence pairs with integer labels, in SentEval's order."""

    a: list[str]
    y: np.ndarray
    b: list[str] | None = None  # second sentence (MRPC)

    def __len__(self) -> int:
        return len(self.a)

    def sentences(self) -> list[str]:
        return self.a + (self.b or [])

    def take(self, idx: np.ndarray) -> "Split":
        return Split([self.a[i] for i in idx], self.y[idx], None if self.b is None else [self.b[i] for i in idx])


@dataclass
class TaskData:
    name: str
    nclasses: int
    splits: dict[str, Split]  # "all" (CV tasks) or "train"/"dev"/"test"
    info: dict = field(default_factory=dict)


def _lines(path: Path, encoding: str, splitlines: bool = False) -> list[str]:
    """File lines as SentEval reads them: ``read().splitlines()`` or text-mode iteration."""
    if not path.is_file():
        raise DataError(f"missing transfer-task file: {path}")
    try:
        if splitlines:
            return path.read_text(encoding=encoding).splitlines()
        with open(path, encoding=encoding) as fh:
            return [line.rstrip("\n") for line in fh]
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid {encoding} ({exc.reason} at byte {exc.start})") from None


def _join(tokens: list[str]) -> str:
    return " ".join(tokens)


def _sorted_split(a: list[list[str]], y: list[int], b: list[list[str]] | None = None) -> Split:
    """SentEval sorts each set by (len(tokens), label) -- MRPC by (len(A), len(B), label) -- stably."""
    if b is None:
        order = sorted(range(len(a)), key=lambda i: (len(a[i]), y[i]))
    else:
        order = sorted(range(len(a)), key=lambda i: (len(a[i]), len(b[i]), y[i]))
    return Split([_join(a[i]) for i in order], np.asarray([y[i] for i in order], dtype=np.int64),
                 None if b is None else [_join(b[i]) for i in order])


def load_binary(root: str | os.PathLike, task: str) -> TaskData:
    folder, first, second = BINARY_FILES[task]
    tok, y = [], []
    for name, label in ((first, 1), (second, 0)):
        path = Path(root) / folder / name
        lines = _lines(path, "latin-1", splitlines=True)
        if not lines:
            raise DataError(f"{path}: file is empty")
        tok += [line.split() for line in lines]
        y += [label] * len(lines)
        record_data(path)
    return TaskData(task, 2, {"all": _sorted_split(tok, y)})


def _load_sst_file(path: Path) -> tuple[list[list[str]], list[int]]:
    tok, y = [], []
    for lineno, line in enumerate(_lines(path, "utf-8"), start=1):
        cols = line.strip().split("\t")
        if len(cols) < 2:
            raise DataError(f"{path}:{lineno}: expected 'sentence<TAB>label', found no tab")
        try:
            label = int(cols[1])
        except ValueError:
            raise DataError(f"{path}:{lineno}: label {cols[1]!r} is not an integer") from None
        if label not in (0, 1):
            raise DataError(f"{path}:{lineno}: SST-2 label must be 0 or 1, found {label}")
        tok.append(cols[0].split())
        y.append(label)
    if not y:
        raise DataError(f"{path}: file is empty")
    record_data(path)
    return tok, y


def load_sst2(root: str | os.PathLike) -> TaskData:
    folder = Path(root) / "SST" / "binary"
    splits = {s: _sorted_split(*_load_sst_file(folder / f"sentiment-{s}")) for s in ("train", "dev", "test")}
    return TaskData("SST2", 2, splits)


def _load_trec_file(path: Path) -> tuple[list[list[str]], list[int]]:
    tok, y = [], []
    for lineno, line in enumerate(_lines(path, "latin-1"), start=1):
        target, sep, rest = line.strip().partition(":")
        fine_and_question = rest.split(" ", 1)
        if not sep or len(fine_and_question) < 2:
            raise DataError(f"{path}:{lineno}: expected 'COARSE:fine question', found {line.strip()[:60]!r}")
        if target not in TREC_CLASSES:
            raise DataError(f"{path}:{lineno}: unknown TREC class {target!r} (valid: {', '.join(TREC_CLASSES)})")
        tok.append(fine_and_question[1].split())
        y.append(TREC_CLASSES.index(target))
    if not y:
        raise DataError(f"{path}: file is empty")
    record_data(path)
    return tok, y


def load_trec(root: str | os.PathLike) -> TaskData:
    folder = Path(root) / "TREC"
    return TaskData("TREC", 6, {"train": _sorted_split(*_load_trec_file(folder / "train_5500.label")),
                                "test": _sorted_split(*_load_trec_file(folder / "TREC_10.label"))})


def _load_mrpc_file(path: Path) -> tuple[list[list[str]], list[list[str]], list[int]]:
    a, b, y = [], [], []
    lines = _lines(path, "utf-8")
    for lineno, line in enumerate(lines[1:], start=2):  # line 1 is the header
        cols = line.strip().split("\t")
        if len(cols) < 5:
            raise DataError(f"{path}:{lineno}: expected 5 tab-separated columns, found {len(cols)}")
        try:
            label = int(cols[0])
        except ValueError:
            raise DataError(f"{path}:{lineno}: label {cols[0]!r} is not an integer") from None
        if label not in (0, 1):
            raise DataError(f"{path}:{lineno}: MRPC label must be 0 or 1, found {label}")
        a.append(cols[3].split())
        b.append(cols[4].split())
        y.append(label)
    if not y:
        raise DataError(f"{path}: no sentence pairs after the header line")
    record_data(path)
    return a, b, y


def load_mrpc(root: str | os.PathLike) -> TaskData:
    folder = Path(root) / "MRPC"
    out = {}
    for split in ("train", "test"):
        a, b, y = _load_mrpc_file(folder / f"msr_paraphrase_{split}.txt")
        out[split] = _sorted_split(a, y, b)
    return TaskData("MRPC", 2, out)


def load_transfer_task(root: str | os.PathLike, task: str) -> TaskData:
    if task in BINARY_FILES:
        return load_binary(root, task)
    if task == "SST2":
        return load_sst2(root)
    if task == "TREC":
        return load_trec(root)
    if task == "MRPC":
        return load_mrpc(root)
    raise DataError(f"unknown transfer task '{task}' (valid: {', '.join(TASKS)})")


def training_split(task: TaskData) -> str:
    return "all" if "all" in task.splits else "train"


MIN_PER_CLASS = 10  # 10-fold cross-validation needs 10 examples of every class


def stratified_subset(y: np.ndarray, size: int, seed: int) -> np.ndarray:
    """``size`` indices drawn per class in proportion to its frequency, each class keeping at least
    min(its count, MIN_PER_CLASS) items, so rare classes (TREC's ABBR) survive the cap."""
    rng = np.random.RandomState(seed)
    classes, counts = np.unique(y, return_counts=True)
    want = np.maximum(np.minimum(counts, MIN_PER_CLASS), np.floor(counts * size / len(y)).astype(int))
    picked = [rng.choice(np.flatnonzero(y == c), size=min(w, n), replace=False) for c, w, n in zip(classes, want, counts)]
    return np.concatenate(picked)


def subsample_split(task: TaskData, key: str, max_items: int | None, seed: int, option: str) -> bool:
    """Replace split ``key`` by a seeded class-stratified subset of about ``max_items`` items (SentEval's
    order kept) when it is larger; True when it was capped. ``option`` names the setting in errors."""
    if max_items is None or len(task.splits[key]) <= max_items:
        return False
    if max_items < 1:
        raise ConfigError(f"{option} must be positive, got {max_items}")
    keep = np.sort(stratified_subset(task.splits[key].y, max_items, seed))
    task.splits[key] = task.splits[key].take(keep)
    return True


def cap_training_set(task: TaskData, max_items: int | None, seed: int) -> TaskData:
    """CPU-demo shortcut (not SentEval's protocol): keep a seeded random subset of ``max_items`` items of
    the set classifiers are fitted on (the CV tasks' whole set; SST-2/TREC/MRPC train). Dev/test stay
    whole. The subset keeps SentEval's order. Recorded in ``task.info``."""
    key = training_split(task)
    n = len(task.splits[key])
    task.info.update(n_train_full=n, n_train_used=n, capped=False)
    if subsample_split(task, key, max_items, seed, "max_train_sentences"):
        task.info.update(n_train_used=len(task.splits[key]), capped=True)
    return task


def cap_evaluation_sets(task: TaskData, max_items: int | None, seed: int) -> TaskData:
    """CPU-demo shortcut (not SentEval's protocol): keep a seeded, class-stratified subset of at most
    about ``max_items`` items of each held-out split (SST-2 dev and test, TREC test, MRPC test pairs;
    the cross-validated tasks have none). Recorded in ``task.info`` as n_eval_full/n_eval_used."""
    held_out = [k for k in task.splits if k != training_split(task)]
    task.info.update(n_eval_full={k: len(task.splits[k]) for k in held_out})
    if max_items is not None and max_items < 1:
        raise ConfigError(f"max_test_sentences must be positive, got {max_items}")
    for k in held_out:
        if subsample_split(task, k, max_items, seed, "max_test_sentences"):
            task.info["capped"] = True
    task.info.update(n_eval_used={k: len(task.splits[k]) for k in held_out})
    return task


# ============================================================================ features


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """SentEval's MRPC features: [|u - v|, u * v]."""
    return torch.cat([(u - v).abs(), u * v], dim=1)


def _with_bias(x: torch.Tensor) -> torch.Tensor:
    """Append a ones column: the bias row of the weight matrix then gets the same Adam + L2 update as
    in SentEval, where weight decay applies to the bias as well."""
    return torch.cat([x.float(), torch.ones(x.shape[0], 1)], dim=1).contiguous()


# ============================================================================ batched classifier


@dataclass
class Job:
    """One classifier's data: rows of the feature matrix to train on (in SentEval's order), rows for
    early stopping, and its numpy random stream (SentEval seeds ``np.random`` per classifier)."""

    train: np.ndarray
    dev: np.ndarray
    rng: np.random.RandomState


def split_job(rows: np.ndarray, seed: int, fraction: float = VALIDATION_SPLIT) -> Job:
    """SentEval's ``fit(validation_split=0.05)``: one seeded permutation; the first 5% early-stop."""
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(rows))
    cut = int(fraction * len(rows))
    return Job(rows[perm[cut:]], rows[perm[:cut]], rng)


def initial_weights(dim: int, nclasses: int, seed: int) -> torch.Tensor:
    """(dim + 1, C): SentEval's ``torch.manual_seed(seed); nn.Linear(dim, C)`` init, bias as last row.
    The global torch RNG is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lin = nn.Linear(dim, nclasses)
    return torch.cat([lin.weight.detach().T, lin.bias.detach()[None]], 0).contiguous()


@dataclass
class FitResult:
    best_correct: np.ndarray  # (F, R) dev examples classified correctly by the kept model
    n_dev: np.ndarray  # (F,)
    weights: torch.Tensor  # (F, R, D, C) kept (best-dev) models
    passes: np.ndarray  # (F, R) training passes until the model stopped

    @property
    def dev_acc(self) -> np.ndarray:
        return self.best_correct / np.maximum(self.n_dev, 1)[:, None]


def fit_logreg_batched(X: torch.Tensor, y: torch.Tensor, jobs: list[Job], l2: np.ndarray, nclasses: int,
                       cfg: ClassifierConfig = SIMCSE_TEST_MODE, seed: int = 1111) -> FitResult:
    """Train len(jobs) x R logistic regressions at once; model (f, r) uses job f's data and L2 l2[f, r].

    ``X`` is (N, D) with the ones column already appended. Each model follows SentEval's fit():
    Adam with coupled weight decay, ``epoch_size`` passes between dev checks, best-dev model kept,
    stop after ``tenacity + 1`` non-improving checks or ``max_epoch`` passes.
    """
    l2 = np.asarray(l2, dtype=np.float64)
    F, R = l2.shape
    D, C, B = X.shape[1], nclasses, cfg.batch_size
    if len(jobs) != F:
        raise ValueError("one row of l2 per job")
    w0 = initial_weights(D - 1, C, seed)
    # live state, compacted as jobs finish; W is (Fa, D, R, C) so one bmm serves all R models of a job
    live = list(range(F))
    W = w0[None, :, None, :].expand(F, D, R, C).clone()
    m = torch.zeros_like(W)
    v = torch.zeros_like(W)
    steps = torch.zeros(F, dtype=torch.float64)
    wd = torch.as_tensor(l2, dtype=torch.float32).view(F, 1, R, 1)
    best_correct = np.full((F, R), -1, dtype=np.int64)
    best_w = w0[None, None].expand(F, R, D, C).clone()
    fails = np.zeros((F, R), dtype=np.int64)
    stopped = np.zeros((F, R), dtype=bool)
    passes = np.zeros((F, R), dtype=np.int64)
    dev_x = [X[torch.as_tensor(j.dev)] for j in jobs]
    dev_y = [y[torch.as_tensor(j.dev)] for j in jobs]
    n_dev = np.asarray([len(j.dev) for j in jobs])
    onehot_cache = torch.eye(C)
    b1, b2 = cfg.betas
    nepoch = 0
    while live and nepoch <= cfg.max_epoch:
        for _ in range(cfg.epoch_size):
            # one pass: every live job draws its own permutation, padded to a common number of steps
            n_steps = max(math.ceil(len(jobs[f].train) / B) for f in live)
            idx = np.full((len(live), n_steps * B), -1, dtype=np.int64)
            for row, f in enumerate(live):
                order = jobs[f].train[jobs[f].rng.permutation(len(jobs[f].train))]
                idx[row, : len(order)] = order
            idx_t = torch.from_numpy(idx).view(len(live), n_steps, B)
            for s in range(n_steps):
                ib = idx_t[:, s]
                valid = ib >= 0
                count = valid.sum(1)
                ragged = not bool(valid.all())
                xb = X[ib.clamp_min(0)]  # (Fa, B, D)
                logits = torch.bmm(xb, W.view(len(live), D, R * C)).view(len(live), B, R, C)
                g = torch.softmax(logits, dim=-1)
                g -= onehot_cache[y[ib.clamp_min(0)]].unsqueeze(2)
                if ragged:
                    g *= (valid.float() / count.clamp_min(1)[:, None]).view(len(live), B, 1, 1)
                else:
                    g /= B
                grad = torch.bmm(xb.transpose(1, 2), g.view(len(live), B, R * C)).view_as(W)
                grad += wd * W
                if ragged:  # a job whose pass has already ended takes no step
                    act = (count > 0)
                    steps += act.double()
                    keep = act.view(-1, 1, 1, 1)
                    m_new = torch.where(keep, m.lerp(grad, 1 - b1), m)
                    v_new = torch.where(keep, v * b2 + (1 - b2) * grad * grad, v)
                    m, v = m_new, v_new
                else:
                    act = None
                    steps += 1
                    m.lerp_(grad, 1 - b1)
                    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
                t = steps.clamp_min(1)
                bc1 = (1 - b1 ** t).float().view(-1, 1, 1, 1)
                bc2_sqrt = (1 - b2 ** t).sqrt().float().view(-1, 1, 1, 1)
                update = (m / (v.sqrt() / bc2_sqrt + cfg.eps)) * (cfg.lr / bc1)
                if act is not None:
                    update = torch.where(act.view(-1, 1, 1, 1), update, torch.zeros(()))
                W -= update
        nepoch += cfg.epoch_size
        # dev check for every live job
        still = []
        for row, f in enumerate(live):
            pred = torch.einsum("nd,drc->rnc", dev_x[f], W[row]).argmax(-1)  # (R, n_dev)
            correct = (pred == dev_y[f][None]).sum(1).numpy()
            for r in range(R):
                if stopped[f, r]:
                    continue
                passes[f, r] = nepoch
                if correct[r] > best_correct[f, r]:
                    best_correct[f, r] = correct[r]
                    best_w[f, r] = W[row, :, r]
                else:
                    if fails[f, r] >= cfg.tenacity:
                        stopped[f, r] = True
                    fails[f, r] += 1
            if not stopped[f].all():
                still.append(row)
        if len(still) != len(live):
            keep_rows = torch.as_tensor(still, dtype=torch.long)
            W, m, v = W[keep_rows].contiguous(), m[keep_rows].contiguous(), v[keep_rows].contiguous()
            steps, wd = steps[keep_rows], wd[keep_rows]
            live = [live[r] for r in still]
    return FitResult(best_correct, n_dev, best_w, passes)


def _accuracy(X: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> tuple[float, np.ndarray]:
    pred = (X @ w).argmax(-1)
    return float((pred == y).double().mean()), pred.numpy()


def _r2(x) -> float:
    """SentEval's ``round(100 * score, 2)`` (numpy rounding of a float64)."""
    return float(np.round(np.float64(x) * 100.0, 2))


def _stratified_folds(y: np.ndarray, k: int, random_state: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedKFold

    counts = np.bincount(y)
    if counts[counts > 0].min() < k:
        raise DataError(f"{k}-fold cross-validation needs at least {k} examples of every class; "
                        f"class sizes are {counts.tolist()}")
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    return list(skf.split(np.zeros(len(y)), y))


def inner_kfold(X: torch.Tensor, y: np.ndarray, nclasses: int, cfg: ClassifierConfig, seed: int) -> dict:
    """MR/CR/SUBJ/MPQA: SentEval's InnerKFoldClassifier (nested CV), all models of a stage batched."""
    yt = torch.as_tensor(y)
    k, R = cfg.kfold, len(L2_GRID)
    outer = _stratified_folds(y, k, INNER_KFOLD_RANDOM_STATE)
    jobs = []
    for train, _ in outer:
        for itrain, itest in _stratified_folds(y[train], k, INNER_KFOLD_RANDOM_STATE):
            jobs.append(Job(train[itrain], train[itest], np.random.RandomState(seed)))
    fit = fit_logreg_batched(X, yt, jobs, np.tile(L2_GRID, (len(jobs), 1)), nclasses, cfg, seed)
    acc = fit.dev_acc.reshape(k, k, R)
    scores = np.round(100 * acc.mean(axis=1), 2)  # (outer, R)
    opt = scores.argmax(axis=1)
    dev_results = scores.max(axis=1)
    finals = [split_job(train, seed) for train, _ in outer]
    final = fit_logreg_batched(X, yt, finals, np.asarray(L2_GRID)[opt][:, None], nclasses, cfg, seed)
    test_results = []
    for i, (_, test) in enumerate(outer):
        a, _ = _accuracy(X[torch.as_tensor(test)], yt[torch.as_tensor(test)], final.weights[i, 0])
        test_results.append(_r2(a))
    return {"devacc": float(np.round(np.mean(dev_results), 2)), "acc": float(np.round(np.mean(test_results), 2)),
            "ndev": len(y), "ntest": len(y), "l2_per_fold": [L2_GRID[i] for i in opt],
            "classifiers_trained": len(jobs) * R + len(finals)}


def kfold(Xtr: torch.Tensor, ytr: np.ndarray, Xte: torch.Tensor, yte: np.ndarray, nclasses: int,
          cfg: ClassifierConfig, seed: int) -> dict:
    """TREC/MRPC: SentEval's KFoldClassifier (CV on train picks L2, refit on train, score test)."""
    yt = torch.as_tensor(ytr)
    R = len(L2_GRID)
    folds = _stratified_folds(ytr, cfg.kfold, seed)
    jobs = [Job(tr, te, np.random.RandomState(seed)) for tr, te in folds]
    fit = fit_logreg_batched(Xtr, yt, jobs, np.tile(L2_GRID, (len(jobs), 1)), nclasses, cfg, seed)
    scores = np.round(100 * fit.dev_acc.mean(axis=0), 2)
    opt = int(scores.argmax())
    final = fit_logreg_batched(Xtr, yt, [split_job(np.arange(len(ytr)), seed)], np.asarray([[L2_GRID[opt]]]),
                               nclasses, cfg, seed)
    acc, yhat = _accuracy(Xte, torch.as_tensor(yte), final.weights[0, 0])
    return {"devacc": float(scores.max()), "acc": _r2(acc), "ndev": len(ytr), "ntest": len(yte),
            "l2": L2_GRID[opt], "yhat": yhat, "classifiers_trained": len(jobs) * R + 1}


def split_classifier(Xtr, ytr, Xdev, ydev, Xte, yte, nclasses: int, cfg: ClassifierConfig, seed: int) -> dict:
    """SST-2: SentEval's SplitClassifier (dev picks L2; the selected model is scored on test)."""
    X = torch.cat([Xtr, Xdev])
    y = torch.as_tensor(np.concatenate([ytr, ydev]))
    job = Job(np.arange(len(ytr)), np.arange(len(ytr), len(ytr) + len(ydev)), np.random.RandomState(seed))
    fit = fit_logreg_batched(X, y, [job], np.asarray([L2_GRID]), nclasses, cfg, seed)
    scores = np.round(100 * fit.dev_acc[0], 2)
    opt = int(scores.argmax())
    acc, _ = _accuracy(Xte, torch.as_tensor(yte), fit.weights[0, opt])
    return {"devacc": float(scores.max()), "acc": _r2(acc), "ndev": len(ydev), "ntest": len(yte),
            "l2": L2_GRID[opt], "classifiers_trained": len(L2_GRID)}


# ============================================================================ driver


def _features(split: Split, emb: torch.Tensor, row: dict[str, int]) -> torch.Tensor:
    a = emb[torch.as_tensor([row[s] for s in split.a], dtype=torch.long)]
    if split.b is None:
        return _with_bias(a)
    b = emb[torch.as_tensor([row[s] for s in split.b], dtype=torch.long)]
    return _with_bias(pair_features(a, b))


def run_task(task: TaskData, emb: torch.Tensor, row: dict[str, int], cfg: ClassifierConfig, seed: int) -> dict:
    sp = task.splits
    if "all" in sp:
        res = inner_kfold(_features(sp["all"], emb, row), sp["all"].y, task.nclasses, cfg, seed)
    elif "dev" in sp:
        res = split_classifier(_features(sp["train"], emb, row), sp["train"].y, _features(sp["dev"], emb, row),
                               sp["dev"].y, _features(sp["test"], emb, row), sp["test"].y, task.nclasses, cfg, seed)
    else:
        res = kfold(_features(sp["train"], emb, row), sp["train"].y, _features(sp["test"], emb, row), sp["test"].y,
                    task.nclasses, cfg, seed)
    yhat = res.pop("yhat", None)
    if task.name == "MRPC" and yhat is not None:
        from sklearn.metrics import f1_score

        res["f1"] = _r2(f1_score(sp["test"].y, yhat))
    res.update(task.info)
    return res


def prepared_tasks(root: str | os.PathLike, tasks: list[str] | None = None, max_train_sentences: int | None = None,
                   seed: int = 1111, task_data: dict[str, TaskData] | None = None,
                   max_test_sentences: int | None = None) -> dict[str, TaskData]:
    """The tasks' data as the classifiers see it: loaded (or ``task_data``) and capped."""
    tasks = list(tasks or TASKS)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise DataError(f"unknown transfer task(s) {', '.join(unknown)} (valid: {', '.join(TASKS)})")
    data = {t: (task_data or {}).get(t) or load_transfer_task(root, t) for t in tasks}
    for t in tasks:
        cap_training_set(data[t], max_train_sentences, seed)
        cap_evaluation_sets(data[t], max_test_sentences, seed)
    return data


def task_sentences(data: dict[str, TaskData]) -> list[str]:
    """Every distinct sentence of the tasks' splits, sorted."""
    return sorted({s for task in data.values() for sp in task.splits.values() for s in sp.sentences()})


def evaluate_transfer(encode: EncodeFn, root: str | os.PathLike, tasks: list[str] | None = None, seed: int = 1111,
                      max_train_sentences: int | None = None, cfg: ClassifierConfig = SIMCSE_TEST_MODE,
                      task_data: dict[str, TaskData] | None = None, max_test_sentences: int | None = None) -> dict:
    """Accuracy x100 per transfer task (SimCSE's SentEval "test" mode) and the average of the 7 tasks
    (``avg``; for a subset of tasks ``avg_subset`` over the ``avg_tasks`` instead).

    ``encode`` maps sentences to an (n, d) tensor; it is called once, on every distinct sentence of
    the requested tasks. ``seed`` is SentEval's params.seed (1111 by default). ``max_train_sentences``
    (CPU demo only) subsamples the sets classifiers are fitted on, ``max_test_sentences`` (CPU demo
    only) the held-out dev/test splits; the output then says ``"protocol": "capped"`` and gives the
    sizes used, so it cannot be mistaken for the protocol.
    """
    data = prepared_tasks(root, tasks, max_train_sentences, seed, task_data, max_test_sentences)
    out = evaluate_tasks(encode, data, cfg, seed, max_train_sentences, max_test_sentences)
    if all(t in out["tasks"] for t in TASKS):
        out["avg"] = float(np.mean([out["tasks"][t] for t in TASKS]))
    elif out["tasks"]:  # a subset: its own average, never under "avg" (the 7-task average)
        out["avg_subset"] = float(np.mean(list(out["tasks"].values())))
        out["avg_tasks"] = list(out["tasks"])
    return out


def capped_warning(max_train_sentences: int | None, max_test_sentences: int | None = None) -> str:
    caps = [f"training sets (max_train_sentences={max_train_sentences})" if max_train_sentences else "",
            f"held-out dev/test sets (max_test_sentences={max_test_sentences})" if max_test_sentences else ""]
    return f"{' and '.join(c for c in caps if c)} were subsampled; these are NOT SentEval-protocol numbers"


def cap_summary(info: dict) -> str:
    """'500 of 10662' for the fitted set, then each held-out split that was capped ('test 500 of 1821')."""
    parts = [f"{info['n_train_used']} of {info['n_train_full']}"]
    used = info.get("n_eval_used") or {}
    parts += [f"{k} {used[k]} of {n}" for k, n in (info.get("n_eval_full") or {}).items() if used.get(k, n) < n]
    return "; ".join(parts)


def evaluate_tasks(encode: EncodeFn, data: dict[str, TaskData], cfg: ClassifierConfig, seed: int,
                   max_train_sentences: int | None, max_test_sentences: int | None = None) -> dict:
    """Encode every distinct sentence of the prepared tasks once, then run each task's classifier
    (:func:`run_task`). Shared by the transfer and probing evaluators; a capped result carries the
    caps and a warning."""
    tasks = list(data)
    everything = task_sentences(data)
    t0 = time.perf_counter()
    log.info("encoding %d distinct sentences for %s", len(everything), ", ".join(tasks))
    emb = encoded(encode, everything).float()
    encode_seconds = time.perf_counter() - t0
    row = {s: i for i, s in enumerate(everything)}
    capped = any(data[t].info.get("capped") for t in tasks)
    out: dict = {"tasks": {}, "devacc": {}, "details": {},
                 "protocol": "capped" if capped else "senteval",
                 "max_train_sentences": max_train_sentences, "max_test_sentences": max_test_sentences,
                 "classifier": {**asdict(cfg), "l2_grid": list(L2_GRID)}, "seed": seed,
                 "n_sentences_encoded": len(everything), "encode_seconds": round(encode_seconds, 2),
                 "classifier_seconds": {}}
    for t in tasks:
        t1 = time.perf_counter()
        res = run_task(data[t], emb, row, cfg, seed)
        out["classifier_seconds"][t] = round(time.perf_counter() - t1, 2)
        out["tasks"][t] = res["acc"]
        out["devacc"][t] = res["devacc"]
        out["details"][t] = res
        log.info("%s: acc %.2f (dev %.2f) in %.1fs%s", t, res["acc"], res["devacc"], out["classifier_seconds"][t],
                 f" [capped: {cap_summary(res)}]" if res.get("capped") else "")
    if capped:
        out["warning"] = capped_warning(max_train_sentences, max_test_sentences)
    return out

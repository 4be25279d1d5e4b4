"""STS evaluation with the SimCSE/SentEval protocol.

Parsing mirrors SentEval's loaders (senteval/sts.py, senteval/sick.py as modified by SimCSE):
  * STS12-16: ``STS.input.<set>.txt`` tab-separated sentence pairs, ``STS.gs.<set>.txt`` scores;
    pairs whose gold score is empty are skipped; sentences are whitespace-tokenized and re-joined
    with single spaces (SimCSE's batcher: ' '.join(tokens)).
  * STS-B: ``sts-{dev,test}.csv``, tab-separated; columns 5, 6 = sentences, column 4 = score.
  * SICK-R: ``SICK_test_annotated.txt``, header line skipped; columns 1, 2 = sentences, 3 = score.
Scores: cosine similarity, Spearman x100. STS12-16 report Spearman over the concatenation of
all their subsets (SimCSE's "all" setting); the average is over the 7 test tasks.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from scipy.stats import spearmanr

from csebench.core.errors import ConfigError, DataError
from csebench.core.io import read_utf8
from csebench.core.provenance import record_data
from csebench.evaluation import STS_TASKS
from csebench.evaluation.encoded import encoded

log = logging.getLogger(__name__)

STS_SUBSETS = {
    "STS12": ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    "STS13": ["FNWN", "headlines", "OnWN"],
    "STS14": ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"],
    "STS15": ["answers-forums", "answers-students", "belief", "headlines", "images"],
    "STS16": ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}
TEST_TASKS = STS_TASKS


@dataclass
class PairSet:
    """Sentence pairs with gold scores; ``groups`` names the subset of each pair."""

    sent1: list[str]
    sent2: list[str]
    scores: np.ndarray
    groups: list[str]
    duplicates_dropped: list[int] = field(default_factory=list)  # your own sets: line numbers of exact repeats


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise DataError(f"missing evaluation file: {path}")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"evaluation file is not UTF-8: {path}") from None


def _join(s: str) -> str:
    return " ".join(s.split())


def _score(value: str, path: Path, line: int) -> float:
    try:
        score = float(value)
    except ValueError:
        raise DataError(f"{path}:{line}: score {value!r} is not a number") from None
    if not np.isfinite(score):  # float() takes 'inf' and 'nan': one such score skews or voids a correlation
        raise DataError(f"{path}:{line}: score {value.strip()!r} is not a finite number")
    return score


def _columns(line: str, path: Path, lineno: int, need: int) -> list[str]:
    cols = line.split("\t")
    if len(cols) < need:
        raise DataError(f"{path}:{lineno}: expected at least {need} tab-separated columns, found {len(cols)}")
    return cols


def load_sts_year(root: Path, task: str) -> PairSet:
    folder = root / "STS" / f"{task}-en-test"
    s1, s2, scores, groups = [], [], [], []
    for subset in STS_SUBSETS[task]:
        inp, gs = folder / f"STS.input.{subset}.txt", folder / f"STS.gs.{subset}.txt"
        pairs = _read_lines(inp)
        gold = _read_lines(gs)
        if len(gold) != len(pairs):
            raise DataError(f"{gs}: {len(gold)} scores for {len(pairs)} sentence pairs in {inp}")
        for lineno, (pair, g) in enumerate(zip(pairs, gold), start=1):
            if g.strip() == "":  # SentEval skips pairs without a gold score
                continue
            cols = _columns(pair, inp, lineno, 2)
            s1.append(_join(cols[0]))
            s2.append(_join(cols[1]))
            scores.append(_score(g, gs, lineno))
            groups.append(subset)
        record_data(inp)
        record_data(gs)
    return PairSet(s1, s2, np.asarray(scores, dtype=np.float64), groups)


def load_stsb(root: Path, split: str) -> PairSet:
    path = root / "STS" / "STSBenchmark" / f"sts-{split}.csv"
    s1, s2, scores = [], [], []
    for lineno, line in enumerate(_read_lines(path), start=1):
        cols = _columns(line, path, lineno, 7)
        s1.append(_join(cols[5]))
        s2.append(_join(cols[6]))
        scores.append(_score(cols[4], path, lineno))
    record_data(path)
    return PairSet(s1, s2, np.asarray(scores), [split] * len(s1))


def load_sickr(root: Path, split: str = "test") -> PairSet:
    name = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}[split]
    path = root / "SICK" / name
    s1, s2, scores = [], [], []
    for lineno, line in enumerate(_read_lines(path)[1:], start=2):
        cols = _columns(line, path, lineno, 4)
        s1.append(_join(cols[1]))
        s2.append(_join(cols[2]))
        scores.append(_score(cols[3], path, lineno))
    record_data(path)
    return PairSet(s1, s2, np.asarray(scores), [split] * len(s1))


def load_task(root: str | os.PathLike, task: str) -> PairSet:
    root = Path(root)
    if task in STS_SUBSETS:
        return load_sts_year(root, task)
    if task == "STSBenchmark":
        return load_stsb(root, "test")
    if task == "STSBenchmark-dev":
        return load_stsb(root, "dev")
    if task == "SICKRelatedness":
        return load_sickr(root, "test")
    raise DataError(f"unknown STS task '{task}' (valid: {', '.join(TEST_TASKS + ['STSBenchmark-dev'])})")


# ----------------------------------------------------------------------------- your own STS data (sts_pairs)

PAIR_COLUMNS = ("sentence1", "sentence2", "score")
SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "test": "test"}  # split column value -> role
MIN_STS_PAIRS = 10  # fewer pairs give a Spearman correlation that means nothing (2 pairs: 100 or -100)


def _lines(lines: list[int], most: int = 8) -> str:
    return ", ".join(map(str, lines[:most])) + (f" and {len(lines) - most} more" if len(lines) > most else "")


def far_out_scores(scores: np.ndarray) -> list[int]:
    """Indexes of scores far outside the range the other rows span: a score beyond the others' lowest or
    highest by more than their whole span (-50 or 1e6 among scores of 0-5), peeled off from the
    extremes one at a time (so two such scores do not hide each other), at most half the rows."""
    order = np.argsort(scores, kind="stable")
    s = np.asarray(scores, dtype=np.float64)[order]
    i, j, out = 0, len(s) - 1, []
    while j - i >= 3 and len(out) < len(s) // 2:
        top = s[j - 1] > s[i] and s[j] - s[j - 1] > s[j - 1] - s[i]
        bottom = s[j] > s[i + 1] and s[i + 1] - s[i] > s[j] - s[i + 1]
        if not (top or bottom):
            break
        if top and (not bottom or s[j] - s[j - 1] >= s[i + 1] - s[i]):
            out.append(int(order[j]))
            j -= 1
        else:
            out.append(int(order[i]))
            i += 1
    return sorted(out)


def _pairs_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"STS pairs file not found: {path}")
    text = read_utf8(path)
    if not text.strip():
        raise DataError(f"{path} is empty: expected a header line (sentence1, sentence2, score[, split]) and one sentence pair per line")
    return text


def load_sts_pairs(path: str | os.PathLike, split: str | None = None, min_pairs: int = MIN_STS_PAIRS) -> PairSet:
    """Your own STS set: a .tsv (tab-separated, no quoting: quotes are text) or .csv (comma-separated, CSV
    quoting) whose header names the columns sentence1, sentence2, score and optionally split (train, dev or
    validation, test; other columns are ignored). ``split`` ("dev" or "test") keeps the rows of that split,
    all rows when the file has no split column. Checked as SentEval's files are: every row has the header's
    number of fields, scores are finite numbers, sentences are not empty; errors name the file and line.
    A pair (in either order) given twice in one split with two scores is an error; given twice with the same
    score, the repeat is dropped with a warning naming its line (``duplicates_dropped``). A score far outside
    the range of the file's other rows is a warning naming its line. Fewer than ``min_pairs`` pairs of the
    split asked for is an error."""
    path = Path(path)
    delimiter = {".tsv": "\t", ".tab": "\t", ".csv": ","}.get(path.suffix.lower())
    if delimiter is None:
        raise DataError(f"{path}: name an STS pairs file .tsv (tab-separated) or .csv (comma-separated)")
    kind = "tab-separated" if delimiter == "\t" else "comma-separated"
    reader = csv.reader(io.StringIO(_pairs_text(path), newline=""), delimiter=delimiter,
                        quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
    header = [h.strip().lower() for h in next(reader)]
    missing = [c for c in PAIR_COLUMNS if c not in header]
    if missing or len(set(header)) != len(header):
        what = f"lacks {', '.join(missing)}" if missing else "names a column twice"
        raise DataError(f"{path}:1: the header {what} (found: {', '.join(header)}); the first line names the "
                        f"{kind} columns sentence1, sentence2, score and optionally split")
    col = {c: header.index(c) for c in (*PAIR_COLUMNS, "split") if c in header}
    s1, s2, scores, groups, lines = [], [], [], [], []
    seen: dict[tuple, tuple[int, float]] = {}  # (split, pair in either order) -> first line, its score
    dropped: list[tuple[int, int, str]] = []  # (line, the line it repeats, split)
    for fields in reader:
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue  # a blank line (a trailing newline, a spacer)
        if len(fields) != len(header):
            raise DataError(f"{path}:{line}: expected {len(header)} {kind} fields ({', '.join(header)}), found {len(fields)}")
        a, b = _join(fields[col["sentence1"]]), _join(fields[col["sentence2"]])
        if not a or not b:
            raise DataError(f"{path}:{line}: {'sentence1' if not a else 'sentence2'} is empty")
        role = SPLITS.get(fields[col["split"]].strip().lower()) if "split" in col else "all"
        if role is None:
            raise DataError(f"{path}:{line}: split {fields[col['split']].strip()!r} is not one of {', '.join(SPLITS)}")
        score = _score(fields[col["score"]], path, line)
        first = seen.setdefault((role, *sorted((a, b))), (line, score))
        if first[0] != line:
            if first[1] != score:
                raise DataError(f"{path}:{line}: the pair of line {first[0]} again, with score {score:g} (line {first[0]}: "
                                f"{first[1]:g}): one pair has one gold score; keep the right row")
            dropped.append((line, first[0], role))
            continue
        s1.append(a)
        s2.append(b)
        scores.append(score)
        groups.append(role)
        lines.append(line)
    if not scores:
        raise DataError(f"{path} has no sentence pairs (only a header)")
    record_data(path)
    if dropped:
        one = len(dropped) == 1
        log.warning("%s: %s %s %s the pair and score of %s %s: dropped, each pair is scored once", path,
                    "line" if one else "lines", _lines([d for d, _, _ in dropped]), "repeats" if one else "repeat",
                    "line" if one else "lines", _lines([f for _, f, _ in dropped]))
    far = far_out_scores(np.asarray(scores))
    if far:
        rest = np.delete(np.asarray(scores), far)
        one = len(far) == 1
        log.warning("%s: the %s %s (%s) %s far outside the range of the file's other rows (%g to %g): a typo, or another "
                    "scale?", path, "score of line" if one else "scores of lines", _lines([lines[i] for i in far]),
                    ", ".join(f"{scores[i]:g}" for i in far[:8]), "lies" if one else "lie", rest.min(), rest.max())
    keep = [i for i, g in enumerate(groups) if split is None or g in (split, "all")]
    if not keep:
        raise DataError(f"{path} has no rows with split {split} (its splits: {', '.join(sorted(set(groups)))})")
    gold = np.asarray(scores)[keep]
    what = f"{split or 'all'} pair{'' if len(keep) == 1 else 's'}"
    if len(keep) < min_pairs:
        raise DataError(f"{path}: {len(keep)} {what}, fewer than the {min_pairs} a Spearman correlation is scored on "
                        f"(with 2 pairs it is always 100 or -100): add pairs")
    if np.ptp(gold) == 0:
        raise DataError(f"{path}: {len(keep)} {what}, all scored {gold[0]:g}: a Spearman correlation "
                        "needs pairs with different scores")
    return PairSet([s1[i] for i in keep], [s2[i] for i in keep], gold, [groups[i] for i in keep],
                   [d for d, _, g in dropped if split is None or g in (split, "all")])


def sts_pairs_spec(spec: str) -> tuple[str, Path]:
    """``NAME=FILE`` or ``FILE`` (named by its stem): a --sts-pairs argument."""
    name, sep, file = spec.partition("=")
    if not sep or "/" in name or os.sep in name:
        return Path(spec).stem, Path(spec)
    return name, Path(file)


def load_extra_sets(specs: list[str] | None, max_pairs: int | None = None, seed: int = 1111) -> dict[str, PairSet]:
    """The test rows of your own STS sets (--sts-pairs), each capped as the 7 tasks are (cap_pairs)."""
    sets: dict[str, PairSet] = {}
    for spec in specs or []:
        name, path = sts_pairs_spec(spec)
        if name in sets:
            raise DataError(f"--sts-pairs: two sets named '{name}': name them NAME=FILE")
        sets[name] = cap_pairs(load_sts_pairs(path, "test"), max_pairs, seed)
    return sets


def cosine_rows(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    a = a.double()
    b = b.double()
    return ((a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))).numpy()


def spearman100(sys_scores: np.ndarray, gold: np.ndarray) -> float:
    """Spearman x100; NaN (undefined, written as null) when either side is constant: nothing to rank."""
    if len(gold) < 2 or np.ptp(sys_scores) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(spearmanr(sys_scores, gold)[0] * 100.0)


EncodeFn = Callable[[list[str]], torch.Tensor]


def cap_pairs(ps: PairSet, max_pairs: int | None, seed: int = 1111) -> PairSet:
    """CPU-demo shortcut (not the papers' protocol): a seeded subset of about ``max_pairs`` pairs (floor
    per subset, so at most that many unless a small subset's minimum adds a few), drawn per subset
    (``groups``) in proportion to its size, each keeping at least min(its size, 10) pairs; SentEval's
    order is kept. None, or a task with at most ``max_pairs`` pairs: unchanged."""
    from csebench.evaluation.transfer import stratified_subset

    if max_pairs is None or len(ps.scores) <= max_pairs:
        return ps
    if max_pairs < 2:
        raise ConfigError(f"max_sts_pairs must be at least 2, got {max_pairs}")
    keep = np.sort(stratified_subset(np.asarray(ps.groups), max_pairs, seed))
    return PairSet([ps.sent1[i] for i in keep], [ps.sent2[i] for i in keep], ps.scores[keep], [ps.groups[i] for i in keep],
                   ps.duplicates_dropped)


def load_test_tasks(root: str | os.PathLike, tasks: list[str] | None = None, max_pairs: int | None = None,
                    seed: int = 1111) -> dict[str, PairSet]:
    """The STS test tasks' pairs, each capped at ``max_pairs`` (see cap_pairs; None = all)."""
    return {t: cap_pairs(load_task(root, t), max_pairs, seed) for t in tasks or TEST_TASKS}


def capped_sts_warning(max_pairs: int) -> str:
    return (f"each STS task was scored on a seeded subset of about {max_pairs} pairs (max_sts_pairs, CPU demo "
            "scale): not comparable with published STS numbers")


def evaluate_sts(encode: EncodeFn, root: str | os.PathLike, tasks: list[str] | None = None,
                 pairsets: dict[str, PairSet] | None = None, keep_pairs: bool = False,
                 max_pairs: int | None = None, seed: int = 1111, extra: dict[str, PairSet] | None = None) -> dict:
    """Spearman x100 per task (+ per-subset for STS12-16) and the average of the 7 test tasks.

    ``encode`` maps a list of sentences to an (n, d) tensor. All tasks' sentences are pooled
    and deduplicated, so one call encodes every distinct sentence exactly once.
    With ``keep_pairs`` the result also holds ``pairs[task] = (cosine per pair, gold per pair)``
    (numpy arrays, not JSON; see ``save_pairs``) for paired significance tests.
    ``max_pairs`` (CPU demo only) scores each task on a seeded subset (cap_pairs); the result is then
    marked ``"protocol": "capped"`` with a warning.
    ``extra`` (your own STS sets, load_extra_sets) are scored under ``extra_sets``, beside the tasks:
    never in ``tasks``, the average or the per-pair file.
    """
    tasks = tasks or TEST_TASKS
    sets = pairsets or load_test_tasks(root, tasks, max_pairs, seed)
    extra = extra or {}
    everything = sorted({s for ps in (*sets.values(), *extra.values()) for s in (*ps.sent1, *ps.sent2)})
    emb = encoded(encode, everything)
    row = {s: i for i, s in enumerate(everything)}
    _refuse_zero_vectors(emb, everything, row, {**sets, **extra}, getattr(encode, "source", None) or "the encode function")

    def cosines(ps: PairSet) -> np.ndarray:
        return cosine_rows(emb[torch.as_tensor([row[s] for s in ps.sent1])], emb[torch.as_tensor([row[s] for s in ps.sent2])])

    results: dict = {"tasks": {}, "subsets": {}, "n_pairs": {}}
    for task, ps in sets.items():
        sims = cosines(ps)
        results["tasks"][task] = spearman100(sims, ps.scores)
        results["n_pairs"][task] = len(ps.scores)
        if keep_pairs:
            results.setdefault("pairs", {})[task] = (sims, np.asarray(ps.scores, dtype=np.float64))
        if task in STS_SUBSETS:
            groups = np.asarray(ps.groups)
            results["subsets"][task] = {g: spearman100(sims[groups == g], ps.scores[groups == g]) for g in STS_SUBSETS[task]}
    if extra:
        results["extra_sets"] = {name: {"spearman": spearman100(cosines(ps), ps.scores), "n_pairs": len(ps.scores),
                                        "split": "test" if "test" in ps.groups else "all",
                                        "duplicates_dropped": len(ps.duplicates_dropped)} for name, ps in extra.items()}
    test = [t for t in TEST_TASKS if t in results["tasks"]]
    if len(test) == len(TEST_TASKS):
        results["avg"] = float(np.mean([results["tasks"][t] for t in TEST_TASKS]))
    capped = max_pairs is not None and pairsets is None
    results["protocol"] = "capped" if capped else "full"
    if capped:
        results["max_sts_pairs"] = max_pairs
        results["warning"] = capped_sts_warning(max_pairs)
    return results


def _refuse_zero_vectors(emb: torch.Tensor, sentences: list[str], row: dict[str, int], sets: dict[str, PairSet],
                        what: str) -> None:
    """An all-zero embedding (finite, norm 0) has no direction: its cosine with any vector is 0/0, NaN, and one
    such pair makes its task's Spearman correlation and the STS average NaN, silently. Refused in one line
    naming the first task and pair that reads one, and the sentence."""
    zero = emb.double().norm(dim=1) == 0
    if not bool(zero.any()):
        return
    for task, ps in sets.items():
        for i, (a, b) in enumerate(zip(ps.sent1, ps.sent2)):
            side = "sentence1" if zero[row[a]] else "sentence2" if zero[row[b]] else None
            if side is None:
                continue
            text = a if side == "sentence1" else b
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise DataError(f"{what} returned an all-zero vector (norm 0) for {task} pair {i} ({side} {shown!r}; "
                            f"{int(zero.sum())} of the {len(sentences)} sentences encoded have one): its cosine "
                            f"similarity is undefined (0/0), which would make {task} and the STS average NaN; an "
                            "embedding must have a direction (check the model's pooling and weights, or what the "
                            "encode function returns for that sentence)")


def save_pairs(path: str | os.PathLike, pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Atomically write per-pair predictions as ``<task>.sim`` / ``<task>.gold`` arrays in one .npz."""
    from csebench.core.io import atomic_path

    arrays = {}
    for task, (sim, gold) in pairs.items():
        arrays[f"{task}.sim"] = np.asarray(sim, dtype=np.float64)
        arrays[f"{task}.gold"] = np.asarray(gold, dtype=np.float64)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_pairs(path: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from csebench.core.io import load_npz

    what, remedy = "an STS pairs file (`eval-sts --pairs-out`)", "delete it and rerun `csebench eval-sts --pairs-out`"
    z = load_npz(path, what, remedy)
    tasks = sorted({k.rsplit(".", 1)[0] for k in z})
    if any(f"{t}.sim" not in z or f"{t}.gold" not in z for t in tasks):
        raise DataError(f"{path} is damaged or not {what}: {remedy}")
    return {t: (z[f"{t}.sim"], z[f"{t}.gold"]) for t in tasks}


def sts_pair_similarities(encode: EncodeFn, ps: PairSet) -> np.ndarray:
    """Cosine similarity of every pair (used by analyses and paired significance tests)."""
    uniq = sorted(set(ps.sent1) | set(ps.sent2))
    emb = encode(uniq)
    row = {s: i for i, s in enumerate(uniq)}
    return cosine_rows(emb[torch.as_tensor([row[s] for s in ps.sent1])], emb[torch.as_tensor([row[s] for s in ps.sent2])])

"""SentEval probing tasks (Conneau et al. 2018) with SentEval's protocol (senteval/probing.py).

SSCL's Table 4 reports SentLen (surface), TreeDepth (syntactic) and CoordInv (semantic); all ten
tasks of SentEval's data/probing/ folder are supported.

Data: one UTF-8 file per task, one example per line ``split<TAB>label<TAB>sentence`` with split
``tr``/``va``/``te`` (train/dev/test; 100k/10k/10k in SentEval's files). As SentEval reads it: the line is
right-stripped and split on tabs, column 0 is the split, column 1 the label and the *last* column the
sentence, whitespace-tokenized. The label strings of the train split, sorted as strings, get class ids
0..C-1 (so "10" sorts before "5"; this only fixes the class order). Each split is ordered by
(number of tokens, class id), stably, as SentEval's run() does before it embeds.

Classifier: SentEval's SplitClassifier, exactly as for SST-2 (evaluation/transfer.py, which is reused
here): for each L2 in {1e-5 .. 1e-2} a classifier is trained on train with early stopping on dev;
the best dev accuracy picks L2 and that model's test accuracy x100 (rounded to 2 decimals) is the
score. The classifier settings are the ones the transfer tasks use (SimCSE's "test" mode: logistic
regression, Adam, batch 64, tenacity 5, epoch size 4), which is what SimCSE's evaluation script passes
to SentEval for every task, probing tasks included.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from csebench.core.errors import DataError
from csebench.core.provenance import record_data
from csebench.evaluation import transfer as T

log = logging.getLogger(__name__)

# task (Conneau et al. 2018 / SSCL name) -> file in SentEval's data/probing/
PROBING_FILES = {
    "SentLen": "sentence_length.txt",
    "WC": "word_content.txt",
    "TreeDepth": "tree_depth.txt",
    "TopConst": "top_constituents.txt",
    "BShift": "bigram_shift.txt",
    "Tense": "past_present.txt",
    "SubjNum": "subj_number.txt",
    "ObjNum": "obj_number.txt",
    "SOMO": "odd_man_out.txt",
    "CoordInv": "coordination_inversion.txt",
}
# SentEval's own task names (senteval/engine.py) are accepted as aliases
SENTEVAL_NAMES = {
    "Length": "SentLen", "WordContent": "WC", "Depth": "TreeDepth", "TopConstituents": "TopConst",
    "BigramShift": "BShift", "SubjNumber": "SubjNum", "ObjNumber": "ObjNum", "OddManOut": "SOMO",
    "CoordinationInversion": "CoordInv",
}
TASKS = list(PROBING_FILES)
SSCL_TASKS = ("SentLen", "TreeDepth", "CoordInv")  # SSCL Table 4
SPLITS = {"tr": "train", "va": "dev", "te": "test"}


def resolve_tasks(tasks) -> list[str]:
    """Canonical task names (SentEval's names accepted), duplicates dropped, order kept."""
    out = []
    for t in tasks:
        name = SENTEVAL_NAMES.get(t, t)
        if name not in PROBING_FILES:
            raise DataError(f"unknown probing task '{t}' (valid: {', '.join(TASKS)}; "
                            f"SentEval's names {', '.join(SENTEVAL_NAMES)} are accepted too)")
        if name not in out:
            out.append(name)
    return out


def load_probing_file(path: str | os.PathLike, task: str) -> T.TaskData:
    """One probing file as SentEval reads it; malformed lines raise DataError naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing probing-task file: {path} (SentEval's data/probing/{path.name})")
    rows: dict[str, list[tuple[int, str, list[str]]]] = {s: [] for s in SPLITS.values()}
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{bad_line}: not valid UTF-8 ({exc.reason})") from None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # text-mode line iteration
    if lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, start=1):
        cols = line.rstrip().split("\t")
        if len(cols) < 3:
            raise DataError(f"{path}:{lineno}: expected 'split<TAB>label<TAB>sentence', "
                            f"found {len(cols)} column(s): {line.strip()[:60]!r}")
        if cols[0] not in SPLITS:
            raise DataError(f"{path}:{lineno}: unknown split {cols[0][:20]!r} (valid: tr, va, te)")
        if not cols[1].strip():
            raise DataError(f"{path}:{lineno}: empty label")
        rows[SPLITS[cols[0]]].append((lineno, cols[1], cols[-1].split()))
    for code, split in SPLITS.items():
        if not rows[split]:
            raise DataError(f"{path}: no '{code}' ({split}) lines; expected tr, va and te examples")
    labels = sorted(np.unique([lab for _, lab, _ in rows["train"]]).tolist())  # SentEval: sorted(np.unique(train y))
    class_id = {lab: i for i, lab in enumerate(labels)}
    splits = {}
    for split, items in rows.items():
        for n, lab, _ in items:
            if lab not in class_id:
                raise DataError(f"{path}:{n}: label {lab[:30]!r} of the {split} split never occurs in the train split")
        splits[split] = T._sorted_split([tok for _, _, tok in items], [class_id[lab] for _, lab, _ in items])
    record_data(path, f"probing/{path.name}")
    return T.TaskData(task, len(labels), splits, info={"labels": labels, "file": str(path)})


def load_probing_task(root: str | os.PathLike, task: str) -> T.TaskData:
    name = resolve_tasks([task])[0]
    return load_probing_file(Path(root) / PROBING_FILES[name], name)


def prepared_probing_tasks(root: str | os.PathLike, tasks=SSCL_TASKS, max_train_sentences: int | None = None,
                           seed: int = 1111, task_data: dict[str, T.TaskData] | None = None,
                           max_test_sentences: int | None = None) -> dict[str, T.TaskData]:
    """The tasks as the classifiers see them: loaded (or taken from ``task_data``) and capped."""
    names = resolve_tasks(tasks)
    data = {t: (task_data or {}).get(t) or load_probing_task(root, t) for t in names}
    for t in names:
        T.cap_training_set(data[t], max_train_sentences, seed)
        T.cap_evaluation_sets(data[t], max_test_sentences, seed)
    return data


def evaluate_probing(encode: T.EncodeFn, probing_root: str | os.PathLike, tasks=SSCL_TASKS, seed: int = 1111,
                     max_train_sentences: int | None = None, cfg: T.ClassifierConfig = T.SIMCSE_TEST_MODE,
                     task_data: dict[str, T.TaskData] | None = None, max_test_sentences: int | None = None) -> dict:
    """Test accuracy x100 per probing task (dev-selected L2), SentEval's SplitClassifier protocol.

    ``encode`` maps sentences to an (n, d) tensor and is called once, on every distinct sentence of
    the tasks. ``max_train_sentences`` / ``max_test_sentences`` (not SentEval's protocol) subsample
    each train split / each dev and test split; the result then says ``"protocol": "capped"``.
    """
    data = prepared_probing_tasks(probing_root, tasks, max_train_sentences, seed, task_data, max_test_sentences)
    out = T.evaluate_tasks(encode, data, cfg, seed, max_train_sentences, max_test_sentences)
    out["probing_root"] = str(probing_root)
    return out

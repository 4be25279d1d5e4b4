"""`csebench rehearse`: every distinct run of the default target through the real code, offline, on CPU,
before a GPU-hour is spent.

Each distinct run (runs that differ only in their seed or learning rate share one) goes through the
commands its Snakemake jobs run, in this process, with the paper backbones built as their published
architectures with random weights (csebench.model.standins):

  1. ``csebench train``: 2 steps at a small batch; the first attempt stops right after its checkpoint at
     step 1 (as a killed job would), the second resumes from it (train_timing.json must say so);
     STS-B dev at the last step. An evaluation-only run (``train: false``) writes its untrained model.
  2. ``csebench teacher-cache`` for the teacher runs of a DistillCSE student, before the student.
  3. ``csebench embed``, ``eval-sts`` and ``eval-transfer`` on capped sets; ``eval-probing`` where the
     target reads probing results; the suite's views of the run and its model card.
  4. every analysis the default target's tables and figures read of the run (the registry's input
     files): align_uniform, cosine_dist, layers, token_matrix, neighbours, distill_loss,
     model-correlation, ensemble-sts, topk-negatives, teacher-logits.

What is made small, and why the code paths stay those of the paper runs (README, "Rehearsal"): the corpus (128 demo sentences), the steps (2), the batch (8, or the run's own where its
settings name in-batch ranks: DistillCSE's rank-range shuffling), the length (16 tokens), the dev, STS,
transfer and probing sets (seeded subsets, the code's own caps), and a student's teacher components
(its first 2 seeds: the bank of M teachers is one code path for any M >= 2), and what an objective term waits
for (ObjectiveTerm.at_rehearsal_scale: IS-CSE's buffer of one batch). Every setting that selects
code (objective terms and their options, pooler, projection head, layers, dropout, precision) is the
run's own. Each term of a run must fire: train.json's terms_fired names the step at which it first changed
the loss, and the run without it gives other losses (Rehearsal.terms_fired); else the run fails. The rehearsal's params.yaml is written beside its results, and every result it writes says
"rehearsal" in its provenance.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import io
import logging
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from csebench.model.architectures import architecture
from csebench.objectives import at_rehearsal_scale
from csebench.study.params import deep_merge, digest
from csebench.core.errors import ConfigError, TrainingError
from csebench.core.startup import frozen_imports
from csebench.study.typed import Params

log = logging.getLogger("csebench.workflow.rehearse")  # a line per run as it passes or fails (the console shows this logger)
TRACEBACKS = logging.getLogger("csebench.workflow.rehearse.tracebacks")  # a failure's traceback: rehearse.log, not the console

STEPS, BATCH, MAX_LEN, CORPUS = 2, 8, 16, 128
SENTEVAL_LINES = 12  # each SentEval file cut to its first lines (every task and subset kept)
SENTEVAL_TASKS = ("STS", "SICK")  # cut; the transfer tasks are capped by eval-transfer itself (TREC needs 10 per class)
DEV_PAIRS, STS_PAIRS, TRANSFER_TRAIN, TRANSFER_TEST = 16, 4, 64, 16  # 10-fold CV: 10 of each class
SPLIT_TRAIN, SPLIT_TEST = 16, 8  # the split-classifier tasks alone (Rehearsal.transfer_tasks)
SPLIT_TASKS = ("SST2", "TREC", "MRPC")  # transfer tasks with their own dev/test splits (no 10-fold CV)
DEPTH = 2  # make rehearse: layers of each backbone unless its settings need more (csebench.model.standins.depth_for)
TEACHER_COMPONENTS = 2
PROBING_ROWS = {"tr": 48, "va": 16, "te": 16}
ANALYSIS = {"topk_batch_sizes": [8, 16], "topk_repeats": 2, "topk_pool_size": 64, "logit_batch_size": 16,
            "logit_batches": 2, "buffer_size": 64, "neighbours_k": 3, "neighbour_queries": 2, "split": "test"}


@dataclass
class Distinct:
    """One distinct run of the target: the (suite, run, seed) listings that share it, the first names it."""

    id: str  # the first listing's key (the rehearsal's folder name)
    listings: list[tuple[str, str, int]]
    backbone: str = ""
    train: bool = True
    evaluated: bool = False
    extras: list[str] = field(default_factory=list)  # analyses and probing the target reads of it

    @property
    def first(self) -> tuple[str, str, int]:
        return self.listings[0]


def distinct_runs(params: Params, suites: list[str]) -> list[Distinct]:
    """The target's runs (teachers included) grouped by what they compute, seed and learning rate left out."""
    groups: dict[str, Distinct] = {}
    for suite in suites:
        of = params.suite(suite)
        evaluated = set(of.evaluated_jobs())
        for run, seed in of.jobs_with_teachers():
            cfg = of.resolve(run, seed)
            ident = cfg.identity(seed=False)
            ident["training"].pop("learning_rate", None)
            d = groups.setdefault(digest(ident), Distinct(cfg.key(), [], cfg.backbone.model, cfg.train))
            d.listings.append((suite, run, int(seed)))
            d.evaluated |= (run, seed) in evaluated
    return list(groups.values())


# ----------------------------------------------------------------------------- the rehearsal's params


def _teachers_cut(spec):
    """A student's teacher components cut to TEACHER_COMPONENTS (one seed per teacher run when it names several)."""
    from csebench.study.teacherspec import parse_teachers

    entries = parse_teachers(spec, "objectives.distillation")
    keep = max(1, TEACHER_COMPONENTS // len(entries))
    return [e if "model" in e else {"run": e["run"], "seeds": None if e["seeds"] is None else list(e["seeds"])[:keep]}
            for e in entries]


def rehearsal_params(params: Params, suites: list[str], corpus: Path, probing: Path, senteval: Path, out: Path) -> dict:
    """params.yaml for the rehearsal: the target's suites only, each run with the rehearsal's sizes as its
    own (last-merged) training settings, every data source on the rehearsal's files, capped evaluation."""
    rp = params.raw_copy()  # the file's mapping, changed into the rehearsal's params.yaml
    rp["paths"] = {**(rp.get("paths") or {}), "data": str(out / "data"), "results": str(out / "results")}
    sources = {params.suite(s).data for s in suites}
    for name in sources:
        rp["data"][name] = {"corpus": {"path": str(corpus)}, "senteval": {"path": str(senteval)},
                            "probing": {"path": str(probing)}}
    rp["suites"] = {}
    for suite in suites:
        of = params.suite(suite)
        spec = {k: copy.deepcopy(v) for k, v in of.spec.items() if k not in ("backbones", "methods", "runs")}
        runs = []
        for run in of.runs():
            cfg = of.resolve(run["name"], 0)
            run = {k: v for k, v in run.items() if k != "name" and not (k in ("evaluate", "train") and v is True)}
            distill = cfg.objectives.get("distillation")
            ranks = bool(distill and distill.get("shuffle") == "rank_range")
            t = cfg.training
            small = {"max_steps": STEPS, "epochs": 1, "eval_steps": STEPS, "checkpoint_steps": 1, "log_steps": 1,
                     "batch_size": t.batch_size if ranks else min(t.batch_size, BATCH),
                     "max_seq_length": min(t.max_seq_length, MAX_LEN), "dev_max_pairs": DEV_PAIRS, "eval_batch_size": 32}
            run["training"] = deep_merge(run.get("training") or {}, small)
            if distill and cfg.train:
                run["objectives"] = deep_merge(run.get("objectives") or {},
                                               {"distillation": {"teachers": _teachers_cut(distill["teachers"])}})
            if cfg.train and (scaled := at_rehearsal_scale(cfg.objectives, small["batch_size"], STEPS)):
                # a term that waits (a buffer that fills over steps) made to act within the rehearsal's steps
                run["objectives"] = deep_merge(run.get("objectives") or {}, scaled)
            runs.append((cfg.name, run))
        spec["runs"] = dict(runs)
        spec["evaluation"] = {**(spec.get("evaluation") or {}), "max_sts_pairs": STS_PAIRS}
        spec["transfer"] = {"max_train_sentences": TRANSFER_TRAIN, "max_test_sentences": TRANSFER_TEST}
        rp["suites"][suite] = spec
    return rp


def write_corpus(src: Path, out: Path, n: int = CORPUS) -> Path:
    from csebench.core.corpus import read_corpus
    from csebench.core.io import write_text

    write_text(out, "\n".join(read_corpus(src)[:n]) + "\n")
    return out


def write_senteval(src: Path, dst: Path, lines: int = SENTEVAL_LINES) -> Path:
    """SentEval's downstream/ folder with every STS and SICK file cut to its first ``lines`` lines (input and
    gold files of a task alike, headers kept; `csebench embed` reads STS-B test in full), and links
    to the transfer tasks' folders (capped by eval-transfer's own caps). The cut files differ from the
    published ones: results say so (provenance ``data_not_published``; the manifest check is off meanwhile)."""
    src = Path(src) / "downstream" if (Path(src) / "downstream").is_dir() else Path(src)
    for task in sorted(p.name for p in src.iterdir() if p.is_dir()):
        out = dst / "downstream" / task
        if task not in SENTEVAL_TASKS:
            if not out.exists():
                out.parent.mkdir(parents=True, exist_ok=True)
                out.symlink_to(src / task, target_is_directory=True)
            continue
        for f in sorted((src / task).rglob("*")):
            if f.is_file():
                target = out / f.relative_to(src / task)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(b"".join(f.read_bytes().splitlines(keepends=True)[:lines]))
    return dst


def write_probing(sentences: list[str], folder: Path, seed: int = 0) -> Path:
    """SentEval-format probing files (split, label, sentence) for SSCL's tasks, made from the corpus: SentLen
    labelled by length bins as SentEval's are, TreeDepth and CoordInv with seeded labels (the rehearsal
    checks the code path, not the scores)."""
    import random

    from csebench.evaluation.probing import PROBING_FILES, SSCL_TASKS
    from csebench.core.io import write_text

    rng = random.Random(seed)
    rows = [s for n, s in zip(range(sum(PROBING_ROWS.values())), sentences)]
    splits = [split for split, n in PROBING_ROWS.items() for _ in range(n)]
    labels = {"SentLen": lambda s: str(min(len(s.split()) // 5, 5)), "TreeDepth": lambda s: str(rng.randint(5, 11)),
              "CoordInv": lambda s: rng.choice(["O", "I"])}
    for task in SSCL_TASKS:
        lines = [f"{split}\t{labels[task](s)}\t{s}" for split, s in zip(splits, rows)]
        write_text(folder / PROBING_FILES[task], "\n".join(lines) + "\n")
    return folder


# ----------------------------------------------------------------------------- running the commands


class _Interrupted(Exception):
    pass


def _stop_after_checkpoint(cfg, corpus, senteval, out, cache, teachers) -> int:
    """The first attempt of a run: the real Trainer, stopped right after it wrote its first checkpoint
    (what a job killed there leaves). Returns the step of that checkpoint."""
    from csebench.training.trainer import Trainer

    class FirstAttempt(Trainer):
        def save_checkpoint(self):
            super().save_checkpoint()
            raise _Interrupted(self.state.step)

    step = None
    try:
        FirstAttempt(cfg, corpus, senteval, out, cache_dir=cache, show_progress=False, teacher_cache=teachers,
                     dev_file=cfg.dev_file).run()
    except _Interrupted as stop:
        step = int(stop.args[0])
    gc.collect()  # the first attempt's model and optimizer (a Trainer is in reference cycles) before the next
    if step is None:
        raise TrainingError(f"{cfg.run_id}: the first attempt finished without writing a checkpoint")
    return step


class Rehearsal:
    def __init__(self, main, params: Params, suites: list[str], out: Path, params_file: Path, senteval: str,
                 corpus: Path, probing: Path, depth: int | None = DEPTH):
        self.main = main  # csebench.cli.main: every step is the command a user would type
        self.rp, self.suites, self.out, self.pfile = params, suites, out, params_file
        self.senteval, self.corpus, self.probing, self.depth = senteval, corpus, probing, depth
        self.cache = str(out / "data" / "cache")
        self.trained: dict[tuple[str, int], Path] = {}  # (rehearsal key, seed) -> run folder
        self.ev = {s: params.suite(s).eval_name for s in suites}
        self.steps: dict[str, int] = {}
        self.transfer_kinds: set[tuple] = set()
        self.reused = 0
        self.fired: dict[Path, dict[str, dict]] = {}  # run folder -> its train.json's terms_fired, checked

    def cli(self, *argv: str, params: bool = True) -> None:
        argv = [str(a) for a in argv]
        full = [argv[0], "--params", str(self.pfile), *argv[1:]] if params else argv
        t0 = time.perf_counter()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):  # its one-line error, for the report
            rc = self.main(full)
        self.steps[argv[0]] = self.steps.get(argv[0], 0) + 1
        log.debug("csebench %s: %.1f s", " ".join(argv[:1]), time.perf_counter() - t0)
        if rc == 130:  # Ctrl-C inside the command, which caught it: the rehearsal is interrupted, not a run failed
            raise KeyboardInterrupt
        if rc != 0:
            raise TrainingError(f"{err.getvalue().strip()} [csebench {' '.join(full)}]")

    def key(self, suite: str, run: str) -> str:
        return self.rp.runs.key(suite, run)

    def folder(self, suite: str, run: str, seed: int) -> Path:
        """The run's folder, named by its key under the rehearsal's settings (so a rerun with other sizes
        reuses nothing; two runs of the target that the rehearsal's sizes make alike share it)."""
        return self.out / "results" / "runs" / self.key(suite, run) / f"seed{seed}"

    def train(self, suite: str, run: str, seed: int, resume: bool = False) -> Path:
        """Train (suite, run, seed) once (its teachers and their caches first); ``resume``: stop after the
        first checkpoint and resume, as a killed and rerun job does."""
        k = (self.key(suite, run), int(seed))
        if k in self.trained and any((self.trained[k] / "model").glob("*.safetensors")):
            return self.trained[k]
        of = self.rp.suite(suite)
        cfg = of.resolve(run, seed)
        from csebench.model.standins import active, depth_for

        teachers = []
        from csebench.core.paths import teacher_cache
        from csebench.study.teacherspec import teacher_representation

        rep = teacher_representation(cfg.objectives)  # DCLR's teacher_representation: training reads another cache
        for t, ts in of.teacher_jobs(run, seed):
            folder = self.train(suite, t, ts)
            cache = Path(teacher_cache(str(folder), rep))
            if not cache.is_file():
                tcfg = of.resolve(t, ts)
                self.cli("teacher-cache", "--model", folder / "model", "--corpus", self.corpus, "--out", cache,
                         "--max-seq-length", tcfg.training.max_seq_length, "--representation", rep,
                         "--cache-dir", self.cache, params=False)
            teachers.append(str(cache))
        out = self.folder(suite, run, seed)
        again = (out / "train.json").is_file()  # rehearsed before: by an earlier `csebench rehearse`, or a run alike
        if again and any((out / "model").glob("*.safetensors")) and self._fired_recorded(cfg, out):
            self.reused += 1
            self.trained[k] = out
            self.fired[out] = self.terms_fired(cfg, out, teachers, ablate=False)
            return out
        active().depth = depth_for(cfg, self.depth)
        argv = ["train", "--suite", suite, "--run", run, "--seed", seed, "--senteval", self.senteval, "--out", out,
                "--cache-dir", self.cache, "--no-progress"]
        if cfg.train:
            argv += ["--corpus", self.corpus] + [a for t in teachers for a in ("--teacher-cache", t)]
        if again:  # its weights were dropped (drop_weights) and something reads them now: the same run again, and
            import shutil  # its evaluation too (the embeddings table checks the weights it was made from)

            for ev in out.glob("eval-*"):
                shutil.rmtree(ev)
            self.cli(*argv, "--force")
        elif resume and cfg.train:
            import shutil  # a checkpoint an interrupted rehearsal left: this one's stop and resume start afresh

            for stale in ("checkpoint", ".checkpoint.old"):
                shutil.rmtree(out / stale, ignore_errors=True)
            step = _stop_after_checkpoint(cfg, str(self.corpus), self.senteval, out, self.cache, teachers)
            self.cli(*argv)
            from csebench.core.io import read_json

            timing = read_json(out / "train_timing.json")
            if timing.get("resumed_from_step") != step:
                raise TrainingError(f"{cfg.run_id}: the rerun did not resume from the checkpoint of step {step} "
                                    f"(train_timing.json: {timing})")
        else:
            self.cli(*argv)
        self.trained[k] = out
        self.fired[out] = self.terms_fired(cfg, out, teachers)
        return out

    @staticmethod
    def _fired_recorded(cfg, out: Path) -> bool:
        """Whether a finished run's train.json says which of its terms fired (a rehearsal by an older csebench did
        not record it: that run is rehearsed again)."""
        from csebench.core.io import read_json

        return not (cfg.train and cfg.objectives) or "terms_fired" in read_json(out / "train.json")

    def terms_fired(self, cfg, out: Path, teachers: list[str], ablate: bool = True) -> dict[str, dict]:
        """Every objective term of the run fired: train.json says at which step it first changed the loss (a
        finite, non-zero loss part, or changed negatives, views, pooling) and, with ``ablate``, the same run
        without the term gives other losses at the rehearsed steps. A term that did not stops the run with one
        line naming it and why (a waiting term says what it waited for)."""
        from csebench.core.io import read_json

        if not (cfg.train and cfg.objectives):
            return {}
        fired = read_json(out / "train.json").get("terms_fired") or {}
        for key in cfg.objectives:
            record = fired.get(key)
            if record is None:
                raise TrainingError(f"{key}: train.json records nothing of this term (terms_fired)")
            if record["step"] is None:
                raise TrainingError(f"{key} {record['why']}")
        whole = self.short_run(cfg, teachers) if ablate else None
        if whole is not None:
            for key in cfg.objectives:
                other = dataclasses.replace(cfg, objectives={k: v for k, v in cfg.objectives.items() if k != key})
                without = self.short_run(other, teachers)
                if without is not None and without[0] == whole[0] and _same_weights(without[1], whole[1]):
                    raise TrainingError(f"{key} changed nothing: the run's losses at its {len(whole[0])} steps "
                                        f"({', '.join(f'{x:.6f}' for x in whole[0])}) and weights equal those of the same "
                                        f"run without it")
        return fired

    def short_run(self, cfg, teachers: list[str]) -> tuple[list[float], dict] | None:
        """The exact losses of the rehearsed steps of ``cfg`` and the weights they leave (train_curve.csv rounds to 6
        decimals: a term whose effect at random initialisation is smaller, such as GS-InfoNCE's, would look like
        none), or None where the configuration cannot run (a term that needs the one removed)."""
        import tempfile

        from csebench.training.trainer import Trainer

        with tempfile.TemporaryDirectory(prefix="ablation-", dir=self.out) as tmp:
            try:
                tr = Trainer(cfg, str(self.corpus), self.senteval, tmp, cache_dir=self.cache, show_progress=False,
                             teacher_cache=teachers or None, dev_file=cfg.dev_file)
            except ConfigError as exc:
                log.debug("%s with objectives %s: not compared (%s)", cfg.run_id, sorted(cfg.objectives), exc)
                return None
            losses = tr.step_losses(tr.total_steps)
            weights = {k: v.detach().clone() for k, v in tr.encoder.state_dict().items()}
            del tr
            gc.collect()
        return losses, weights

    def full_transfer(self, folder: Path) -> bool:
        """All 7 transfer tasks for the first model of each kind (class, width, evaluation pooler, projection:
        what the evaluation's code depends on), from the embeddings table as the pipeline does; for the others
        the split-classifier tasks alone (SST2, TREC, MRPC at SPLIT_TRAIN/SPLIT_TEST), encoded by the model
        (the table then holds the STS sentences only). The cross-validated four cost ~30 s a model on 2 cores
        whatever the model: over an hour across the target."""
        import json

        meta = json.loads((folder / "model" / "csebench_encoder.json").read_text(encoding="utf-8"))
        cfg = json.loads((folder / "model" / "config.json").read_text(encoding="utf-8"))
        kind = (cfg.get("model_type"), cfg.get("hidden_size"), meta.get("eval_pooler"), meta.get("projection_dim"),
                meta.get("projection_head"))
        if kind in self.transfer_kinds:
            return False
        self.transfer_kinds.add(kind)
        return True

    def evaluate(self, suite: str, run: str, seed: int, folder: Path, probing: bool) -> Path:
        ev = folder / self.ev[suite]
        emb = ev / "embeddings.npz"
        caps = ["--max-train-sentences", TRANSFER_TRAIN, "--max-test-sentences", TRANSFER_TEST]
        if not all((ev / f).is_file() for f in ("embeddings.npz", "sts.json", "transfer.json")):  # all, or again
            full = self.full_transfer(folder)
            self.cli("embed", "--model", folder / "model", "--senteval", self.senteval,
                     *(caps if full else ["--no-transfer"]), "--max-sts-pairs", STS_PAIRS,
                     "--precision", "fp32", "--out", emb, "--no-progress", params=False)
            named = ["--suite", suite, "--run", run, "--seed", seed]
            self.cli("eval-sts", "--model", folder / "model", "--senteval", self.senteval, "--embeddings", emb, *named,
                     "--out", ev / "sts.json", "--pairs-out", ev / "sts_pairs.npz", "--max-sts-pairs", STS_PAIRS,
                     "--no-progress")
            some = ["--max-train-sentences", SPLIT_TRAIN, "--max-test-sentences", SPLIT_TEST, "--tasks", *SPLIT_TASKS]
            self.cli("eval-transfer", "--model", folder / "model", "--senteval", self.senteval,
                     *(["--embeddings", emb, *caps] if full else some), *named, "--out", ev / "transfer.json", "--no-progress")
        if probing and not (ev / "probing.json").is_file():
            self.cli("eval-probing", "--model", folder / "model", "--probing", self.probing, "--precision", "fp32",
                     "--suite", suite, "--run", run, "--seed", seed, *caps, "--out", ev / "probing.json", "--no-progress")
        return ev

    def card(self, suite: str, run: str, seed: int, folder: Path, evaluated: bool) -> None:
        view = Path(self.rp.suite(suite).run_dir(run, seed))
        first = ["--first", f"{suite}/{run}"]
        self.cli("view-run", "--suite", suite, "--run", run, "--seed", seed, *first, "--from", folder, "--out", view,
                 "train.json", "train_curve.csv", "dev_curve.csv", "model")
        if evaluated:
            self.cli("view-run", "--suite", suite, "--run", run, "--seed", seed, *first, "--from", folder / self.ev[suite],
                     "--out", view, "sts.json", "sts_pairs.npz", "transfer.json", "embeddings.npz")
        self.cli("model-card", "--run", view, params=False)


# ----------------------------------------------------------------------------- the analyses the target reads


_RUN_FILE = re.compile(r"/(?P<suite>[^/]+)/(?:analysis|runs)/(?P<run>[^/]+)/seed(?P<seed>\d+)/(?P<name>[a-z_]+)\.(json|md)$")
_ENSEMBLE = re.compile(r"/(?P<suite>[^/]+)/analysis/(?P<run>[^/]+)/ensemble_sts\.json$")
_SUITE_FILE = re.compile(r"/(?P<suite>[^/]+)/analysis/(?P<name>topk_negatives|teacher_logits)\.json$")
RUN_ANALYSES = ("align_uniform", "cosine_dist", "layers", "token_matrix", "neighbours", "distill_loss",
                "model_correlation", "probing")


def target_extras(params: Params, suites: list[str]) -> tuple[dict, list]:
    """What the target's paper tables and figures read beyond a run's training and evaluation:
    {(suite, run, seed): [analysis or "probing", ...]} and [(suite, "ensemble_sts" | suite analysis, run)]."""
    from csebench.results import render
    from csebench.results.registry import load_registry
    root = params.paths.results
    per_run: dict[tuple[str, str, int], list[str]] = {}
    other: list[tuple[str, str, str | None]] = []
    for item in load_registry().items:
        if not item.rebuilt or not set(item.suites) & set(suites):
            continue
        for f in render.input_files(item, params, root, "paper"):
            if (m := _RUN_FILE.search(f)) and m["name"] in RUN_ANALYSES and m["suite"] in suites:
                names = per_run.setdefault((m["suite"], m["run"], int(m["seed"])), [])
                if m["name"] not in names:
                    names.append(m["name"])
            elif (m := _ENSEMBLE.search(f)) and m["suite"] in suites:
                other.append((m["suite"], "ensemble_sts", m["run"]))
            elif (m := _SUITE_FILE.search(f)) and m["suite"] in suites:
                other.append((m["suite"], m["name"], None))
    return per_run, list(dict.fromkeys(other))


def _config_analysis() -> dict:
    """The default target's analysis settings (config/paper.yaml): which run and teachers the suite analyses use."""
    from csebench.core.schema import read_yaml

    p = Path("config/paper.yaml")
    return (read_yaml(p) or {}).get("analysis") or {} if p.is_file() else {}


class Analyses:
    def __init__(self, r: Rehearsal, folder_of):
        self.r, self.folder_of = r, folder_of  # folder_of(suite, run, seed) -> the rehearsed folder standing for it

    def run(self, suite: str, run: str, seed: int, name: str, folder: Path) -> None:
        r, ev = self.r, folder / self.r.ev[suite]
        of = r.rp.suite(suite)
        model, out = folder / "model", ev / "analysis" / f"{name}.json"
        if out.is_file() or name == "probing":  # probing: made by Rehearsal.evaluate
            return
        label = ["--label", f"{folder.parent.name} s{seed}"]
        if name in ("align_uniform", "cosine_dist", "layers"):
            table = ["--embeddings", ev / "embeddings.npz"] if name != "layers" else []
            r.cli("analyze", name, "--model", model, "--senteval", r.senteval, *label, "--split",
                  ANALYSIS["split"], *table, "--out", out, params=False)
        elif name == "token_matrix":
            r.cli("analyze", "token_matrix", "--models", model, "--labels", folder.parent.name, "--senteval", r.senteval,
                  *label, "--out", out, params=False)
        elif name == "neighbours":
            r.cli("analyze", "neighbours", "--model", model, "--corpus", r.corpus, *label, "--buffer-size",
                  ANALYSIS["buffer_size"], "--k", ANALYSIS["neighbours_k"], "--n-queries", ANALYSIS["neighbour_queries"],
                  "--out", out, "--markdown", out.with_suffix(".md"), params=False)
        elif name == "distill_loss":
            teachers = [a for t, s in of.teacher_jobs(run, seed)
                        for a in ("--teacher", self.folder_of(suite, t, s) / "model")]
            r.cli("analyze", "distill_loss", "--model", model, *teachers, "--corpus", r.corpus, "--senteval", r.senteval,
                  *label, "--out", out, params=False)
        elif name == "model_correlation":
            groups = of.correlation_groups(run, seed)
            flags = []
            for flag, jobs in (("--self-teacher", groups["self_teacher"]), ("--other-teachers", groups["other_teachers"]),
                               ("--other-students", groups["other_students"])):
                models = list(dict.fromkeys(str(self.folder_of(suite, t, s) / "model") for t, s in jobs))
                if models:
                    flags += [flag, *models]
            r.cli("analyze", "model_correlation", "--model", model, *flags, "--senteval", r.senteval, "--out", out,
                  params=False)
        else:
            raise ConfigError(f"rehearse: no rehearsal of the analysis '{name}'")

    def suite(self, suite: str, name: str, run: str | None) -> Path:
        r = self.r
        of = r.rp.suite(suite)
        out = r.out / "results" / suite / "analysis"
        if (out / (f"{run}/ensemble_sts.json" if name == "ensemble_sts" else f"{name}.json")).is_file():
            return out
        if name == "ensemble_sts":  # every evaluated seed of the run: a seed rehearsed only as a teacher is evaluated now
            seeds = [s for x, s in of.evaluated_jobs() if x == run]
            tables = list(dict.fromkeys(str(r.evaluate(suite, run, s, self.folder_of(suite, run, s), probing=False)
                                            / "embeddings.npz") for s in seeds))
            r.cli("analyze", "ensemble_sts", "--embeddings", *tables, "--senteval", r.senteval, "--label",
                  f"{run} ensemble", "--out", out / run / "ensemble_sts.json", params=False)
        elif name == "topk_negatives":
            chosen = ((_config_analysis().get("topk_negatives") or {}).get("model") or f"run:{of.jobs()[0][0]}")[len("run:"):]
            seed = next(s for x, s in of.jobs() if x == chosen)
            r.cli("analyze", "topk_negatives", "--model", self.folder_of(suite, chosen, seed) / "model", "--corpus",
                  r.corpus, "--label", f"{chosen} seed {seed}", "--batch-sizes", *ANALYSIS["topk_batch_sizes"],
                  "--repeats", ANALYSIS["topk_repeats"], "--pool-size", ANALYSIS["topk_pool_size"],
                  "--out", out / "topk_negatives.json", "--figure", r.out / "results" / suite / "figures" / "topk_negatives.png",
                  params=False)
        elif name == "teacher_logits":
            teacher = (_config_analysis().get("teacher_logits") or {}).get("run")
            seeds = sorted({s for x, sd in of.jobs() for t, s in of.teacher_jobs(x, sd) if t == teacher})
            models = [a for s in seeds for a in ("--teacher", self.folder_of(suite, teacher, s) / "model")]
            r.cli("analyze", "teacher_logits", *models, "--corpus", r.corpus, "--senteval", r.senteval,
                  "--logit-batch-size", ANALYSIS["logit_batch_size"], "--n-batches", ANALYSIS["logit_batches"],
                  "--out", out / "teacher_logits.json", "--figure", r.out / "results" / suite / "figures" / "teacher_logits.png",
                  params=False)
        else:
            raise ConfigError(f"rehearse: no rehearsal of the suite analysis '{name}'")
        return out


# ----------------------------------------------------------------------------- the command


@dataclass
class Outcome:
    distinct: int  # of the target
    selected: int  # asked for (--only, --limit)
    rehearsed: int  # passed
    failed: list[tuple[str, str]]  # (what, error)
    classes: dict[str, int]  # model class -> distinct runs
    seconds: float
    listed: int
    extra_trainings: int
    commands: dict[str, int]
    depth: int | None
    reused: int = 0  # run folders finished by an earlier rehearsal with the same params
    terms_fired: dict[str, int] = field(default_factory=dict)  # objective term -> passed runs it fired in


@dataclass
class Selection:
    """What a rehearsal will run, worked out before anything is written (its folder, its log)."""
    params: Params
    suites: list[str]
    groups: list[Distinct]  # the distinct runs selected
    listed: int  # listings of suite, run and seed of the whole target
    total: int  # distinct runs of the whole target


def select(params_path: str = "params.yaml", overrides=None, suites: list[str] | None = None, limit: int | None = None,
           only: str | None = None) -> Selection:
    """The distinct runs of ``suites`` (default: the default target) to rehearse. ``only``: those listed as
    'suite/run' containing this text; ``limit``: the first N of them (the suites' own analyses are then left out).
    A suite params.yaml lacks, or a filter nothing matches, is an error before the rehearsal's folder exists."""
    from csebench.results.registry import default_suites
    from csebench.core.schema import _suggest

    params = Params.load(params_path, overrides)
    known = list(params.suites)
    suites = suites or default_suites(params)
    for s in suites:
        if s not in known:
            raise ConfigError(f"--suites: unknown suite '{s}'{_suggest(s, known)}")
    groups = distinct_runs(params, suites)
    listed, total = sum(len(g.listings) for g in groups), len(groups)
    if only:
        groups = [g for g in groups if any(only in f"{s}/{r}" for s, r, _ in g.listings)]
    if limit is not None:
        groups = groups[:limit]
    if not groups:
        raise ConfigError(f"--only {only}: no run of {', '.join(suites)} is listed as SUITE/RUN containing it" if only
                          else f"no run in {', '.join(suites)}")
    return Selection(params, suites, groups, listed, total)


def rehearse(main, selection: Selection, out: str | Path = "results/rehearsal", keep_going: bool = True,
             keep_models: bool = False, depth: int | None = DEPTH) -> Outcome:
    """Rehearse the selected distinct runs (``select``) through ``main`` (csebench.cli.main, passed in by the
    command: this module runs the real commands without importing the CLI that declares it). ``depth``: layers
    of each backbone (rehearsal.depth_for), None: the published depth."""
    import os

    import yaml

    from csebench.core.corpus import read_corpus
    from csebench.core.io import write_text
    from csebench.model.standins import activate

    t0 = time.perf_counter()
    params, suites, groups, listed, total = (selection.params, selection.suites, selection.groups, selection.listed,
                                             selection.total)
    out = Path(out).resolve()
    shared = Path(params.paths.shared).resolve()
    demo = shared / "corpus" / "demo-sentences.txt"
    corpus = write_corpus(demo, out / "data" / "corpus.txt")
    probing = write_probing(read_corpus(corpus), out / "data" / "probing")
    senteval = write_senteval(shared / "senteval", out / "data" / "senteval")
    pfile = out / "params.yaml"
    write_text(pfile, yaml.safe_dump(rehearsal_params(params, suites, corpus, probing, senteval, out), sort_keys=False,
                                     width=200))
    rp = Params.load(pfile)  # as every command reads it
    check = os.environ.get("CSEBENCH_DATA_CHECK")
    os.environ["CSEBENCH_DATA_CHECK"] = "0"  # the cut SentEval files (write_senteval)
    try:
        with activate(out / "tokenizers", demo):
            r = Rehearsal(main, rp, suites, out, pfile, str(senteval / "downstream"), corpus, probing, depth)
            with frozen_imports("csebench.training.trainer"):  # a full collection follows every run
                failed, rep, terms_fired = _rehearse_all(r, groups, keep_going, keep_models, filtered=len(groups) < total)
    finally:
        if check is None:
            os.environ.pop("CSEBENCH_DATA_CHECK", None)
        else:
            os.environ["CSEBENCH_DATA_CHECK"] = check
    classes: dict[str, int] = {}
    for g in groups:
        arch = architecture(g.backbone)
        cls = f"{arch.model_class} {'large' if arch.layers == 24 else 'base'}" if arch else g.backbone
        classes[cls] = classes.get(cls, 0) + 1
    return Outcome(total, len(groups), len(rep), failed, classes, time.perf_counter() - t0, listed,
                   len(set(r.trained.values()) - set(rep.values())), dict(r.steps), depth, r.reused, terms_fired)


def _rehearse_all(r: Rehearsal, groups: list[Distinct], keep_going: bool, keep_models: bool, filtered: bool):
    per_run, suite_extras = target_extras(r.rp, r.suites)
    readers = model_readers(r.rp, r.suites, per_run, suite_extras)
    by_listing = {listing: g for g in groups for listing in g.listings}
    failed: list[tuple[str, str]] = []
    rep: dict[str, Path] = {}  # a distinct run's id -> its rehearsed folder
    terms_fired: dict[str, int] = {}  # objective term -> distinct runs in which it was shown to fire

    def folder_of(suite: str, run: str, seed: int) -> Path:
        """The rehearsed folder standing for (suite, run, seed): its own, else its distinct run's."""
        k = (r.key(suite, run), int(seed))
        if k in r.trained:
            return r.trained[k]
        g = by_listing.get((suite, run, int(seed))) or next(
            (x for (s, n, _), x in by_listing.items() if (s, n) == (suite, run)), None)
        return rep[g.id] if g is not None and g.id in rep else r.train(suite, run, seed)

    analyses = Analyses(r, folder_of)
    for i, g in enumerate(groups, 1):
        suite, run, seed = g.first
        arch = architecture(g.backbone)
        what = f"{suite}/{run} seed {seed} ({arch.model_class if arch else g.backbone})"
        t1 = time.perf_counter()
        try:
            folder = r.train(suite, run, seed, resume=True)
            rep[g.id] = folder
            extras = sorted({e for listing in g.listings for e in per_run.get(listing, [])})
            if g.evaluated:
                ev_suite, ev_run, ev_seed = next((s, n, sd) for s, n, sd in g.listings if (n, sd) in _evaluated(r.rp, s))
                r.evaluate(ev_suite, ev_run, ev_seed, folder, probing="probing" in extras)
                r.card(ev_suite, ev_run, ev_seed, folder, evaluated=True)
            else:
                r.card(suite, run, seed, folder, evaluated=False)
            for name in extras:
                s, n, sd = next(listing for listing in g.listings if name in per_run.get(listing, []))
                analyses.run(s, n, sd, name, folder)
            if not keep_models and not weights_read_later(g.listings, readers, r.key):
                drop_weights(folder)
            fired = r.fired.get(folder) or {}
            terms_fired.update({k: terms_fired.get(k, 0) + 1 for k in fired})
            log.info("[%d/%d] %s: passed in %.1f s%s%s", i, len(groups), what, time.perf_counter() - t1,
                     f" (+ {', '.join(extras)})" if extras else "", f"; terms fired: {fired_line(fired)}" if fired else "")
        except Exception as exc:  # noqa: BLE001  every failure is reported, then the next run
            rep.pop(g.id, None)
            failed.append((what, f"{exc.__class__.__name__}: {exc}"))
            # one line as it fails (the console shows it); its traceback in rehearse.log only
            log.error("[%d/%d] %s: FAILED in %.1f s: %s", i, len(groups), what, time.perf_counter() - t1, _one_line(exc))
            TRACEBACKS.info("[%d/%d] %s:\n%s", i, len(groups), what, traceback.format_exc())
            if not keep_going:
                break
        gc.collect()
    if not filtered:  # the suites' own analyses read runs of several distinct runs: whole target only
        for suite, name, run in suite_extras:
            try:
                analyses.suite(suite, name, run)
                log.info("suite analysis %s/%s%s: passed", suite, name, f" ({run})" if run else "")
            except Exception as exc:  # noqa: BLE001
                failed.append((f"{suite}: {name}", f"{exc.__class__.__name__}: {exc}"))
                log.error("suite analysis %s/%s: FAILED: %s", suite, name, _one_line(exc))
                TRACEBACKS.info("suite analysis %s/%s:\n%s", suite, name, traceback.format_exc())
    return failed, rep, terms_fired


def _same_weights(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def fired_line(fired: dict[str, dict]) -> str:
    """The terms that fired, for a run's console line: 'instance_smoothing at step 2 (extra loss)'."""
    return ", ".join(f"{k} at step {v['step']} ({', '.join(v['how'])})" for k, v in fired.items())


def _one_line(exc: BaseException) -> str:
    """An exception as one short line: its class and the first line of its message."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{exc.__class__.__name__}: {first[:300]}{'...' if len(first) > 300 else ''}"


def model_readers(params: Params, suites: list[str], per_run: dict, suite_extras: list) -> set[tuple[str, str]]:
    """(suite, run) of every run whose model a later job reads: teachers (their caches, distill-loss, teacher
    logits), the runs a model-correlation compares, the model of topk-negatives."""
    out = set()
    for suite in suites:
        of = params.suite(suite)
        for run, seed in of.jobs_with_teachers():
            out |= {(suite, t) for t, _ in of.teacher_jobs(run, seed)}
    for (suite, run, seed), names in per_run.items():
        if "model_correlation" in names:
            out |= {(suite, r) for jobs in params.suite(suite).correlation_groups(run, seed).values() for r, _ in jobs}
    for suite, name, _ in suite_extras:
        if name == "topk_negatives":
            first = params.suite(suite).jobs()[0][0]
            out.add((suite, ((_config_analysis().get("topk_negatives") or {}).get("model") or f"run:{first}")[len("run:"):]))
    return out


def weights_read_later(listings, readers: set[tuple[str, str]], key) -> bool:
    """Whether a later job reads the model rehearsed for these listings. The rehearsal's folders are named by
    the key under the rehearsal's sizes (``key(suite, run)``), so two distinct runs of the target can share one
    folder (a SimCSE run and a DistillCSE teacher that differ only in a size the rehearsal flattens): the
    weights stay when any reader's key is the folder's, not only when a reader is one of these listings.
    (The first full `make rehearse` dropped paper/bert-base-simcse's weights, which paper-distillcse's
    model-correlation read as another teacher's.)"""
    reader_keys = {key(s, n) for s, n in readers}
    return any(key(s, n) in reader_keys for s, n, _ in listings)


def drop_weights(folder: Path) -> None:
    """A rehearsed model's weights (hundreds of MB each), once nothing reads them; its JSON results stay."""
    for f in (folder / "model").glob("*.safetensors"):
        f.unlink()


def _evaluated(params: Params, suite: str) -> set:
    return set(params.suite(suite).evaluated_jobs())


def report(o: Outcome) -> str:
    classes = ", ".join(f"{n} {c}" for c, n in sorted(o.classes.items()))
    m, s = divmod(round(o.seconds), 60)
    depth = "published depth" if o.depth is None else f"depth {o.depth} layers unless a run needs more"
    asked = "" if o.selected == o.distinct else f" ({o.selected} selected)"
    lines = [f"rehearsed {o.rehearsed} of the target's {o.distinct} distinct runs{asked} ({o.listed} listings of suite, "
             f"run and seed share them; {o.extra_trainings} more trainings of teacher seeds), {len(o.classes)} classes: "
             f"{classes}; {depth}; {m} min {s:02d} s",
             (f"{o.reused} run folders reused from an earlier rehearsal (or another run alike at the rehearsal's sizes); "
              if o.reused else "")
             + "commands run: " + ", ".join(f"{k} {v}" for k, v in sorted(o.commands.items()))]
    if o.terms_fired:
        lines.append("objective terms shown to fire (a loss part or changed negatives, and other losses without them): "
                     + ", ".join(f"{k} in {n} run{'s' if n > 1 else ''}" for k, n in sorted(o.terms_fired.items())))
    for what, err in o.failed:
        lines.append(f"FAILED {what}: {err}")
    return "\n".join(lines)

"""What a set of suites will cost before anything runs: jobs, training runs and GPU-hours.

GPU time comes from a FLOP model (6 x non-embedding parameters x tokens for training, 2 x for a
forward pass; a term's second model adds its own: DiffCSE's frozen generator a forward pass of its layers and
masked-LM head, its discriminator, a trained copy of the backbone, 6 x the backbone's) at an assumed model-FLOP utilisation of a bf16 GPU, until a measured throughput for
that GPU exists (benchmarks/gpu_results.json, from benchmarks/device.sh or `make bench-gpu`: its
training MFU at batch 64 and 512 then replaces the assumed ones).
Training tokens are the padded ones: a dynamically padded batch of B sentences runs every row at
its longest sentence (capped at max_seq_length), so a sentence costs the expected maximum of B
lengths, drawn from a sentence-length histogram that stands in for wiki1m's
(resources/sentence_lengths.json, written by benchmarks/length_histogram.py).
Suites on CPU data sources (demo, ci) cost no GPU time.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from csebench.model.architectures import ARCHITECTURES, generator_architecture
from csebench.core.paths import key_dir
from csebench.study.typed import Params, Suite

# parameter counts (total, of which token/position embeddings) of the paper backbones, from their published
# architecture facts (csebench.model.architectures; the pooler included, as the hub checkpoints carry it)
BACKBONE_PARAMS = {model: tuple(float(n) for n in arch.parameters()) for model, arch in ARCHITECTURES.items()}
GPU_PEAKS = {"H100": 989e12, "A100": 312e12}  # bf16 dense peak FLOP/s
# Assumed model-FLOP utilisation until benchmarks/gpu.py measures it (its MFU counts padded tokens,
# as here). A step of 64 x 2 sentences padded to ~31 tokens is launch-bound on a large GPU: 3% puts
# a BERT-base epoch of wiki1m at about 18 minutes on an H100 (the goal is under 10). Batches
# of 512 keep the GPU busier (25%, below the 35% goal).
ASSUMED_MFU = 0.40  # large matrix work: evaluation, teacher caches
SMALL_BATCH, SMALL_BATCH_MFU, LARGE_BATCH_MFU = 128, 0.03, 0.25
LENGTHS = "resources/sentence_lengths.json"
CORPUS_SENTENCES = {"wiki1m": 1_000_000}
EVAL_SENTENCES = 150_000  # embed: 7 STS tasks + STS-B dev + the 7 transfer tasks, distinct sentences
DEV_SENTENCES = 3_000     # STS-B dev, each evaluation during training
SICKR_DEV_SENTENCES = 1_000  # SICK-R dev (500 pairs), each evaluation too where training.dev_metric is avg_sts
PROBING_SENTENCES = 360_000  # SentLen, TreeDepth, CoordInv (120k each)
EVAL_TOKENS = 20.0        # evaluation sentences are longer than the training ones (no 32-token cap for STS)


@dataclass
class SuitePlan:
    """What one suite costs built alone. ``units`` holds its work by what the work is of, so that
    suites sharing runs (docs/runs.md) are counted once in a total (``distinct``):
    ("train", key, seed), ("teacher", key, seed), ("eval", key, seed, ev), ("probing", key, seed, ev),
    ("card", key, seed) -> (other FLOPs, training FLOPs at small batches, at large batches)."""

    suite: str
    data: str
    training_runs: int  # the runs it lists and their teachers, trained (not `train: false`)
    teacher_caches: int
    jobs: int
    unknown_models: list[str]
    units: dict[tuple, tuple[float, float, float]] = field(default_factory=dict)
    trained: set[tuple[str, int]] = field(default_factory=set)  # (key, seed) of those runs
    evaluation_only: int = 0  # `train: false` runs: the untrained backbone, evaluated
    own_jobs: int = 0  # of ``jobs``, those of the suite itself, not shared with other suites

    @property
    def flops(self) -> float:  # evaluation, dev evaluations and teacher caches
        return sum(u[0] for u in self.units.values())

    @property
    def flops_small(self) -> float:  # training FLOPs at batch <= SMALL_BATCH (launch-bound)
        return sum(u[1] for u in self.units.values())

    @property
    def flops_large(self) -> float:  # training FLOPs at larger batches
        return sum(u[2] for u in self.units.values())

    @property
    def total_flops(self) -> float:
        return self.flops + self.flops_small + self.flops_large

    def gpu_hours(self, peak: float, small_mfu: float = SMALL_BATCH_MFU, large_mfu: float = LARGE_BATCH_MFU,
                  done: set | frozenset = frozenset()) -> float:
        """Hours on a GPU of bf16 peak ``peak``: training at the given MFUs (assumed unless measured),
        evaluation and teacher caches at ASSUMED_MFU; ``done``: units already built, not counted."""
        return _hours([v for k, v in self.units.items() if k not in done], peak, small_mfu, large_mfu)


# Snakemake's jobs per unit of work, done once whichever suites list the run: train; embed, eval_sts,
# eval_transfer; a teacher cache; the model card (probing is asked for by items only). Each suite adds
# its own jobs (SuitePlan.own_jobs): its views of the runs, its report and metrics.json, its items.
JOBS_PER_UNIT = {"train": 1, "eval": 3, "teacher": 1, "probing": 0, "card": 1}
DATA_JOBS = 2  # per data source: the corpus and SentEval prepared


def _unit_jobs(units) -> int:
    return sum(JOBS_PER_UNIT[k[0]] for k in units)


def _hours(units, peak: float, small_mfu: float, large_mfu: float) -> float:
    return sum(u[0] / ASSUMED_MFU + u[1] / small_mfu + u[2] / large_mfu for u in units) / peak / 3600.0


def built_units(plans: list[SuitePlan], results: str | Path = "results") -> set[tuple]:
    """The units of these plans whose outputs are on disk already: a run's train.json, its teacher
    cache, its evaluation's sts.json, its model card (in the run's own folder, docs/runs.md)."""
    done = set()
    for p in plans:
        for k in p.units:
            folder = Path(key_dir(str(results), k[1], k[2]))
            marker = {"train": "train.json", "teacher": "teacher/embeddings.npy" if len(k) == 3 else f"teacher/{k[-1]}.npy",
                      "card": "model_card.md",
                      "eval": f"{k[-1]}/sts.json", "probing": f"{k[-1]}/probing.json"}[k[0]]
            if (folder / marker).is_file():
                done.add(k)
    return done


def distinct(plans: list[SuitePlan]) -> SuitePlan:
    """The suites together, each run trained, embedded and evaluated once whichever suites list it."""
    units = {k: v for p in plans for k, v in p.units.items()}
    trained = {t for p in plans for t in p.trained}
    jobs = sum(p.own_jobs for p in plans) + _unit_jobs(units) + DATA_JOBS * len({p.data for p in plans})
    untrained = {k[1:3] for k in units if k[0] == "card"} - trained
    return SuitePlan("distinct", "", len(trained), sum(k[0] == "teacher" for k in units), jobs,
                     sorted({m for p in plans for m in p.unknown_models}), units, trained, len(untrained))


@functools.cache
def length_histogram() -> tuple[np.ndarray, np.ndarray, str]:
    """(lengths, counts, source) of the packaged sentence-length histogram (tokens, uncapped)."""
    h = json.loads(importlib.resources.files("csebench").joinpath(LENGTHS).read_text(encoding="utf-8"))
    lengths = np.array([int(n) for n in h["counts"]])
    return lengths, np.array(list(h["counts"].values()), dtype=np.float64), h["source"]


def capped_pmf(lengths: np.ndarray, counts: np.ndarray, cap: int) -> np.ndarray:
    """P(min(length, cap) = l) for l = 0..cap."""
    return np.bincount(np.minimum(lengths, cap), weights=counts, minlength=cap + 1) / counts.sum()


def padded_tokens(batch: int, cap: int, lengths: np.ndarray | None = None, counts: np.ndarray | None = None) -> float:
    """Tokens per sentence of a dynamically padded batch of ``batch`` random sentences: the expected
    longest of them, each capped at ``cap``. Exact from the CDF F of the capped length:
    E[max] = sum_{l >= 1} P(max >= l) = sum_{l=1..cap} 1 - F(l-1)^B."""
    if lengths is None:
        lengths, counts, _ = length_histogram()
    cdf = np.cumsum(capped_pmf(lengths, counts, cap))
    return float(np.sum(1.0 - cdf[:-1] ** batch))


def mean_tokens(cap: int) -> float:
    """Mean capped length: a length-sorted pass over the corpus (teacher caches) pads almost nothing."""
    lengths, counts, _ = length_histogram()
    return float(np.dot(np.arange(cap + 1), capped_pmf(lengths, counts, cap)))


def _nonemb(model: str) -> float | None:
    p = BACKBONE_PARAMS.get(model)
    return None if p is None else p[0] - p[1]


def generator_forward_flops(model: str) -> float | None:
    """FLOPs per token of a generator's forward pass (csebench.model.architectures.GENERATORS): 2 x its non-embedding
    weights and its masked-LM head's (the vocabulary projection included); None for a model without facts."""
    arch = generator_architecture(model)
    if arch is None:
        return None
    total, emb = arch.parameters(pooler=False)
    return 2.0 * (total - emb + arch.mlm_head_parameters())


def term_training_flops(objectives: dict, n: float, unknown: list[str] | None = None) -> float:
    """FLOPs per encoded token (each view's row) the terms' own models add to a training step: the generators'
    forward passes, and DiffCSE's discriminator (a trained copy of the backbone: 6 x its ``n`` non-embedding
    weights). A generator without published facts goes to ``unknown``."""
    from csebench.objectives import generators

    flops = 6.0 * n if "replaced_token_detection" in objectives else 0.0
    for g in generators(objectives):
        f = generator_forward_flops(g)
        if f is None:
            if unknown is not None:
                unknown.append(g)
            continue
        flops += f
    return flops


def measured_throughput(root: str | Path = ".") -> dict | None:
    """{gpu, peak, small_mfu, large_mfu} from benchmarks/gpu_results.json (benchmarks/gpu.py on a GPU)."""
    path = Path(root) / "benchmarks" / "gpu_results.json"
    if not path.is_file():
        return None
    res = json.loads(path.read_text(encoding="utf-8"))
    if "sections" in res:
        return _device_script_throughput(res)
    rows = {r.get("batch"): r for r in (res.get("training") or {}).get("rows", []) if r.get("mfu") and r.get("peak")}
    if not rows:
        return None
    small = min(rows)
    large = max(rows)
    return {"gpu": (res.get("info") or {}).get("name", "GPU"), "peak": rows[small]["peak"],
            "small_mfu": rows[small]["mfu"], "large_mfu": rows[large]["mfu"] if large > SMALL_BATCH else LARGE_BATCH_MFU}


def _device_script_throughput(res: dict) -> dict | None:
    """The same from benchmarks/device.sh's results (docs/gpu.md): BERT-base at batch 64 (its padded tokens
    per second, eager, as this model counts them) and RoBERTa-large at batch 512."""
    sections, versions = res.get("sections") or {}, res.get("versions") or {}
    peak = versions.get("peak_bf16_flops")
    small = (sections.get("training") or {}).get("ours") or {}
    large = sections.get("large") or {}
    if not peak or not small.get("tokens_per_s") or not small.get("nonemb_params"):
        return None
    return {"gpu": versions.get("device") or "GPU", "peak": peak,
            "small_mfu": 6 * small["nonemb_params"] * small["tokens_per_s"] / peak,
            "large_mfu": large.get("mfu") or LARGE_BATCH_MFU}


def suite_plan(suite: Suite, n_items: int = 0, probing: bool = False) -> SuitePlan:
    data = suite.data
    corpus = CORPUS_SENTENCES.get(data, 0)  # CPU suites: no GPU cost
    ev = suite.eval_name
    runs = suite.jobs_with_teachers()
    teachers: dict[tuple[str, int], set[str]] = {}  # teacher job -> the representations its students read (their caches)
    for r, s in runs:
        for t in suite.teacher_jobs(r, s):
            teachers.setdefault(t, set()).add(suite.teacher_representation(r, s))
    jobs, evaluated = suite.jobs(), suite.evaluated_jobs()
    training_only = set(jobs) - set(evaluated)  # `evaluate: false`
    evaluation_only = {(r, s) for r, s in runs if not suite.trains(r)}  # `train: false`
    units: dict[tuple, tuple[float, float, float]] = {}
    trained, unknown = set(), []
    for run, seed in runs:
        cfg = suite.resolve(run, seed)
        key = cfg.key()
        n = _nonemb(cfg.backbone.model) if corpus else 0.0
        if n is None:
            unknown.append(cfg.backbone.model)
            n = 0.0
        if (run, seed) not in evaluation_only:
            trained.add((key, seed))
        t = cfg.training
        if (run, seed) in evaluation_only:  # one dev pass and the evaluation, no training
            steps = 0
            dev = 2 * n * DEV_SENTENCES * EVAL_TOKENS
        else:
            steps = corpus * t.epochs // t.batch_size
            steps = min(t.max_steps, steps) if t.max_steps else steps
            per_eval = DEV_SENTENCES + (SICKR_DEV_SENTENCES if t.dev_metric == "avg_sts" else 0)
            dev = (steps // t.eval_steps) * 2 * n * per_eval * EVAL_TOKENS
        rows = 2 * steps * t.batch_size * padded_tokens(t.batch_size, t.max_seq_length)  # tokens of the two dropout views
        train = 6 * n * rows
        if steps and corpus:  # a term's own models (DiffCSE's generator and discriminator) read every view's rows too
            train += term_training_flops(cfg.objectives, n, unknown) * rows
        units[("train", key, seed)] = (dev, train, 0.0) if t.batch_size <= SMALL_BATCH else (dev, 0.0, train)
        if (run, seed) not in training_only:
            units[("eval", key, seed, ev)] = (2 * n * EVAL_SENTENCES * EVAL_TOKENS, 0.0, 0.0)  # the embed rule
            if probing:
                units[("probing", key, seed, ev)] = (2 * n * PROBING_SENTENCES * EVAL_TOKENS, 0.0, 0.0)
        for rep in sorted(teachers.get((run, seed), ())):  # the teacher cache(s) of the corpus; eval: ("teacher", key, seed)
            cache = 2 * n * corpus * mean_tokens(t.max_seq_length)
            units[("teacher", key, seed) + ((rep,) if rep != "eval" else ())] = (cache, 0.0, 0.0)
        units[("card", key, seed)] = (0.0, 0.0, 0.0)  # its model card (card.smk), no GPU
    # train + embed + eval_sts + eval_transfer + model_card per distinct run (train and card for `evaluate: false`), a teacher
    # cache per teacher, the suite report, its items (the views of runs, local jobs of a second, not counted);
    # eval_mteb per evaluated run where the suite asks for MTEB (in the suite's own view of the run), and its MTEB table
    mteb = len(evaluated) + 1 if suite.mteb_tasks is not None else 0
    views = len(jobs) + len(evaluated)  # view_trained, view_evaluated
    own = views + 2 + n_items + mteb  # + the report and metrics.json
    return SuitePlan(suite.name, data, len(runs) - len(evaluation_only), sum(len(v) for v in teachers.values()),
                     _unit_jobs(units) + own + DATA_JOBS,
                     sorted(set(unknown)), units, trained, len(evaluation_only), own)


def plan(params: Params, suites: list[str]) -> list[SuitePlan]:
    from csebench.results.registry import load_registry

    reg, params = load_registry(), Params.of(params)
    out = []
    for suite in suites:
        items = [it for it in reg.items if it.rebuilt and suite in it.suites]
        probing = any(it.renderer == "grid" and "probing:" in json.dumps(it.layout) for it in items)
        out.append(suite_plan(params.suite(suite), sum(1 for it in items if it.suites[0] == suite), probing))
    return out


def render_plan(plans: list[SuitePlan], root: str | Path = ".") -> str:
    """The plan as a table (each suite built alone, then the build as it runs: each distinct run once)
    and a few short notes on what is counted."""
    measured = measured_throughput(root)
    peak, small, large = GPU_PEAKS["H100"], SMALL_BATCH_MFU, LARGE_BATCH_MFU
    basis = (f"an H100 (bf16 peak {peak / 1e12:.0f} TFLOP/s) at assumed utilisations: training {small:.0%} at batch "
             f"<= {SMALL_BATCH}, {large:.0%} above; evaluation {ASSUMED_MFU:.0%} (no GPU measurement yet)")
    if measured:
        peak, small, large = measured["peak"], measured["small_mfu"], measured["large_mfu"]
        basis = (f"{measured['gpu']} at the training utilisation measured there ({small:.1%} at batch <= {SMALL_BATCH}, "
                 f"{large:.1%} above; benchmarks/gpu_results.json), evaluation at an assumed {ASSUMED_MFU:.0%}")
    head = f"{'suite':<34} {'data':<7} {'trained':>7} {'eval-only':>9} {'teachers':>8} {'jobs':>6} {'GPU-hours':>9}"

    def row(name: str, data: str, p: SuitePlan, h: float) -> str:
        flag = f"  (no cost model for {', '.join(p.unknown_models)})" if p.unknown_models else ""
        return (f"{name:<34} {data:<7} {p.training_runs:>7} {p.evaluation_only:>9} {p.teacher_caches:>8} {p.jobs:>6} "
                f"{h:>9.1f}{flag}")

    lines = [head, "-" * len(head)]
    hours = [p.gpu_hours(peak, small, large) for p in plans]
    for p, h in zip(plans, hours):
        lines.append(row(p.suite, p.data, p, h))
    lines.append("-" * len(head))
    alone = SuitePlan("", "", sum(p.training_runs for p in plans), sum(p.teacher_caches for p in plans),
                      sum(p.jobs for p in plans), [], evaluation_only=sum(p.evaluation_only for p in plans))
    lines.append(row(f"sum of the {len(plans)} suites built alone" if len(plans) > 1 else "the suite built alone", "", alone, sum(hours)))
    once = distinct(plans)
    once_h = once.gpu_hours(peak, small, large)
    lines.append(row("this build: each run once (1)", "", once, once_h))
    lines += [
        "",
        f"(1) A run several suites list is trained and evaluated once (docs/runs.md): {sum(hours) - once_h:.1f} GPU-hours saved.",
        "GPU-hours: a FLOP model of",
        f"  {basis}.",
        f"Training tokens: each sentence padded to the longest of its batch ({padded_tokens(64, 32):.1f} at batch 64, cap 32;",
        f"  mean sentence {mean_tokens(32):.1f}), lengths from {length_histogram()[2].split(':')[0]}.",
        "Jobs: training, evaluation, teacher caches, model cards, the suites' views of their runs, reports, metrics,",
        "  data preparation and paper items; not the analyses of a Snakemake config's `analyses:` list.",
    ]
    return "\n".join(lines)


def print_plan(params: Params, suites: list[str]) -> None:
    """The plan on stderr, as a build that runs jobs starts (the Snakefile's onstart)."""
    import sys

    print("csebench plan (what this build costs; `csebench plan --suites ...` prints it alone):\n"
          + render_plan(plan(params, suites)) + "\n", file=sys.stderr)

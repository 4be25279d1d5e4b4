"""What the Snakemake rules and the DVC stage generator ask of params.yaml: jobs, paths, deps.

Path scheme (outputs only, under paths.data / paths.results):
  data/{data}/corpus.txt                              prepared training corpus
  data/{data}/senteval/ROOT                           pointer to the SentEval downstream/ folder
  results/{suite}/runs/{run}/seed{seed}/train.json    training summary (model/ and curves beside it)
  results/{suite}/runs/{run}/seed{seed}/embeddings.npz  every evaluation sentence encoded once
  results/{suite}/runs/{run}/seed{seed}/sts.json      STS evaluation
  results/{suite}/teachers/{run}/seed{seed}/embeddings.npy  frozen-teacher corpus embeddings
  results/{suite}/tables/sts.md                       report
"""

from __future__ import annotations


from .config import EVAL_PRECISIONS, find_run, load_params, resolve_run, suite_runs, suite_seeds
from .paths import run_dir
from .schema import schema_path

__all__ = ["load_params", "jobs", "evaluated_jobs", "suite_data", "run_dir", "teacher_jobs", "run_fingerprint",
           "check_snakemake_config", "schema_path"]


def check_snakemake_config(config: dict, configfiles) -> None:
    """The Snakemake config, before anything reads it: each config file again for keys given twice
    (Snakemake's reader keeps the last silently), then the merged config against the schema."""
    from .schema import read_yaml
    from .schema import validate

    for f in configfiles:
        read_yaml(f)
    for key in ("progress", "plan"):  # `--config plan=false` arrives as the text 'false', which is truthy
        if isinstance(config.get(key), str) and config[key].lower() in ("true", "false"):
            config[key] = config[key].lower() == "true"
    validate(config, "snakemake-config", "Snakemake config (config/*.yaml, --configfile, --config)")


def suite_data(params: dict, suite: str) -> str:
    return params["suites"][suite]["data"]


def jobs(params: dict, suite: str) -> list[tuple[str, int]]:
    """Every (run name, seed) of a suite."""
    return [(r["name"], s) for r in suite_runs(params, suite) for s in suite_seeds(params, suite, r["name"])]


def trains(params: dict, suite: str, run: str) -> bool:
    """False for an evaluation-only run (`train: false`): its train job needs no corpus."""
    return find_run(params, suite, run)["train"]


def evaluated_jobs(params: dict, suite: str) -> list[tuple[str, int]]:
    """The (run, seed) jobs that are embedded and evaluated: all but the runs marked `evaluate: false`
    (training only: their curves and models still serve figures and students)."""
    evaluated = {r["name"] for r in suite_runs(params, suite) if r["evaluate"]}
    return [(r, s) for r, s in jobs(params, suite) if r in evaluated]


EVALUATION_KEYS = {"precision": EVAL_PRECISIONS, "max_sts_pairs": int}


def suite_evaluation(params: dict, suite: str) -> dict:
    """A suite's `evaluation:` settings: precision (fp32 default: SentEval's numbers; "fast" = bf16
    where the hardware has it, see encoder.eval_autocast_dtype), the STS pair cap (CPU demo only:
    each STS task scored on a seeded subset) and the transfer training-set cap."""
    from .errors import ConfigError

    spec = params["suites"][suite]
    ev = dict(spec.get("evaluation") or {})
    for key, value in ev.items():
        if key not in EVALUATION_KEYS:
            raise ConfigError(f"suites.{suite}.evaluation: unknown key '{key}' (valid: {', '.join(EVALUATION_KEYS)})")
        allowed = EVALUATION_KEYS[key]
        if allowed is int:
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ConfigError(f"suites.{suite}.evaluation.{key}: give a whole number of at least 2, got {value!r}")
        elif value not in allowed:
            raise ConfigError(f"suites.{suite}.evaluation.{key}: '{value}' is not one of {', '.join(allowed)}")
    transfer = spec.get("transfer") or {}
    unknown = set(transfer) - {"max_train_sentences", "max_test_sentences"}
    if unknown:
        raise ConfigError(f"suites.{suite}.transfer: unknown key '{sorted(unknown)[0]}' (valid: max_train_sentences, max_test_sentences)")
    cap, test_cap = transfer.get("max_train_sentences"), transfer.get("max_test_sentences")
    return {"precision": ev.get("precision", "fp32"), "max_train_sentences": int(cap) if cap else None,
            "max_test_sentences": int(test_cap) if test_cap else None,
            "max_sts_pairs": ev.get("max_sts_pairs")}


def suite_mteb_tasks(params: dict, suite: str) -> list[str] | None:
    """The MTEB tasks of a suite that opts in (`mteb: {tasks: [...]}`; `mteb: {}` = the default list),
    None for a suite without an `mteb:` section."""
    spec = params["suites"][suite]
    if "mteb" not in spec:
        return None
    from .evaluation import MTEB_DEFAULT_TASKS

    return list((spec["mteb"] or {}).get("tasks") or MTEB_DEFAULT_TASKS)


def teacher_jobs(params: dict, suite: str, run: str, seed: int) -> list[tuple[str, int]]:
    """(run, seed) of the frozen teachers a run distils from (DistillCSE), [] otherwise."""
    cfg = resolve_run(params, suite, run, int(seed))
    settings = cfg.objectives.get("distillation")
    if not settings or not cfg.train:  # an evaluation-only run distils from nothing
        return []
    from .objectives.distillation import teacher_runs

    teachers = teacher_runs(settings, cfg.seed)
    for name, _ in teachers:
        find_run(params, suite, name)  # a clear error if the teacher run is not in the suite
    return teachers


def teacher_cache(params: dict, suite: str, run: str, seed: int) -> str:
    results = (params.get("paths") or {}).get("results", "results")
    return f"{results}/{suite}/teachers/{run}/seed{seed}/embeddings.npy"


def all_runs_with_teachers(params: dict, suite: str) -> list[tuple[str, int]]:
    """The suite's jobs plus any teacher jobs they need (teachers may use seeds the suite lists not)."""
    out: list[tuple[str, int]] = []
    todo = jobs(params, suite)
    while todo:
        job = todo.pop(0)
        if job in out:
            continue
        out.append(job)
        todo.extend(teacher_jobs(params, suite, *job))
    return out


def run_fingerprint(params: dict, suite: str, run: str, seed: int) -> str:
    """Hash of the resolved run config: Snakemake reruns a run when its hyperparameters change."""
    return resolve_run(params, suite, run, int(seed)).fingerprint()


def correlation_groups(params: dict, suite: str, run: str, seed: int) -> dict[str, list[tuple[str, int]]]:
    """DistillCSE Table 8 for a single-teacher student: its own teacher(s), the other seeds of its
    teacher run in the suite, and the other students of the same method distilled from those."""
    own = teacher_jobs(params, suite, run, seed)
    if not own:
        return {"self_teacher": [], "other_teachers": [], "other_students": []}
    teacher_run = own[0][0]
    own_seeds = {s for _, s in own}
    others = [(teacher_run, s) for s in suite_seeds(params, suite, teacher_run) if s not in own_seeds]
    method = find_run(params, suite, run)["method"]
    students = []
    for name, s in jobs(params, suite):
        if name == run or find_run(params, suite, name)["method"] != method:
            continue
        theirs = teacher_jobs(params, suite, name, s)
        if theirs and {t for t, _ in theirs} == {teacher_run} and not own_seeds & {ts for _, ts in theirs}:
            students.append((name, s))
    return {"self_teacher": own, "other_teachers": others, "other_students": students}

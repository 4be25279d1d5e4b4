"""The suites of params.yaml as jobs: what the Snakemake rules, the DVC stage generator, plan and the
reports ask of them. Each suite's (run, seed) jobs (suite_jobs) and the teacher jobs they need; its evaluation
settings and the folder name they give (eval_name); every run by identity (Runs: a run listed by several
suites is one run, trained once in its own folder). Where each file lives: csebench.core.paths; the
Snakefile's own steps: csebench.workflow.steps.
"""

from __future__ import annotations


from csebench.core.choices import EVAL_PRECISIONS, MTEB_DEFAULT_TASKS
from csebench.study.params import digest, expand_path, list_suites, results_root as results_dir
from csebench.study.resolve import find_run, resolve_run, sts_pairs_file, suite_runs, suite_seeds
from csebench.core import paths
from csebench.core.paths import key_dir
from csebench.core.errors import CsebenchError


_RUNS: dict[str, Runs] = {}


def check_suites(params: dict, suites: list[str]) -> None:
    """The Snakemake config's suites are suites of params.yaml (one line naming the unknown one)."""
    from csebench.core.errors import ConfigError
    from csebench.core.schema import _suggest

    for suite in suites:
        if suite not in list_suites(params):
            raise ConfigError(f"Snakemake config (config/*.yaml, --configfile, --config): suites: unknown suite "
                              f"'{suite}'{_suggest(str(suite), list_suites(params))}")


def suite_data(params: dict, suite: str) -> str:
    return params["suites"][suite]["data"]


def suite_jobs(params: dict, suite: str) -> list[tuple[str, int]]:
    """Every (run name, seed) of a suite."""
    return [(r["name"], s) for r in suite_runs(params, suite) for s in suite_seeds(params, suite, r["name"])]


def trains(params: dict, suite: str, run: str) -> bool:
    """False for an evaluation-only run (`train: false`): its train job needs no corpus."""
    return find_run(params, suite, run)["train"]


def evaluated_jobs(params: dict, suite: str) -> list[tuple[str, int]]:
    """The (run, seed) jobs that are embedded and evaluated: all but the runs marked `evaluate: false`
    (training only: their curves and models still serve figures and students)."""
    evaluated = {r["name"] for r in suite_runs(params, suite) if r["evaluate"]}
    return [(r, s) for r, s in suite_jobs(params, suite) if r in evaluated]


EVALUATION_KEYS = {"precision": EVAL_PRECISIONS, "max_sts_pairs": int, "sts_pairs": list}


def suite_evaluation(params: dict, suite: str) -> dict:
    """A suite's `evaluation:` settings: precision (fp32 default: SentEval's numbers; "fast" = bf16
    where the hardware has it, see encoder.eval_autocast_dtype), the STS pair cap (CPU demo only:
    each STS task scored on a seeded subset), the transfer training-set cap, and your own STS test
    sets (`sts_pairs: [NAME, ...]` of data.<source>.sts_pairs) as NAME -> the file's path as
    params.yaml writes it (eval_name hashes it; sts_sets expands it)."""
    from csebench.core.errors import ConfigError

    spec = params["suites"][suite]
    ev = dict(spec.get("evaluation") or {})
    for key, value in ev.items():
        if key not in EVALUATION_KEYS:
            raise ConfigError(f"suites.{suite}.evaluation: unknown key '{key}' (valid: {', '.join(EVALUATION_KEYS)})")
        allowed = EVALUATION_KEYS[key]
        if allowed is list:  # names of the data source's own STS sets (their files are checked where they are read)
            if not isinstance(value, list):
                raise ConfigError(f"suites.{suite}.evaluation.{key}: give a list of names of data.{spec['data']}.sts_pairs, got {value!r}")
        elif allowed is int:
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ConfigError(f"suites.{suite}.evaluation.{key}: give a whole number of at least 2, got {value!r}")
        elif value not in allowed:
            raise ConfigError(f"suites.{suite}.evaluation.{key}: '{value}' is not one of {', '.join(allowed)}")
    off = spec.get("transfer") is False  # `transfer: false`: the suite scores no transfer task (a sweep of STS)
    transfer = {} if off else spec.get("transfer") or {}
    unknown = set(transfer) - {"max_train_sentences", "max_test_sentences"}
    if unknown:
        raise ConfigError(f"suites.{suite}.transfer: unknown key '{sorted(unknown)[0]}' (valid: max_train_sentences, max_test_sentences)")
    cap, test_cap = transfer.get("max_train_sentences"), transfer.get("max_test_sentences")
    return {"precision": ev.get("precision", "fp32"), "max_train_sentences": int(cap) if cap else None,
            "max_test_sentences": int(test_cap) if test_cap else None,
            "max_sts_pairs": ev.get("max_sts_pairs"),
            # only when off: the evaluation folder of every other suite keeps its name (eval_name hashes what is set)
            "transfer": False if off else None,
            "sts_pairs": {name: sts_pairs_file(params, spec["data"], name, f"suites.{suite}.evaluation.sts_pairs", expand=False)
                          for name in ev.get("sts_pairs") or []}}


def sts_sets(params: dict, settings: dict) -> dict[str, str]:
    """The own STS test sets of evaluation settings (suite_evaluation): NAME -> file on this machine."""
    return {name: expand_path(path, params) for name, path in settings["sts_pairs"].items()}


def dev_set_file(params: dict, suite: str, run: str, seed: int) -> str | None:
    """The file of the run's `training.dev_set` (checkpoint selection on your own STS data), else None."""
    return resolve_run(params, suite, run, int(seed)).dev_file


def suite_mteb_tasks(params: dict, suite: str) -> list[str] | None:
    """The MTEB tasks of a suite that opts in (`mteb: {tasks: [...]}`; `mteb: {}` = the default list),
    None for a suite without an `mteb:` section."""
    spec = params["suites"][suite]
    if "mteb" not in spec:
        return None
    return list((spec["mteb"] or {}).get("tasks") or MTEB_DEFAULT_TASKS)


def eval_name(settings: dict) -> str:
    """The folder name of a suite's evaluation settings (suite_evaluation) inside a run's folder:
    eval-fp32 for the papers' protocol; a capped evaluation adds a hash of its caps, one that scores
    your own STS sets a hash of their names and files (the names key sts.json's extra_sets). Without
    caps or own sets the name is what it was before either existed."""
    caps = {k: v for k, v in settings.items() if k not in ("precision", "sts_pairs") and v is not None}
    own = settings.get("sts_pairs")
    return (f"eval-{settings['precision']}" + (f"-capped-{digest(caps, 8)}" if caps else "")
            + (f"-sts-{digest(own, 8)}" if own else ""))


class Runs:
    """Every run of every suite of params.yaml by identity (docs/runs.md).

    A run's key is the hash of its resolved configuration without names (RunConfig.key): runs of
    different suites (or of one suite) with the same key and seed are ONE run, trained, embedded and
    evaluated once in results/runs/{key}/seed{seed}; the suites' folders are views of it. The first
    suite and run of params.yaml that list a (key, seed) name it (its train.json, the trainer's log).
    """

    def __init__(self, params: dict):
        self.params = params
        self.results = results_dir(params)
        self._keys: dict[tuple[str, str], str] = {}
        self._listed: dict[tuple[str, int], list[tuple[str, str]]] | None = None
        self._evaluated: dict[str, set[tuple[str, int]]] = {}
        self._views: dict[str, set[tuple[str, int]]] = {}

    def key(self, suite: str, run: str) -> str:
        if (suite, run) not in self._keys:
            self._keys[(suite, run)] = resolve_run(self.params, suite, run, 0).key()
        return self._keys[(suite, run)]

    def folder(self, suite: str, run: str, seed: int) -> str:
        """Where the run is trained (model/, train.json, curves, its teacher cache)."""
        return key_dir(self.results, self.key(suite, run), int(seed))

    def eval_folder(self, suite: str, run: str, seed: int) -> str:
        """Where it is evaluated under the suite's evaluation settings (embeddings, STS, transfer, analyses)."""
        return paths.eval_dir(self.folder(suite, run, seed), eval_name(suite_evaluation(self.params, suite)))

    def files(self, suite: str, run: str, seed, names: list[str], evaluated: bool = False) -> list[str]:
        """The run's files NAMES, in its folder or (``evaluated``) its evaluation folder (what a suite's view shows)."""
        folder = (self.eval_folder if evaluated else self.folder)(suite, run, int(seed))
        return [f"{folder}/{n}" for n in names]

    def first_name(self, suite: str, run: str, seed) -> str:
        """'suite/run' that names the run: the first suite and run of params.yaml that list it."""
        return "/".join(self.first(self.key(suite, run), int(seed)))

    def view_model(self, suite: str, run: str, seed: int) -> str | None:
        """The model folder that suite's view of run and seed links to (``model``), from the run's identity;
        None when params.yaml lists no such suite, run and seed. What csebench.workflow.stamps links a pulled view to:
        the link's target never comes from a pulled record."""
        try:
            if suite not in self._views:
                self._views[suite] = set(all_runs_with_teachers(self.params, suite))
            if (run, int(seed)) not in self._views[suite]:
                return None
            return f"{self.folder(suite, run, int(seed))}/model"
        except CsebenchError:
            return None

    @property
    def listed(self) -> dict[tuple[str, int], list[tuple[str, str]]]:
        """(key, seed) -> every (suite, run) that lists it (teacher seeds included), in params.yaml's order."""
        if self._listed is None:
            self._listed = {}
            for suite in list_suites(self.params):
                for run, seed in all_runs_with_teachers(self.params, suite):
                    self._listed.setdefault((self.key(suite, run), seed), []).append((suite, run))
        return self._listed

    def check(self) -> None:
        """Resolve every run of params.yaml at each of its seeds, teachers included, now: a setting no run can
        train with (a template without {mask}, a run that is its own teacher) is then the Snakefile's one line
        before planning, not an error inside an input function under Snakemake's stack lines. The DAG reads
        every run anyway (``first``), so this costs nothing more."""
        self.listed  # noqa: B018  resolving is the point

    def first(self, key: str, seed: int) -> tuple[str, str]:
        """The (suite, run) that names the run with this key and seed: the first that lists it."""
        from csebench.core.errors import ConfigError

        if self._listed is None:  # a job's --key: the suites in params.yaml's order up to the first that lists it
            for suite in list_suites(self.params):  # (resolving every run for one was a third of a small job)
                for run, s in all_runs_with_teachers(self.params, suite):
                    if s == int(seed) and self.key(suite, run) == key:
                        return suite, run
        listed = self.listed.get((key, int(seed))) or next((v for (k, _), v in self.listed.items() if k == key), None)
        if not listed:
            raise ConfigError(f"no run of params.yaml has the key {key}: params.yaml changed since this folder was "
                              "planned (`csebench runs` lists the runs and their folders)")
        return listed[0]

    def card_source(self, key: str, seed: int) -> tuple[str, str]:
        """The (suite, run) whose view the run's one model card is made from (card.smk): the first of
        params.yaml that evaluates it, so the card holds results; else the first that lists it."""
        listed = self.listed.get((key, int(seed))) or [self.first(key, seed)]
        for suite, run in listed:
            if suite not in self._evaluated:
                self._evaluated[suite] = set(evaluated_jobs(self.params, suite))
            if (run, int(seed)) in self._evaluated[suite]:
                return suite, run
        return listed[0]

    def same_run_as(self, suite: str, run: str, seed: int) -> str | None:
        """'suite/run' of the first suite and run that list the same run (key and seed), None when
        that is this one: the note of a table row that is another suite's run."""
        first = self.first(self.key(suite, run), seed)
        return None if first == (suite, run) else f"{first[0]}/{first[1]}"

    def eval_settings(self, name: str) -> dict:
        """The evaluation settings whose eval_name is ``name``."""
        from csebench.core.errors import ConfigError

        for suite in list_suites(self.params):
            settings = suite_evaluation(self.params, suite)
            if eval_name(settings) == name:
                return settings
        raise ConfigError(f"no suite of params.yaml evaluates as {name}")


def runs_of(params: dict) -> Runs:
    """The Runs of these params, kept while their content is unchanged (tests edit params in place)."""
    content = digest(dict(params), 64)  # a Params (csebench.study.typed) is a mapping: its content
    if content not in _RUNS:
        _RUNS.clear()  # one params file at a time in practice
        _RUNS[content] = Runs(params)
    return _RUNS[content]


def run_folder(params: dict, suite: str, run: str, seed: int) -> str:
    return runs_of(params).folder(suite, run, seed)


def same_run_as(params: dict, suite: str, run: str, seed: int) -> str | None:
    """For reports: 'suite/run' of the first suite and run of params.yaml that list the same run
    (same key and seed) as suite/run at this seed, or None when suite/run is that first one."""
    return runs_of(params).same_run_as(suite, run, seed)


def teacher_jobs(params: dict, suite: str, run: str, seed: int) -> list[tuple[str, int]]:
    """(run, seed) of the frozen teachers a run distils from (DistillCSE), [] otherwise."""
    cfg = resolve_run(params, suite, run, int(seed))
    from csebench.study.teacherspec import teacher_runs, teacher_term

    found = teacher_term(cfg.objectives)
    if not found or not cfg.train:  # an evaluation-only run distils from nothing
        return []
    settings = found[1]

    teachers = teacher_runs(settings, cfg.seed)
    for name, _ in teachers:
        find_run(params, suite, name)  # a clear error if the teacher run is not in the suite
    return teachers


def teacher_cache(params: dict, suite: str, run: str, seed: int, representation: str = "eval") -> str:
    """A teacher run's cached corpus embeddings, in its own folder (one per teacher and representation, whichever
    students)."""
    return paths.teacher_cache(run_folder(params, suite, run, seed), representation)


def teacher_representation(params: dict, suite: str, run: str, seed: int) -> str:
    """What a run's teacher term reads of its teachers' caches: eval or training (teacherspec.teacher_representation)."""
    from csebench.study.teacherspec import teacher_representation as of_objectives

    return of_objectives(resolve_run(params, suite, run, int(seed)).objectives)


def all_runs_with_teachers(params: dict, suite: str) -> list[tuple[str, int]]:
    """The suite's jobs plus any teacher jobs they need (teachers may use seeds the suite lists not)."""
    out: list[tuple[str, int]] = []
    todo = suite_jobs(params, suite)
    while todo:
        job = todo.pop(0)
        if job in out:
            continue
        out.append(job)
        todo.extend(teacher_jobs(params, suite, *job))
    return out


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
    for name, s in suite_jobs(params, suite):
        if name == run or find_run(params, suite, name)["method"] != method:
            continue
        theirs = teacher_jobs(params, suite, name, s)
        if theirs and {t for t, _ in theirs} == {teacher_run} and not own_seeds & {ts for _, ts in theirs}:
            students.append((name, s))
    return {"self_teacher": own, "other_teachers": others, "other_students": students}


def _methods_of(params: dict, name: str) -> list[str]:
    """A method and the methods it composes (their settings are read when it resolves)."""
    out = [name]
    for part in (params.get("methods") or {}).get(name, {}).get("compose") or []:
        out += [m for m in _methods_of(params, part) if m not in out]
    return out


def suite_params(params: dict, suite: str) -> list[str]:
    """The params.yaml keys a suite's runs read: its own section, its data source, the training
    defaults, and the backbones and methods its runs name (so editing one method marks only the
    stages whose runs use it changed)."""
    spec = params["suites"][suite]
    backbones, methods = [], []
    for run in suite_runs(params, suite):
        backbones.append(run["backbone"])
        methods += _methods_of(params, run["method"])
    return [f"suites.{suite}", f"data.{spec['data']}", "training",
            *sorted(f"backbones.{b}" for b in set(backbones)), *sorted(f"methods.{m}" for m in set(methods))]

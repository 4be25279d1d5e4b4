"""The suites of params.yaml as jobs: what the Snakemake rules, the DVC stage generator, plan and the
reports ask of them. Each suite's (run, seed) jobs and the teacher jobs they need; its evaluation
settings and the folder name they give (eval_name); every run by identity (Runs: a run listed by
several suites is one run, trained once in its own folder); and the Snakefile's own steps: the check
of its config, the one-line errors, the build's modification times. Where each file lives: csebench.paths.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from csebench.config import (EVAL_PRECISIONS, digest, expand_path, find_run, list_suites, load_params, resolve_run,
                     sts_pairs_file, suite_runs, suite_seeds)
from csebench import paths
from csebench.paths import key_dir, results_root as results_dir, run_dir
from csebench.errors import CsebenchError
from csebench.schema import schema_path

__all__ = ["load_params", "jobs", "evaluated_jobs", "suite_data", "run_dir", "teacher_jobs",
           "check_snakemake_config", "one_line", "schema_path", "Runs", "runs_of", "run_folder", "same_run_as", "eval_name"]


@contextlib.contextmanager
def one_line():
    """Snakefile code that reads the settings: a csebench error ends Snakemake with its one line (exit 1),
    not under Snakemake's header with the stack lines it adds."""
    try:
        yield
    except CsebenchError as exc:
        print(f"csebench: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def check_suites(params: dict, suites: list[str]) -> None:
    """The Snakemake config's suites are suites of params.yaml (one line naming the unknown one)."""
    from csebench.errors import ConfigError
    from csebench.schema import _suggest

    for suite in suites:
        if suite not in list_suites(params):
            raise ConfigError(f"Snakemake config (config/*.yaml, --configfile, --config): suites: unknown suite "
                              f"'{suite}'{_suggest(str(suite), list_suites(params))}")


def merge_default_config(config: dict, path: str = "config/paper.yaml") -> None:
    """``path`` (the papers' build) under what --configfile and --config give, merged as Snakemake's
    ``configfile:`` directive merged it, in place, without the directive's log line that the file "is
    extended by additional config specified via the command line", which every DVC stage's log printed
    and which read like a mistake."""
    from csebench.config import deep_merge
    from csebench.errors import ConfigError
    from csebench.schema import read_yaml

    if not os.path.isfile(path):
        raise ConfigError(f"{path} not found: run Snakemake from the checkout's top folder")
    merged = deep_merge(read_yaml(path) or {}, dict(config))
    config.clear()
    config.update(merged)


def check_snakemake_config(config: dict, configfiles) -> None:
    """The Snakemake config, before anything reads it: each config file again for keys given twice
    (Snakemake's reader keeps the last silently), then the merged config against the schema."""
    from csebench.schema import read_yaml
    from csebench.schema import validate

    for f in configfiles:
        read_yaml(f)
    for key in ("progress", "plan", "front_page"):  # `--config plan=false` arrives as the text 'false', which is truthy
        if isinstance(config.get(key), str) and config[key].lower() in ("true", "false"):
            config[key] = config[key].lower() == "true"
    validate(config, "snakemake-config", "Snakemake config (config/*.yaml, --configfile, --config)")
    from csebench.analysis.selection import check

    check(config)  # `analyses:` and `analysis:`, against the analyses' own declarations


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


EVALUATION_KEYS = {"precision": EVAL_PRECISIONS, "max_sts_pairs": int, "sts_pairs": list}


def suite_evaluation(params: dict, suite: str) -> dict:
    """A suite's `evaluation:` settings: precision (fp32 default: SentEval's numbers; "fast" = bf16
    where the hardware has it, see encoder.eval_autocast_dtype), the STS pair cap (CPU demo only:
    each STS task scored on a seeded subset), the transfer training-set cap, and your own STS test
    sets (`sts_pairs: [NAME, ...]` of data.<source>.sts_pairs) as NAME -> the file's path as
    params.yaml writes it (eval_name hashes it; sts_sets expands it)."""
    from csebench.errors import ConfigError

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
    from csebench.evaluation import MTEB_DEFAULT_TASKS

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
        None when params.yaml lists no such suite, run and seed. What csebench.stamps links a pulled view to:
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
        from csebench.errors import ConfigError

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
        from csebench.errors import ConfigError

        for suite in list_suites(self.params):
            settings = suite_evaluation(self.params, suite)
            if eval_name(settings) == name:
                return settings
        raise ConfigError(f"no suite of params.yaml evaluates as {name}")


_RUNS: dict[str, Runs] = {}


def runs_of(params: dict) -> Runs:
    """The Runs of these params, kept while their content is unchanged (tests edit params in place)."""
    content = digest(params, 64)
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
    from csebench.teacherspec import teacher_runs, teacher_term

    found = teacher_term(cfg.objectives)
    if not found or not cfg.train:  # an evaluation-only run distils from nothing
        return []
    settings = found[1]

    teachers = teacher_runs(settings, cfg.seed)
    for name, _ in teachers:
        find_run(params, suite, name)  # a clear error if the teacher run is not in the suite
    return teachers


def teacher_cache(params: dict, suite: str, run: str, seed: int) -> str:
    """A teacher run's cached corpus embeddings, in its own folder (one per teacher, whichever students)."""
    return paths.teacher_cache(run_folder(params, suite, run, seed))


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


def restore_times(results: str, runs: "Runs | None" = None, workdir: str = ".") -> bool:
    """The Snakefile's first step: trees a DVC checkout or a copy wrote anew get their build's
    modification times back (csebench.stamps), so Snakemake plans only what is really missing; a suite's
    view gets its ``model`` link back, to the folder ``runs`` computes for it. Nothing is changed while
    another Snakemake run holds a lock in ``workdir``, whose jobs read and write those trees: then False."""
    import sys

    from csebench.stamps import checked_out, restore_times as restore

    if another_build(workdir):
        if pending := checked_out(results):
            print(f"csebench: another Snakemake run holds {Path(workdir) / '.snakemake' / 'locks'}: the build times of "
                  f"{len(pending)} trees written anew (a DVC checkout or a copy) are left for the next run after it",
                  file=sys.stderr)
        return False
    for what, n in restore(results, view_model=None if runs is None else runs.view_model):
        print(f"csebench: {n} files of {what} written anew (a DVC checkout "
              "or a copy) got their build times back; content unchanged", file=sys.stderr)
    return True


def another_build(workdir: str = ".") -> bool:
    """Another Snakemake run holds a lock in ``workdir``: Snakemake writes .snakemake/locks/N.{input,output}.lock
    once its DAG is built and removes them when it ends (a run that was killed leaves them: `snakemake
    --unlock`). The Snakefile's first step runs before this run's own lock, so any lock there is another's."""
    locks = Path(workdir) / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.glob("*.lock"))


def refuse_outside_links(results: str, suites: list[str], workdir: str = ".") -> None:
    """The folders a build's dvc.yaml stage commits (its suites' folders) and the run store hold no link
    out of the repository (``workdir``, Snakemake's and DVC's folder) other than into ``results`` (a views'
    links, where params.yaml puts results elsewhere): one line naming the first (csebench.dvccommit)."""
    from csebench.dvccommit import refuse_outside_links as refuse

    refuse([paths.run_store(results), *(paths.suite_dir(results, s) for s in suites)], workdir, also=results)


def record_times(results: str) -> None:
    """The Snakefile's last step: record the build's modification times in every tracked tree that changed."""
    from csebench.stamps import record_times as record

    record(results)


def start_warm():
    """The local build's warm server (csebench.warm); None where it could not start (jobs then start cold)."""
    from csebench.warm import start

    return start()


def stop_warm(started: list) -> None:
    from csebench.warm import stop

    while started:
        stop(started.pop())


def params_args(config: dict) -> str:
    """The params file and override files of the Snakemake config as the csebench CLI takes them
    (`--params P --config O ...`), so every rule's command resolves the runs the DAG was planned
    with: a suite defined in an override file trains, not only dry-runs."""
    import shlex

    args = []
    if config.get("params", "params.yaml") != "params.yaml":
        args += ["--params", str(config["params"])]
    for extra in config.get("params_overrides") or []:
        args += ["--config", str(extra)]
    return " ".join(shlex.quote(a) for a in args)


def find_cli(uses_conda: bool) -> None:
    """Every rule calls the `csebench` command. Found on PATH (an activated venv), beside the Python
    that runs Snakemake (`.venv/bin/snakemake` typed without activating: that folder is put on PATH,
    which the jobs inherit), or in the rules' conda environment; else one line, before any job."""
    import os
    import shutil
    from pathlib import Path

    from csebench.errors import ConfigError

    if uses_conda or shutil.which("csebench"):
        return
    here = Path(sys.executable).parent
    if (here / "csebench").is_file():
        os.environ["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"
        return
    raise ConfigError("the rules run the `csebench` command, which is not on PATH nor beside this Python "
                      f"({sys.executable}): activate the project's venv first (`. .venv/bin/activate`; "
                      "`make setup` creates it), or install the package (`pip install -e .`)")


def trains_from_hub(params: dict, suite: str, run: str) -> bool:
    """The run reads its backbone (model or tokenizer) from the Hugging Face hub: the fetch_backbone job
    downloads it on the submitting host first (csebench.fetch)."""
    from csebench.config import backbone_config
    from csebench.fetch import hub_id

    bb = backbone_config(params, find_run(params, suite, run)["backbone"])
    return hub_id(bb.model) or hub_id(bb.tokenizer)


def hub_generators(params: dict, suite: str, run: str, seed: int) -> list[str]:
    """The hub models a run's terms load besides its backbone (DiffCSE's generator), as data/generators/ note
    names (csebench.fetch.note_name): the fetch_generator job downloads each on the submitting host first."""
    from csebench.config import resolve_run
    from csebench.fetch import hub_id, note_name
    from csebench.objectives import generators

    if not trains(params, suite, run):
        return []
    return [note_name(g) for g in generators(resolve_run(params, suite, run, seed).objectives) if hub_id(g)]


def offline_if_submitted(is_main_process: bool) -> None:
    """In a job Snakemake submitted (a cluster node runs the Snakefile again for it): no download, the
    submitting host fetched what the job reads (csebench.fetch); a missing file is one line, at once."""
    import os

    if not is_main_process:
        for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            os.environ[var] = "1"


# ---- a second build while one runs: Snakemake's lock, as one line

LOCKS = os.path.join(".snakemake", "locks")  # Snakemake's file persistence, in the working directory it runs in


def _unlock_command(workflow) -> str:
    """`snakemake --unlock` with this command's config files and --config (the Snakefile must load as this build
    did to unlock; --cores: a rule's threads are a fraction of the cores, which Snakemake asks for even then)."""
    import shlex

    settings = workflow.config_settings
    args = ["snakemake", "--unlock", "--cores", "1"]
    for f in settings.configfiles or ():
        rel = os.path.relpath(f)
        args += ["--configfile", str(f) if rel.startswith("..") else rel]
    if settings.config:
        args += ["--config", *(getattr(settings, "config_args", None) or [f"{k}={v!r}" for k, v in settings.config.items()])]
    return " ".join(shlex.quote(str(a)) for a in args)


def lock_message(workflow, held: list[str] | None = None) -> str:
    """The one line of a build that another Snakemake build of this working directory holds the lock of."""
    what = "files this build needs"
    if held:
        what = held[0] + (f" and {len(held) - 1} more of this build's targets" if len(held) > 1 else ", a target of this build")
    return (f"csebench: error: another Snakemake build is running in {os.getcwd()} and holds the lock on {what} "
            f"({LOCKS}): wait for it to end; if none runs (a build was killed), remove its stale lock with "
            f"`{_unlock_command(workflow)}`, then run this again")


def _locked_outputs() -> set[str]:
    """Every file another build's Snakemake has locked as an output it makes (LOCKS/N.output.lock, one a line)."""
    held: set[str] = set()
    if os.path.isdir(LOCKS):
        for name in os.listdir(LOCKS):
            if name.endswith(".output.lock"):
                try:
                    with open(os.path.join(LOCKS, name), encoding="utf-8") as fh:
                        held.update(line.strip() for line in fh if line.strip())
                except OSError:  # removed by its build as we read: that build has ended
                    continue
    return held


def refuse_locked_build(workflow, targets: list[str]) -> list:
    """The first step of planning the default target (rule all's input function, called once the settings are
    known): a build that runs jobs, with Snakemake's lock on, whose targets another build is making stops now
    with one line. Snakemake itself finds it only after planning the whole DAG (seconds to minutes) and says so
    in four lines. Its own rule, exactly: another build's output locks holding an input of this DAG's jobs, and
    rule all's inputs are inputs of this DAG. A dry run (-n), --unlock, --nolock, a report or a cluster job's
    own Snakemake never locks and is never stopped here. Returns no input."""
    settings = getattr(workflow, "execution_settings", None)
    backend = getattr(getattr(workflow, "workflow_settings", None), "persistence_backend", None)  # Snakemake 9: a choice
    if (not workflow.is_main_process or getattr(workflow, "executor_plugin", None) is None or workflow.dryrun
            or settings is None or not getattr(settings, "lock", True) or getattr(backend, "name", "FILE") != "FILE"):
        return []
    held = _locked_outputs()
    clash = [t for t in targets if t in held]
    if clash:
        print(lock_message(workflow, clash), file=sys.stderr, flush=True)
        raise SystemExit(1)
    return []


def lock_error_in_one_line(workflow) -> None:
    """A lock Snakemake finds only after planning (a target given on the command line, files shared below the
    targets): its LockException is printed as four lines under its class name. This one line instead, where
    Snakemake raises it (before it takes any lock), ending the build with exit 1 as Snakemake's does."""
    import snakemake.exceptions as smx

    _LOCKING[0] = workflow  # the workflow of this Snakefile: its config names the unlock command
    base = getattr(smx, "LockException", None)
    if base is None or getattr(base, "one_line", False):
        return

    class OneLineLockException(base):
        one_line = True

        def __init__(self, *args, **kwargs):
            print(lock_message(_LOCKING[0]), file=sys.stderr, flush=True)
            raise SystemExit(1)

    smx.LockException = OneLineLockException


_LOCKING: list = [None]

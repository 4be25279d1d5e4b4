"""The Snakefile's own steps: the default config merged and checked, csebench found on the jobs' PATH,
the one-line errors (one_line, a locked build), the build's modification times kept and restored, the warm
workers started and stopped, the hub downloads a job may make. What the suites ask of (jobs, runs,
evaluation settings): csebench.study.jobs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from csebench.core import paths
from csebench.core.errors import CsebenchError, DataError
from csebench.study.jobs import Runs
from csebench.study.typed import Suite

_LOCKING: list = [None]


@contextlib.contextmanager
def one_line():
    """Snakefile code that reads the settings: a csebench error ends Snakemake with its one line (exit 1),
    not under Snakemake's header with the stack lines it adds."""
    try:
        yield
    except CsebenchError as exc:
        print(f"csebench: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def check_plugins() -> None:
    """The terms, analyses and renderers of installed packages (their entry points, read without importing
    them): a name that is a built-in's or another package's stops the build before its DAG is built, in the
    line the CLI gives (an input function meeting it stopped Snakemake with its exception and stack lines)."""
    from csebench.analysis import ANALYSES
    from csebench.objectives import TERMS
    from csebench.results.render import RENDERERS

    for registry in (TERMS, ANALYSES, RENDERERS):
        registry.plugins()


def merge_default_config(config: dict, path: str = "config/paper.yaml") -> None:
    """``path`` (the papers' build) under what --configfile and --config give, merged as Snakemake's
    ``configfile:`` directive merged it, in place, without the directive's log line that the file "is
    extended by additional config specified via the command line", which every DVC stage's log printed
    and which read like a mistake."""
    from csebench.study.params import deep_merge
    from csebench.core.errors import ConfigError
    from csebench.core.schema import read_yaml

    if not os.path.isfile(path):
        raise ConfigError(f"{path} not found: run Snakemake from the checkout's top folder")
    merged = deep_merge(read_yaml(path) or {}, dict(config))
    config.clear()
    config.update(merged)


def check_snakemake_config(config: dict, configfiles) -> None:
    """The Snakemake config, before anything reads it: each config file again for keys given twice
    (Snakemake's reader keeps the last silently), then the merged config against the schema."""
    from csebench.core.schema import read_yaml, schema_path
    from csebench.core.schema import validate

    for f in configfiles:
        read_yaml(f)
    flags = [k for k, v in read_yaml(schema_path("snakemake-config"))["properties"].items() if v.get("type") == "boolean"]
    for key in flags:  # `--config plan=false` arrives as the text 'false', which is truthy
        if isinstance(config.get(key), str) and config[key].lower() in ("true", "false"):
            config[key] = config[key].lower() == "true"
    validate(config, "snakemake-config", "Snakemake config (config/*.yaml, --configfile, --config)")
    from csebench.analysis.selection import check

    check(config)  # `analyses:` and `analysis:`, against the analyses' own declarations


def restore_times(results: str, runs: "Runs | None" = None, workdir: str = ".") -> bool:
    """The Snakefile's first step: trees a DVC checkout or a copy wrote anew get their build's
    modification times back (csebench.workflow.stamps), so Snakemake plans only what is really missing; a suite's
    view gets its ``model`` link back, to the folder ``runs`` computes for it. Nothing is changed while
    another Snakemake run holds a lock in ``workdir``, whose jobs read and write those trees: then False."""
    import sys

    from csebench.workflow.stamps import checked_out, restore_times as restore

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


def refuse_outside_links(results: str, suites: list[str], workdir: str = ".", data: str | None = None) -> None:
    """The folders a build's dvc.yaml stage commits (its suites' folders) and the run store hold no link
    out of the repository (``workdir``, Snakemake's and DVC's folder) other than into ``results`` (a views'
    links, where params.yaml puts results elsewhere): one line naming the first (csebench.workflow.dvccommit).
    ``data`` (paths.data), which the build writes its prepared data into, is checked the same way (a link out of
    the repository and out of paths.data itself: the prepare jobs would write through it)."""
    from csebench.workflow.dvccommit import outside_links, refuse_outside_links as refuse

    refuse([paths.run_store(results), *(paths.suite_dir(results, s) for s in suites)], workdir, also=results)
    for link, target in outside_links(data, workdir, data) if data is not None else ():
        raise DataError(f"{link} is a symbolic link to {target}, outside the repository {os.path.abspath(workdir)} and "
                        f"outside {data} (paths.data): the build would write its prepared data through it (corpus.txt "
                        f"would land in {os.path.realpath(link)}); csebench makes no such link: remove it, or set "
                        "paths.data to the folder you want the data in")


def record_times(results: str) -> None:
    """The Snakefile's last step: record the build's modification times in every tracked tree that changed."""
    from csebench.workflow.stamps import record_times as record

    record(results)


def start_warm(rules: list[str] | None = None):
    """The local build's warm server (csebench.workflow.warm); None where it could not start, or where the build's jobs
    (``rules``: each job's rule) would not gain from one (csebench.workflow.warm.worth_starting): jobs then start cold."""
    from csebench.workflow.warm import start, worth_starting

    return start() if worth_starting(rules) else None


def stop_warm(started: list) -> None:
    from csebench.workflow.warm import stop

    while started:
        stop(started.pop())


def params_args(config: dict) -> list[str]:
    """The params file and override files of the Snakemake config as the csebench CLI takes them
    (`--params P --config O ...`), so every rule's command resolves the runs the DAG was planned
    with: a suite defined in an override file trains, not only dry-runs. Like every argument list of a rule's
    params, a list that the command quotes word by word with Snakemake's `:q`."""
    args = []
    if config.get("params", "params.yaml") != "params.yaml":
        args += ["--params", str(config["params"])]
    for extra in config.get("params_overrides") or []:
        args += ["--config", str(extra)]
    return args


def option_args(option: str, values) -> list[str]:
    """``option VALUE`` for each value (``--teacher-cache A --teacher-cache B``); [] for none."""
    return [w for v in values for w in (option, str(v))]


def sts_pairs_argv(sets: dict[str, str]) -> list[str]:
    """``--sts-pairs NAME=FILE ...`` of your own STS sets (csebench.study.jobs.sts_sets); [] for none."""
    return ["--sts-pairs", *(f"{name}={path}" for name, path in sets.items())] if sets else []


def find_cli(uses_conda: bool) -> None:
    """Every rule calls the `csebench` command. Found on PATH (an activated venv), beside the Python
    that runs Snakemake (`.venv/bin/snakemake` typed without activating: that folder is put on PATH,
    which the jobs inherit), or in the rules' conda environment; else one line, before any job."""
    import os
    import shutil
    from pathlib import Path

    from csebench.core.errors import ConfigError

    if uses_conda or shutil.which("csebench"):
        return
    here = Path(sys.executable).parent
    if (here / "csebench").is_file():
        os.environ["PATH"] = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"
        return
    raise ConfigError("the rules run the `csebench` command, which is not on PATH nor beside this Python "
                      f"({sys.executable}): activate the project's venv first (`. .venv/bin/activate`; "
                      "`make setup` creates it), or install the package (`pip install -e .`)")


def trains_from_hub(suite: Suite, run: str) -> bool:
    """The run reads its backbone (model or tokenizer) from the Hugging Face hub: the fetch_backbone job
    downloads it on the submitting host first (csebench.study.fetch)."""
    from csebench.study.fetch import hub_id

    bb = suite.backbone(run)
    return hub_id(bb.model) or hub_id(bb.tokenizer)


def hub_generators(suite: Suite, run: str, seed: int) -> list[str]:
    """The hub models a run's terms load besides its backbone (DiffCSE's generator), as data/generators/ note
    names (csebench.study.fetch.note_name): the fetch_generator job downloads each on the submitting host first."""
    from csebench.study.fetch import hub_id, note_name
    from csebench.objectives import generators

    if not suite.trains(run):
        return []
    return [note_name(g) for g in generators(suite.resolve(run, seed).objectives) if hub_id(g)]


def offline_if_submitted(is_main_process: bool) -> None:
    """In a job Snakemake submitted (a cluster node runs the Snakefile again for it): no download, the
    submitting host fetched what the job reads (csebench.study.fetch); a missing file is one line, at once."""
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


def finished_run_inputs(workflow, run_folder: str, files: list[str]) -> list:
    """What the train job of a run reads that a build prepares (the corpus, the SentEval pointer, a hub
    backbone's note), as its inputs: a finished run (its train.json there) is not made stale by them.

    A run trained by ``csebench train --backbone ... --method ... --corpus ...`` sits in the folder the
    pipeline gives it, but data/<source>/ of the suite that lists it is prepared only by that suite's build:
    the preparation, run for the evaluation jobs that read the same files, counted as "input files updated by
    another job", and afterwards the prepared files were newer than the run; either way Snakemake trained it
    again. So for a finished run each file is ``ancient`` (its time never makes the run stale) and, where it is
    not there yet, not asked for when Snakemake has no record of training the run (no record of its inputs to
    compare either): a finished run needs no data. A run Snakemake trained keeps the inputs it recorded (a
    changed set of inputs would retrain it). A run not finished, or a forced train (--forcerun train, -F),
    reads them as always: prepared first, newer ones retrain."""
    from snakemake.io import ancient

    summary = os.path.join(run_folder, "train.json")
    if not os.path.isfile(summary) or _train_forced(workflow, run_folder):
        return list(files)
    recorded = _recorded(workflow, summary)
    return [ancient(f) for f in files if recorded or os.path.exists(f)]


def _train_forced(workflow, run_folder: str) -> bool:
    settings = getattr(workflow, "dag_settings", None)
    if settings is None:
        return False
    forced = {str(t) for t in (getattr(settings, "forcerun", None) or ())}
    inside = os.path.normpath(run_folder) + os.sep
    return bool(getattr(settings, "forceall", False)) or "train" in forced or any(
        os.path.normpath(t).startswith(inside) for t in forced)


def _recorded(workflow, path: str) -> bool:
    """Whether Snakemake's metadata has a record of the job that wrote ``path`` (it ran in a build here)."""
    try:
        from snakemake.io import IOFile

        return workflow.persistence.metadata(IOFile(path)) is not None
    except Exception:  # noqa: BLE001  no persistence yet, or another version's API: count it as recorded (as before)
        return True

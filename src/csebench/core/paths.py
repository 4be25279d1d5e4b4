"""Where every output lives: the one place the package (csebench.study.jobs, csebench.results, the analyses),
the Snakemake rules and csebench.workflow.dvcgen ask for a path (docs/runs.md). A leaf module.

  data/{source}/corpus.txt, data/{source}/senteval/ROOT        prepared data (corpus_file, senteval_pointer)
  results/runs/{key}/seed{seed}/                               ONE run, trained once (key_dir)
      {ev}/                                                    evaluated under the settings named {ev} (eval_dir)
      {ev}/analysis/{name}.json                                a per-run analysis, computed once (eval_analysis)
  results/{suite}/runs/{run}/seed{seed}/                       a suite's view of the run (view_dir)
  results/{suite}/analysis/[{run}/[seed{seed}/]]{name}.json    a suite's analyses (analysis_file)
  results/{suite}/{figures,tables}/{name}.{png,md,csv}         a suite's figures and tables (suite_figure, suite_table)
  results/{suite}/metrics.json, logs/                          DVC's metrics (suite_metrics), the jobs' logs (suite_log)
  results/papers/{paper}/ (results/demo/papers/ at demo scale) the papers' items (items_root)
  results/README.md                                            the front page (front_page)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # no '/', never '.' or '..', no leading '-' (an option) or '.' (hidden)


def check_name(where: str, name) -> None:
    """A name that becomes a folder or file name (suite, data source, backbone, method, run, paper item)
    stays one path component: ``../../x`` as a suite wrote a suite's files outside results/."""
    if not (isinstance(name, str) and NAME.fullmatch(name)):
        from csebench.core.errors import ConfigError

        raise ConfigError(f"{where} {str(name)!r}: use letters, digits, . _ + - only, starting with a letter or digit "
                          "(it names a folder)")



_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_path_setting(where: str, value, pattern: bool = False) -> None:
    """A path params.yaml gives (paths.data, paths.results, paths.shared, a data source's files): any printable
    text, spaces, quotes and `$(...)` included, since every command the rules run quotes it (it stays one
    argument and runs nothing); refused in one line: a control character (a newline ends a shell command), a
    leading '-' (a command reads it as an option) and, for the folders the rules' file patterns start with
    (``pattern``: paths.data, paths.results), '{' and '}' (Snakemake reads them as a wildcard)."""
    from csebench.core.errors import ConfigError

    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a path, got {value!r}")
    bad = _CONTROL.search(value)
    if bad:
        raise ConfigError(f"{where}: {value!r} holds a control character ({ascii(bad.group())} at position "
                          f"{bad.start() + 1}): a path is printable text")
    if value.startswith("-"):
        raise ConfigError(f"{where}: {value!r} starts with '-', which a command reads as an option: write ./{value}")
    if pattern and ("{" in value or "}" in value):
        raise ConfigError(f"{where}: {value!r} holds '{{' or '}}', which Snakemake reads as a wildcard in the rules' "
                          "file patterns: choose a folder name without braces")


# ----------------------------------------------------------------------------- prepared data

def corpus_file(data: str, source: str) -> str:
    return f"{data}/{source}/corpus.txt"


def senteval_pointer(data: str, source: str) -> str:
    """The pointer file to SentEval's downstream/ folder (its folder is what --senteval takes)."""
    return f"{data}/{source}/senteval/ROOT"


# ----------------------------------------------------------------------------- runs

def run_store(results: str) -> str:
    """``{results}/runs``: every distinct run (runs.dvc tracks it)."""
    return f"{results}/runs"


def key_dir(results: str, key: str, seed) -> str:
    """``{results}/runs/{key}/seed{seed}``: where one distinct run is trained and evaluated, whichever
    suites list it (csebench.study.jobs.Runs; Snakemake's RUN pattern passes wildcards)."""
    return f"{results}/runs/{key}/seed{seed}"


def view_dir(results: str, suite: str, run: str, seed) -> str:
    """``{results}/{suite}/runs/{run}/seed{seed}``: a suite's view of a run (links to its own folder, key_dir,
    and its results relabelled with the suite's names; csebench.workflow.runviews)."""
    return f"{results}/{suite}/runs/{run}/seed{seed}"


def eval_dir(run_folder: str, ev: str) -> str:
    """The run evaluated under one set of evaluation settings (``ev``: csebench.study.jobs.eval_name)."""
    return f"{run_folder}/{ev}"


def eval_analysis(eval_folder: str, name: str, ext: str = "json") -> str:
    """A per-run analysis in the run's evaluation folder: computed once whichever suites list the run."""
    return f"{eval_folder}/analysis/{name}.{ext}"


def teacher_cache(run_folder: str, representation: str = "eval") -> str:
    """A teacher run's cached corpus embeddings (DistillCSE), in its own folder: of its evaluation embedding
    (``eval``), or of its training representation, pooler and saved training head (``training``: DCLR's
    complementary model as released, ``teacher_representation: training``)."""
    return f"{run_folder}/teacher/" + ("embeddings.npy" if representation == "eval" else f"{representation}.npy")



# ----------------------------------------------------------------------------- a suite's folder

def suite_dir(results: str, suite: str) -> str:
    return f"{results}/{suite}"


def suite_figure(results: str, suite: str, name: str) -> str:
    return f"{results}/{suite}/figures/{name}.png"


def suite_table(results: str, suite: str, name: str, ext: str = "md") -> str:
    return f"{results}/{suite}/tables/{name}.{ext}"


def suite_metrics(results: str, suite: str) -> str:
    """A suite's tidy metrics (DVC's metrics)."""
    return f"{results}/{suite}/metrics.json"


def suite_log(results: str, suite: str, name: str) -> str:
    return f"{results}/{suite}/logs/{name}.log"


def analysis_file(results: str, suite: str, name: str, run: str | None = None, seed=None, ext: str = "json") -> str:
    """A suite's analysis result: of the suite (no run), of all seeds of a run (no seed), or of one run
    and seed (for an analysis computed once per run, a view of its eval_analysis file)."""
    where = "" if run is None else f"{run}/" if seed is None else f"{run}/seed{seed}/"
    return f"{results}/{suite}/analysis/{where}{name}.{ext}"


# ----------------------------------------------------------------------------- pages

def items_root(results: str = "results", scale: str = "paper") -> str:
    """Where the papers' items go: results/papers (paper scale) or results/<scale>/papers."""
    return f"{results}/papers" if scale == "paper" else f"{results}/{scale}/papers"


def front_page(results: str) -> str:
    return f"{results}/README.md"


# The build's modification times, kept in each tree that DVC tracks (csebench.workflow.stamps, docs/dvc.md).
TIMES_RECORD = "csebench-times.json"


def times_record(tree, group: str | None = None):
    """The record of a tracked folder (``<tree>/.csebench-times.json``) or of a group of single files
    in it that one DVC stage writes (a paper item's md/csv/tex, the front page: ``<tree>/.<stem>.csebench-times.json``)."""
    from pathlib import Path

    return Path(tree) / (f".{TIMES_RECORD}" if group is None else f".{group}.{TIMES_RECORD}")


def tracked_trees(results):
    """(tree, record) of everything under ``results`` that DVC tracks as one output: each suite's
    folder and the run store (a record inside), each paper item's files and the front page (a record
    beside them, also an output of their stage: csebench.workflow.dvcgen)."""
    from pathlib import Path

    root = Path(results)
    if not root.is_dir():
        return
    for d in sorted(root.iterdir()):
        if d.is_dir() and not d.is_symlink() and d.name != "papers":
            yield d, times_record(d)
    yield from _groups(root, only="README")
    if (root / "papers").is_dir():
        for paper in sorted(p for p in (root / "papers").iterdir() if p.is_dir() and p.name != "logs"):
            yield from _groups(paper)


def _groups(folder, only: str | None = None):
    """(folder, record) of each group of single files in a folder: the files named <stem>.*"""
    if not folder.is_dir():
        return
    stems = {f.name.split(".")[0] for f in folder.iterdir() if f.is_file() and not f.name.startswith(".")}
    stems |= {f.name[1:].removesuffix(f".{TIMES_RECORD}") for f in folder.glob(f".*.{TIMES_RECORD}")}
    for stem in sorted(stems):
        if only is None or stem == only:
            yield folder, times_record(folder, stem)


def user_cache_dir() -> Path:
    """The per-user cache (downloads, checked settings): $CSEBENCH_CACHE, else $XDG_CACHE_HOME/csebench
    (~/.cache/csebench)."""
    if os.environ.get("CSEBENCH_CACHE"):
        return Path(os.environ["CSEBENCH_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "csebench"

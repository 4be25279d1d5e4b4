"""The analyses in the pipeline (workflow/rules/analysis.smk, views.smk): everything those rules need
is generated here from the analyses' declarations (csebench.analysis.base), so a new analysis is its
file and its test.

  - the config: `analyses:` (which a suite builds: those ``listed``) and `analysis: {NAME: {...}}` (their
    settings: each analysis's Settings, defaults filled in), checked when the Snakefile loads;
  - a rule per analysis with a ``pipeline``, analysis_NAME: its inputs (``pipeline(job)``, a Job), its
    outputs (csebench.core.paths, by what it reads), its command line (its inputs, settings and outputs);
  - a rule per suite-level figure or table (``combine``), analysis_NAME_suite;
  - the targets of a suite (`rule all`, the links of its README).
"""

from __future__ import annotations

import os

from csebench.core import paths
from csebench.analysis import ANALYSES
from csebench.analysis.base import INPUTS, MODEL_INPUTS, Analysis, settings_argv
from csebench.study.typed import Params

class Job:
    """One analysis job: its analysis and settings, the wildcards of its rule, and the files and
    options ``pipeline(job)`` gives it (``inputs``: name -> file or files; ``options``: name -> value)."""

    def __init__(self, pipe: "AnalysisPipeline", analysis: Analysis, wildcards):
        self.pipe, self.analysis, self.w = pipe, analysis, wildcards
        self.params, self.settings = pipe.params, pipe.settings[analysis.name]
        self.inputs: dict[str, str | list[str]] = {}
        self.options: dict[str, object] = {}
        analysis.pipeline(self)

    # the wildcards, and what they name
    key = property(lambda self: self.w.key)
    seed = property(lambda self: self.w.seed)
    run = property(lambda self: self.w.run)

    @property
    def suite(self) -> str:
        """The job's suite; a run's own job (no suite): the first suite that lists the run."""
        return self.w.suite if hasattr(self.w, "suite") else self.first_listed()[0]

    def first_listed(self) -> tuple[str, str]:
        """(suite, run) naming the run of a {key} job: the first of params.yaml that lists it."""
        return self.pipe.runs.first(self.w.key, int(self.w.seed))

    def runs(self, evaluated: bool = False) -> list[tuple[str, int]]:
        suite = self.params.suite(self.suite)
        return suite.evaluated_jobs() if evaluated else suite.jobs()

    def evaluation(self, key: str):
        """A setting of the evaluation the job's folder names (or of its suite's)."""
        ev = self.pipe.runs.eval_settings(self.w.ev) if hasattr(self.w, "ev") else self.params.suite(self.suite).evaluation
        return ev[key]

    # what the pipeline gives the analysis
    def model(self, name: str = "model") -> None:
        """The job's own run (its train.json: the model folder beside it is passed)."""
        self.inputs[name] = f"{paths.key_dir(self.pipe.results, self.w.key, self.w.seed)}/train.json"

    def view_models(self, jobs: list[tuple[str, int]], name: str = "model") -> None:
        """Runs of the job's suite, as the suite sees them (their views)."""
        suite = self.params.suite(self.suite)
        files = [f"{suite.run_dir(r, s)}/train.json" for r, s in jobs]
        self.inputs[name] = files[0] if name == "model" else files

    def run_models(self, jobs: list[tuple[str, int]], name: str) -> None:
        """Runs of the job's suite, in their own folders."""
        self.inputs[name] = [f"{self.pipe.runs.folder(self.suite, r, s)}/train.json" for r, s in jobs]

    def embeddings(self) -> None:
        """The job's own embeddings table (`csebench embed`)."""
        self.inputs["embeddings"] = [f"{paths.eval_dir(paths.key_dir(self.pipe.results, self.w.key, self.w.seed), self.w.ev)}"
                                     "/embeddings.npz"]

    def embeddings_of(self, jobs: list[tuple[str, int]]) -> None:
        """The embeddings tables of runs of the job's suite (its evaluation settings)."""
        self.inputs["embeddings"] = [f"{self.pipe.runs.eval_folder(self.suite, r, s)}/embeddings.npz" for r, s in jobs]

    def corpus(self) -> None:
        self.inputs["corpus"] = paths.corpus_file(self.pipe.data, self.params.suite(self.suite).data)

    def senteval(self) -> None:
        self.inputs["senteval"] = paths.senteval_pointer(self.pipe.data, self.params.suite(self.suite).data)
        # a capped evaluation (CPU demo) is capped for its analyses too: the STS-B pairs eval-sts scores
        self.option("max_sts_pairs", self.evaluation("max_sts_pairs"))

    def label(self) -> None:
        """A run's own result is labelled by its key (each suite's view relabels it with its run's name)."""
        self.option("label", f"{self.w.key} s{self.w.seed}")

    def option(self, name: str, value) -> None:
        if value is not None:
            self.options[name] = value

    def argv(self, outputs: dict[str, str]) -> list[str]:
        """`csebench analyze` NAME and its arguments: the inputs, options, settings and outputs."""
        argv = [self.analysis.name]
        for name, files in self.inputs.items():
            files = [files] if isinstance(files, str) else list(files)
            if not files:
                continue
            if name in MODEL_INPUTS:  # a run's train.json stands for the model folder beside it
                files = [f"{os.path.dirname(f)}/model" for f in files]
            elif name == "senteval":  # the prepared pointer file stands for its folder
                files = [os.path.dirname(f) for f in files]
            flag = _flag(self.analysis, name)
            argv += [a for f in files for a in (flag, f)] if INPUTS.get(name) and \
                INPUTS[name].kwargs.get("action") == "append" else [flag, *files]
        for name, value in self.options.items():
            argv += [_flag(self.analysis, name), *(map(str, value) if isinstance(value, list) else [str(value)])]
        argv += settings_argv(self.settings)
        return argv + [a for name, path in outputs.items() for a in ("--out" if name == "json" else f"--{name}", path)]


def _flag(analysis: Analysis, name: str) -> str:
    opt = INPUTS.get(name) or next((o for o in analysis.options if o.dest == name), None)
    if opt is None:
        return f"--{name.replace('_', '-')}"
    return opt.flags[0]


class AnalysisPipeline:
    """The analyses as the Snakefile's config and params.yaml ask for them (one per Snakefile)."""

    def __init__(self, params: Params, config: dict, runs):
        from csebench.analysis.selection import selected, settings

        self.params, self.runs = Params.of(params), runs
        self.results, self.data = self.params.paths.results, self.params.paths.data
        self.selected, self.settings = selected(config), settings(config)

    # ---- the rules
    @staticmethod
    def built() -> list[Analysis]:
        """The analyses the pipeline has a rule for (analysis_NAME)."""
        return [a for _, a in ANALYSES.items() if a.pipeline is not None]

    @staticmethod
    def combined() -> list[Analysis]:
        """The analyses with a suite-level figure or table (analysis_NAME_suite)."""
        return [a for a in AnalysisPipeline.built() if a.combine is not None]

    def viewed(self) -> str:
        """The names of the per-run analyses a suite sees through its view (a wildcard constraint)."""
        return "|".join(a.name for a in self.built() if a.reads == "model" and a.shared)

    @property
    def eval_folder(self) -> str:
        """A run's evaluation folder as a Snakemake pattern ({key}, {seed}, {ev})."""
        return paths.eval_dir(paths.key_dir(self.results, "{key}", "{seed}"), "{ev}")

    def outputs(self, a: Analysis) -> dict[str, str]:
        """The rule's outputs (Snakemake patterns): ``json`` and the files `--figure` / `--markdown` write."""
        results = self.results
        if a.reads == "model" and a.shared:  # once per run, in its evaluation folder; suites see a view
            json = paths.eval_analysis(self.eval_folder, a.name)
        elif a.reads == "model":
            json = paths.analysis_file(results, "{suite}", a.name, "{run}", "{seed}")
        else:
            json = paths.analysis_file(results, "{suite}", a.name, "{run}" if a.reads == "run" else None)
        out = {"json": json}
        if "markdown" in a.writes:
            out["markdown"] = json.removesuffix(".json") + ".md"
        if "figure" in a.writes:
            out["figure"] = paths.suite_figure(results, "{suite}", a.name) if a.reads == "suite" else json.removesuffix(".json") + ".png"
        return out

    def log(self, a: Analysis) -> str:
        if a.reads == "model" and a.shared:
            return f"{self.eval_folder}/logs/analysis.{a.name}.log"
        which = {"suite": "", "run": ".{run}", "model": ".{run}.seed{seed}"}[a.reads]
        return paths.suite_log(self.results, "{suite}", f"analysis.{a.name}{which}")

    def inputs(self, a: Analysis):
        """The rule's input function: wildcards -> named inputs."""
        return lambda w: Job(self, a, w).inputs

    def command(self, a: Analysis):
        """The rule's `csebench analyze` arguments: (wildcards, output) -> an argument list (the rule quotes it)."""
        return lambda w, output: Job(self, a, w).argv(dict(output.items()))

    def threads(self, a: Analysis, default: int) -> int:
        return a.threads or default

    def resources(self, a: Analysis) -> dict[str, int]:
        return {"gpu": 1} if a.gpu else {}

    @staticmethod
    def priority(a: Analysis) -> int:
        """An analysis of the whole suite is one long job that can start once the suite's first runs are
        trained; scheduled before the per-run work, it is not the build's last job on one busy core."""
        return 1 if a.reads == "suite" else 0

    # ---- a suite's figures and tables
    def combine_outputs(self, a: Analysis) -> dict[str, str]:
        if a.combine.output == "figure":
            return {"out": paths.suite_figure(self.results, "{suite}", a.name)}
        out = {"out": paths.suite_table(self.results, "{suite}", a.name)}
        if a.combine.csv:
            out["csv"] = paths.suite_table(self.results, "{suite}", a.name, "csv")
        return out

    def combine_log(self, a: Analysis) -> str:
        return paths.suite_log(self.results, "{suite}", f"analysis.{a.name}.suite")

    def combine_inputs(self, a: Analysis):
        """wildcards -> {results: every evaluated run's result, sts: their sts.json (when it colours them)}."""
        def files(w):
            suite = self.params.suite(w.suite)
            jobs = suite.evaluated_jobs()
            out = {"results": [paths.analysis_file(self.results, w.suite, a.name, r, s, a.combine.reads) for r, s in jobs]}
            if a.combine.sts:
                out["sts"] = [f"{suite.run_dir(r, s)}/sts.json" for r, s in jobs]
            return out
        return files

    def combine_command(self, a: Analysis):
        """(wildcards, input, output) -> the `csebench analyze-figure` arguments."""
        def argv(w, input, output):
            args = [a.name, "--inputs", *input.results]
            if a.combine.sts:
                args += ["--sts", *input.sts]
            return args + [a for name, path in output.items() for a in (f"--{name}", path)]
        return argv

    # ---- what a suite builds
    def targets(self, suite: str) -> list[str]:
        """The files the config's `analyses:` build for a suite: the suite's figures, then its own
        analyses (JSON and figure), then its tables (the order of its README's links)."""
        chosen = [ANALYSES.get(n) for n in self.selected]
        out = [paths.suite_figure(self.results, suite, a.name) for a in chosen if a.combine and a.combine.output == "figure"]
        for a in chosen:
            if a.reads == "suite":
                files = self.outputs(a)
                out += [files[k].replace("{suite}", suite) for k in ("json", "figure") if k in files]
        out += [paths.suite_table(self.results, suite, a.name) for a in chosen if a.combine and a.combine.output == "table"]
        return out

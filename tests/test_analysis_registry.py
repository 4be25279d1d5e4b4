"""The analyses' registry: every analysis declares its shape, and the command line, the
Snakemake rules and targets and the config check are generated from the declarations and agree."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from csebench.analysis import ANALYSES
from csebench.analysis.base import INPUTS, Analysis, Settings, settings_argv
from runhelpers import needs_pipeline

ROOT = Path(__file__).resolve().parents[1]
NAMES = ANALYSES.names()


def test_the_registry_lists_every_analysis_module_and_imports_none():
    files = sorted(p.stem for p in (ROOT / "src/csebench/analysis/analyses").glob("*.py") if not p.stem.startswith("_"))
    assert NAMES == files and len(NAMES) >= 12
    code = ("import sys; from csebench.analysis import ANALYSES; ANALYSES.names(); "
            "assert not [m for m in sys.modules if m.startswith('csebench.analysis.analyses.')]; "
            "[ANALYSES.get(n) for n in ANALYSES]; assert 'torch' not in sys.modules, 'an analysis imports torch on load'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", NAMES)
def test_every_analysis_declares_its_shape(name):
    a = ANALYSES.get(name)
    assert isinstance(a, Analysis) and a.name == name and re.fullmatch(r"[a-z][a-z0-9_]*", name)
    assert a.summary and "\n" not in a.summary and len(a.summary) <= 100
    assert a.reads in ("model", "run", "suite") and callable(a.run)
    assert dataclasses.is_dataclass(a.Settings) and issubclass(a.Settings, Settings)
    a.Settings()  # every setting has a default
    assert set(a.inputs()) <= set(INPUTS), set(a.inputs()) - set(INPUTS)
    assert not (a.combine and a.reads != "model"), "a suite figure draws the per-model results"
    assert a.listed is False or a.pipeline is not None, "an analysis a config can list needs its pipeline inputs"


def _parser():
    from csebench.cli import build_parser

    return build_parser()


def _subcommands(parser, *path) -> dict:
    for name in path:
        action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = action.choices[name]
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


def test_the_commands_are_generated_from_the_registry():
    parser = _parser()
    assert list(_subcommands(parser, "analyze")) == NAMES
    assert list(_subcommands(parser, "analyze-figure")) == [n for n in NAMES if ANALYSES.get(n).combine]
    for name in NAMES:
        a = ANALYSES.get(name)
        defaults = a.Settings()
        args = parser.parse_args(["analyze", name, "--out", "x.json"])
        cli = [f.name for f in dataclasses.fields(a.Settings) if f.metadata.get("cli", True)]
        assert {f: getattr(args, f) for f in cli} == {f: getattr(defaults, f) for f in cli}, name
        for i in INPUTS:  # every analysis's namespace has every input, given or not (the envelope reads them)
            assert hasattr(args, i), (name, i)
        # the pipeline's form of settings reads back as the same settings
        again = parser.parse_args(["analyze", name, "--out", "x.json", *settings_argv(defaults)])
        assert {f: getattr(again, f) for f in cli} == {f: getattr(defaults, f) for f in cli}, name
        for opt in (*a.needs, *a.takes, *a.writes):
            assert INPUTS[opt].flags[0] in _subcommands(parser, "analyze")[name].format_help(), (name, opt)


def test_the_command_line_form_of_settings_round_trips_changed_values():
    parser = _parser()
    a = ANALYSES.get("topk_negatives")
    changed = a.settings({"batch_sizes": [8, 16], "repeats": 3, "k": 2})
    args = parser.parse_args(["analyze", "topk_negatives", "--out", "x.json", *settings_argv(changed)])
    assert (args.batch_sizes, args.repeats, args.k, args.pool_size) == ([8, 16], 3, 2, 4096)
    n = ANALYSES.get("neighbours").settings({"query": ["a b", "c"]})
    assert parser.parse_args(["analyze", "neighbours", "--out", "x", *settings_argv(n)]).query == ["a b", "c"]
    assert parser.parse_args(["analyze", "layers", "--out", "x", "--include-special"]).include_special is True


def test_the_config_check_is_the_registry():
    from csebench.analysis.selection import selected, settings
    from csebench.core.errors import ConfigError

    listed = [n for n in NAMES if ANALYSES.get(n).listed]
    assert selected({"analyses": listed}) == listed
    for name in set(NAMES) - set(listed):
        with pytest.raises(ConfigError, match=f"'{name}' is not one of .* \\(built when a paper item reads it, not listed\\)"):
            selected({"analyses": [name]})
    assert {n: s for n, s in settings({}).items()} == {n: ANALYSES.get(n).Settings() for n in NAMES}
    # the schema file names no analysis and no setting: nothing there can drift from the declarations
    schema = (ROOT / "src/csebench/resources/snakemake-config.schema.yaml").read_text()
    assert not [n for n in NAMES if n in schema]


@needs_pipeline
def test_the_snakemake_rules_are_the_registry(project_root):
    """Every analysis with a pipeline has its rule, every suite figure or table its own, nothing else."""
    from runhelpers import run_snakemake, tool_env

    proc = run_snakemake(["--list-rules", "--configfile", "config/ci.yaml", "--config", "plan=false"], cwd=project_root,
                         env=tool_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rules = {r for r in proc.stdout.split() if r.startswith("analysis_")}
    built = [n for n in NAMES if ANALYSES.get(n).pipeline is not None]
    assert rules == {f"analysis_{n}" for n in built} | {f"analysis_{n}_suite" for n in built if ANALYSES.get(n).combine}


def test_a_suites_targets_follow_its_readme_order():
    from csebench.analysis.pipeline import AnalysisPipeline
    from csebench.study.params import load_params
    from csebench.study.jobs import Runs
    from runhelpers import PARAMS

    params = load_params(PARAMS)
    config = {"analyses": ["neighbours", "topk_negatives", "layers", "align_uniform"]}
    assert AnalysisPipeline(params, config, Runs(params)).targets("ci") == [
        "results/ci/figures/layers.png", "results/ci/figures/align_uniform.png",  # the figures, in the config's order
        "results/ci/analysis/topk_negatives.json", "results/ci/figures/topk_negatives.png",  # the suite's own
        "results/ci/tables/neighbours.md"]  # then the tables


def test_a_capped_suite_s_analyses_of_stsb_read_its_capped_pairs_and_an_uncapped_one_s_the_whole_split():
    """The demo caps STS at max_sts_pairs and `embed` then encodes no STS-B split whole: each analysis job
    given SentEval data is told the cap (it reads the pairs eval-sts scores, all in the table), a suite
    without a cap is told nothing (the papers' whole split)."""
    from types import SimpleNamespace

    from csebench.analysis.pipeline import AnalysisPipeline
    from csebench.study.jobs import Runs, eval_name, suite_evaluation
    from csebench.study.params import load_params
    from runhelpers import PARAMS

    params = load_params(PARAMS)
    pipe = AnalysisPipeline(params, {"analyses": ["layers", "align_uniform", "neighbours"]}, Runs(params))
    for suite, run in (("demo", "simcse"), ("ci", "simcse"), ("paper", "bert-base-simcse")):
        cap = suite_evaluation(params, suite)["max_sts_pairs"]
        w = SimpleNamespace(key=pipe.runs.key(suite, run), seed="42", ev=eval_name(suite_evaluation(params, suite)))
        for name in ("layers", "align_uniform", "neighbours"):
            a = ANALYSES.get(name)
            argv = pipe.command(a)(w, pipe.outputs(a))  # the argument list the rule quotes
            assert ("--max-sts-pairs" in argv) == (cap is not None and "senteval" in a.inputs()), (suite, name, argv)
            if "--max-sts-pairs" in argv:
                assert argv[argv.index("--max-sts-pairs") + 1] == str(cap)
    assert suite_evaluation(params, "demo")["max_sts_pairs"] and suite_evaluation(params, "paper")["max_sts_pairs"] is None

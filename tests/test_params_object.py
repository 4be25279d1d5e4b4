"""params.yaml as one typed object (csebench.study.typed.Params): loaded and checked once, its parts named, and
the only way code outside csebench.study reads params.yaml: no function there takes the file's dict or digs keys
out of it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from csebench.core.errors import ConfigError
from csebench.study.jobs import suite_jobs
from csebench.study.params import BackboneConfig, DataConfig, load_params
from csebench.study.resolve import resolve_run
from csebench.study.typed import Params, Paths

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "csebench"


def _is_params(node: ast.AST) -> bool:
    """``params`` or ``<x>.params`` (a renderer's ctx.params), not ``args.params`` (the --params file's path)."""
    if isinstance(node, ast.Name):
        return node.id == "params"
    return isinstance(node, ast.Attribute) and node.attr == "params" and not (
        isinstance(node.value, ast.Name) and node.value.id == "args")


def raw_reads(path: Path, root: Path = ROOT) -> list[str]:
    """Where a module outside the study takes the params dict or reads keys out of it."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in node.args.args + node.args.kwonlyargs:
                if a.arg == "params" and a.annotation is not None and "dict" in ast.unparse(a.annotation):
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}(params: {ast.unparse(a.annotation)})")
        elif isinstance(node, ast.Subscript) and _is_params(node.value):
            out.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_params(node.func.value)
              and node.func.attr in ("get", "setdefault", "items", "keys", "values", "pop", "update")):
            out.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node)}")
    return out


def test_no_function_outside_the_study_takes_or_reads_the_params_dict():
    found = [hit for p in sorted(SRC.rglob("*.py")) if "study" not in p.relative_to(SRC).parts[:1] for hit in raw_reads(p)]
    assert not found, ("code outside csebench.study reads params.yaml's dict; ask csebench.study.typed.Params for "
                       "the part instead:\n" + "\n".join(found))


def test_the_check_finds_a_dict_parameter_and_a_key_read(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f(params: dict, args):\n    return params.get('suites'), ctx.params['suites'], args.params\n")
    assert [h.split(" ", 1)[1] for h in raw_reads(f, tmp_path)] == [
        "f(params: dict)", "params.get('suites')", "ctx.params['suites']"]


STUDY_MODULES = ("csebench.study.jobs", "csebench.study.resolve", "csebench.study.params")


def whole_params_functions() -> dict[str, set[str]]:
    """module -> the functions of the study that take the whole params as their first argument."""
    out = {}
    for module in STUDY_MODULES:
        tree = ast.parse((SRC / Path(*module.split(".")[1:])).with_suffix(".py").read_text(encoding="utf-8"))
        out[module] = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.args.args
                       and n.args.args[0].arg == "params"}
    return out


def whole_params_imports(path: Path, functions: dict[str, set[str]], root: Path = ROOT) -> list[str]:
    """Where a module imports a study function that takes the whole params (suite_jobs(params, suite), ...)."""
    return [f"{path.relative_to(root)}:{node.lineno} {node.module}.{a.name}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module in functions
            for a in node.names if a.name in functions[node.module]]


def test_code_outside_the_study_asks_a_suite_or_the_params_not_the_study_functions():
    """Functions take the part they need: a suite's jobs, runs and folders come from its Suite
    (``params.suite(name).jobs()``, ``.resolve(run, seed)``, ``.run_dir(run, seed)``), a data source or a backbone
    from the Params; none of the study's functions of the whole params is called from outside it."""
    functions = whole_params_functions()
    assert {"suite_jobs", "resolve_run", "find_run", "run_dir", "data_config"} <= set().union(*functions.values())
    found = [hit for p in sorted(SRC.rglob("*.py")) if "study" not in p.relative_to(SRC).parts[:1]
             for hit in whole_params_imports(p, functions)]
    assert not found, ("code outside csebench.study calls a study function with the whole params; ask the Suite "
                       "(params.suite(name)) or the Params for it:\n" + "\n".join(found))


def test_the_import_check_finds_a_study_function_of_the_whole_params(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f(p):\n    from csebench.study.jobs import suite_jobs, Runs\n    "
                 "from csebench.study.params import deep_merge\n    return suite_jobs(p, 'demo')\n")
    assert [h.split(" ", 1)[1] for h in whole_params_imports(f, whole_params_functions(), tmp_path)] == [
        "csebench.study.jobs.suite_jobs"]


def test_a_suite_answers_for_itself_as_the_study_functions_do(tmp_path):
    from csebench.study.jobs import (all_runs_with_teachers, correlation_groups, eval_name, evaluated_jobs, run_folder,
                                     suite_evaluation, suite_mteb_tasks, suite_params, teacher_jobs)
    from csebench.study.params import run_dir
    from csebench.study.resolve import find_run, run_info, suite_runs, suite_seeds

    raw = load_params(ROOT / "params.yaml")
    params = Params(raw)
    for name in ("demo", "paper-distillcse", "combinations"):
        suite = params.suite(name)
        assert suite.params is params and suite.jobs() == suite_jobs(raw, name)
        assert suite.evaluated_jobs() == evaluated_jobs(raw, name)
        assert suite.jobs_with_teachers() == all_runs_with_teachers(raw, name)
        assert suite.runs() == suite_runs(raw, name) and suite.seeds() == suite_seeds(raw, name)
        assert suite.evaluation == suite_evaluation(raw, name) and suite.eval_name == eval_name(suite_evaluation(raw, name))
        assert suite.mteb_tasks == suite_mteb_tasks(raw, name) and suite.params_keys() == suite_params(raw, name)
        for run, seed in suite.jobs()[:3]:
            assert suite.run(run) == find_run(raw, name, run) and suite.seeds(run) == suite_seeds(raw, name, run)
            assert suite.resolve(run, seed).key() == resolve_run(raw, name, run, seed).key()
            assert suite.run_dir(run, seed) == run_dir(raw, name, run, seed)
            assert suite.run_dir(run, seed, tmp_path) == run_dir(raw, name, run, seed, str(tmp_path))
            assert suite.run_folder(run, seed) == run_folder(raw, name, run, seed)
            assert suite.teacher_jobs(run, seed) == teacher_jobs(raw, name, run, seed)
            assert suite.correlation_groups(run, seed) == correlation_groups(raw, name, run, seed)
            assert suite.run_info(run, seed) == run_info(raw, name, run, seed)
            assert suite.label(run) == run_info(raw, name, run, seed)["method_label"]
            assert suite.trains(run) == find_run(raw, name, run)["train"]
    distill = params.suite("paper-distillcse")
    assert any(distill.teacher_jobs(r, s) for r, s in distill.jobs())  # the DistillCSE suite's students have teachers
    # a changed copy's suites are its own: another results folder moves every view
    moved = params.with_results(tmp_path).suite("demo")
    run, seed = moved.jobs()[0]
    assert moved.run_dir(run, seed) == run_dir(raw, "demo", run, seed, str(tmp_path))
    with pytest.raises(ConfigError, match="suite 'demo' has no run 'nope'"):
        params.suite("demo").run("nope")


def test_the_parts_are_named_and_typed():
    params = Params.load(ROOT / "params.yaml")
    raw = load_params(ROOT / "params.yaml")
    assert isinstance(params.paths, Paths) and params.paths.results == raw.get("paths", {}).get("results", "results")
    assert list(params.suites) == list(raw["suites"]) and params.suite("demo").data == raw["suites"]["demo"]["data"]
    assert params.suite("demo").description == raw["suites"]["demo"].get("description", "")
    assert set(params.methods) == set(raw["methods"]) and params.methods["simcse"]
    assert all(isinstance(b, BackboneConfig) for b in params.backbones.values()) and set(params.backbones) == set(raw["backbones"])
    assert isinstance(params.data_source(params.suite("demo").data), DataConfig)
    assert params.runs.folder("demo", "simcse", 42) == params.runs.folder("demo", "simcse", 42)
    with pytest.raises(ConfigError, match="unknown suite 'dmeo'.*demo"):
        params.suite("dmeo")


def test_it_is_read_only_and_changed_copies_are_new_objects(tmp_path):
    params = Params.load(ROOT / "params.yaml")
    with pytest.raises(TypeError):
        params["suites"] = {}  # type: ignore[index]
    moved = params.with_results(tmp_path / "elsewhere")
    assert moved.paths.results == str(tmp_path / "elsewhere") and params.paths.results != moved.paths.results
    assert params.with_results(None) is params
    own, suite, run = params.with_run_of_your_own("minilm", "simcse", "my-corpus.txt", {"training": {"learning_rate": 1e-4}},
                                                  None, 42)
    assert (suite, run) == ("cli", "minilm-simcse") and "cli" not in params.suites and "cli" in own.suites
    assert resolve_run(own, suite, run, 42).training.learning_rate == 1e-4


def test_run_keys_are_the_same_through_the_object_and_the_dict():
    params, raw = Params.load(ROOT / "params.yaml"), load_params(ROOT / "params.yaml")
    for suite in ("demo", "paper", "zoo"):
        for run, seed in suite_jobs(params, suite):
            assert resolve_run(params, suite, run, seed).key() == resolve_run(raw, suite, run, seed).key()

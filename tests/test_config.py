"""Settings (params.yaml, --config overrides, the Snakemake config): unknown names and typos named with
their nearest match, values that cannot be right (NaN, inf, booleans, out of range), keys given twice,
malformed sections. Each is refused before anything runs, in one line naming the key and the file, exit 2,
at every entry point. The short forms of params.yaml read as the long ones."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from csebench.study.params import load_params
from csebench.core.errors import ConfigError
from runhelpers import PARAMS, SHARED, assert_fails, assert_train_fails, ci_training, needs_pipeline, train_argv

P = load_params(PARAMS)


# ---------------------------------------------------------------------------- unknown names, typos, values out of range


def test_unknown_method(inputs, capsys):
    assert_train_fails(inputs, capsys, {"suites": {"ci": {"runs": [{"name": "simcse", "backbone": "tiny", "method": "simcsee"}]}}},
                "suites.ci, run 'simcse'.method", "unknown method 'simcsee'", "did you mean 'simcse'")


def test_unknown_backbone(inputs, capsys):
    assert_train_fails(inputs, capsys, {"suites": {"ci": {"runs": [{"name": "simcse", "backbone": "tinny", "method": "simcse"}]}}},
                "run 'simcse'.backbone", "unknown backbone 'tinny'", "did you mean 'tiny'")


def test_unknown_pooler(inputs, capsys):
    assert_train_fails(inputs, capsys, {"backbones": {"tiny": {"pooler": "clss"}}},
                "backbones.tiny.pooler", "unknown pooler 'clss'", "did you mean 'cls'")


def test_unknown_objective(inputs, capsys):
    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"gausian_negatives": {}}}}},
                "objectives: unknown objective 'gausian_negatives'", "did you mean 'gaussian_negatives'")


def test_unknown_objective_setting(inputs, capsys):
    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"gaussian_negatives": {"ratioo": 2}}}}},
                "objectives.gaussian_negatives", "unknown key 'ratioo'", "did you mean 'ratio'")


@pytest.mark.parametrize("lr", [0, -1e-5])
def test_learning_rate_must_be_positive(inputs, capsys, lr):
    assert_train_fails(inputs, capsys, ci_training(learning_rate=lr), "learning_rate must be > 0", str(float(lr)))


def test_batch_size_one(inputs, capsys):
    assert_train_fails(inputs, capsys, ci_training(batch_size=1), "batch_size must be >= 2", "in-batch negatives")


def test_typo_in_training_key(inputs, capsys):
    assert_train_fails(inputs, capsys, ci_training(learning_rte=1e-4), "over.yaml: suites.ci.training: unknown key 'learning_rte'",
                "did you mean 'learning_rate'")


def test_typo_in_top_level_key_names_the_override_file(inputs, capsys):
    line = assert_train_fails(inputs, capsys, {"trainin": {"learning_rate": 1e-4}}, "over.yaml", "unknown key 'trainin'",
                       "did you mean 'training'")
    assert "params.yaml" not in line


def test_typo_in_params_file_itself(inputs, capsys):
    bad = inputs / "params-typo.yaml"
    bad.write_text(PARAMS.read_text(encoding="utf-8").replace("  learning_rate: 3.0e-5", "  learning_rte: 3.0e-5", 1),
                   encoding="utf-8")
    out = inputs / "run"
    argv = train_argv(inputs, out, None)
    argv[argv.index("--params") + 1] = str(bad)
    assert_fails(capsys, argv, "params-typo.yaml: training: unknown key 'learning_rte'", "did you mean 'learning_rate'",
                 outputs=[out])


def test_invalid_yaml_override(inputs, capsys):
    cfg = inputs / "broken.yaml"
    cfg.write_text("training: {learning_rate: [1\n", encoding="utf-8")
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), "broken.yaml", "not valid YAML", outputs=[out])


# ----------------------------------------------------------------------------- NaN, inf, booleans


def _override(tmp: Path, text: str, name: str = "over.yaml") -> Path:
    (tmp / name).write_text(text, encoding="utf-8")
    return tmp / name


@pytest.mark.parametrize("setting,value,message", [
    ("learning_rate", ".nan", "learning_rate: expected a finite number, got nan"),
    ("temperature", ".inf", "temperature: expected a finite number, got inf"),
    ("max_grad_norm", ".nan", "max_grad_norm: expected a finite number, got nan"),
    ("temperature", "-.inf", "temperature: expected a finite number, got -inf"),
    ("epochs", "true", "epochs: expected a whole number, got True"),
    ("learning_rate", "false", "learning_rate: expected a finite number, got False"),
    ("compile", "3", "compile: expected true, false or a name, got 3"),
    ("compile", "fast", "compile: unknown 'fast' (valid: false, true, reduce-overhead)"),
])
def test_non_finite_and_boolean_numbers_are_refused(inputs, capsys, setting, value, message):
    cfg = _override(inputs, f"suites:\n  ci:\n    training: {{{setting}: {value}}}\n")
    out = inputs / "run"
    # a NaN or inf is refused where it is written, with the file (used or not); a boolean as the run resolves
    where = f"{cfg}: suites.ci.training." if "finite" in message and value not in ("true", "false") else "training (suite ci, run simcse)."
    line = assert_fails(capsys, train_argv(inputs, out, cfg), f"{where}{message}", outputs=[out, inputs / "cache"])
    assert line.startswith("csebench train: error:")


def test_non_finite_objective_setting_is_refused(inputs, capsys):
    cfg = _override(inputs, "methods:\n  simcse:\n    objectives: {gaussian_negatives: {std: .inf}}\n")
    assert_fails(capsys, train_argv(inputs, inputs / "run", cfg),
                 f"{cfg}: methods.simcse.objectives.gaussian_negatives.std: expected a finite number, got inf")


# ----------------------------------------------------------------------------- max_seq_length


def test_max_seq_length_past_the_backbone_positions_is_refused_at_model_load(inputs, capsys):
    cfg = _override(inputs, "suites:\n  ci:\n    training: {max_seq_length: 200, max_steps: 2}\n")
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg),
                 "training.max_seq_length (suite ci, run simcse) is 200, longer than the backbone takes (128 positions, "
                 "its max_position_embeddings); set it to at most 128", outputs=[out, inputs / "cache"])


# ----------------------------------------------------------------------------- keys given twice


def test_duplicate_key_in_params_file_names_file_and_line(inputs, capsys):
    text = PARAMS.read_text(encoding="utf-8")
    first = text.index("  temperature: 0.05\n")
    line = text[:first].count("\n") + 1
    bad = inputs / "params-dup.yaml"
    bad.write_text(text.replace("  temperature: 0.05\n", "  temperature: 0.05\n  temperature: 0.1\n", 1), encoding="utf-8")
    argv = train_argv(inputs, inputs / "run", None)
    argv[argv.index("--params") + 1] = str(bad)
    assert_fails(capsys, argv, f"{bad}:{line + 1}: duplicate key 'temperature' (first at line {line}); keep one")


def test_duplicate_key_in_override_and_anchors_still_work(inputs, capsys):
    cfg = _override(inputs, "suites:\n  ci:\n    training: {max_steps: 2}\n    seeds: [1]\n    seeds: [2]\n")
    assert_fails(capsys, ["show-config", "--params", str(PARAMS), "--config", str(cfg), "--suite", "ci", "--run", "simcse",
                          "--seed", "1"], f"{cfg}:5: duplicate key 'seeds' (first at line 4)")
    merged = _override(inputs, "base: &b {max_steps: 2}\nsuites:\n  ci:\n    training:\n      <<: *b\n      max_steps: 3\n",
                       "anchors.yaml")
    from csebench.core.schema import read_yaml

    assert read_yaml(merged)["suites"]["ci"]["training"] == {"max_steps": 3}  # a merge key may be overridden


# ----------------------------------------------------------------------------- every entry point checks the same


TYPOS = [("suites:\n  ci:\n    evaluation: {max_sts_pair: 500}\n",
          "suites.ci.evaluation: unknown key 'max_sts_pair' (did you mean 'max_sts_pairs'?)"),
         ("suites:\n  ci:\n    transfer: {max_train_sentence: 500}\n",
          "suites.ci.transfer: unknown key 'max_train_sentence' (did you mean 'max_train_sentences'?)")]


@pytest.mark.parametrize("text,message", TYPOS)
def test_show_config_checks_the_override(inputs, capsys, text, message):
    cfg = _override(inputs, text)
    assert_fails(capsys, ["show-config", "--params", str(PARAMS), "--config", str(cfg), "--suite", "ci", "--run", "simcse",
                          "--seed", "1"], f"{cfg}: {message}")


@pytest.mark.parametrize("text,message", TYPOS)
def test_eval_sts_checks_the_override_before_encoding(inputs, capsys, monkeypatch, tiny_encoder, text, message):
    import csebench.evaluation.cli as evaluation_cli

    tiny_encoder().save(inputs / "model")
    monkeypatch.setattr(evaluation_cli, "_eval_encode_fn", lambda args: pytest.fail("encoding started"))
    cfg = _override(inputs, text)
    out = inputs / "sts.json"
    assert_fails(capsys, ["eval-sts", "--params", str(PARAMS), "--config", str(cfg), "--model", str(inputs / "model"),
                          "--senteval", str(SHARED / "senteval"), "--suite", "ci", "--run", "simcse", "--seed", "1",
                          "--out", str(out)], f"{cfg}: {message}", outputs=[out])


# ----------------------------------------------------------------------------- JSON Schema


@pytest.mark.parametrize("text,message", [
    ("suites:\n  ci:\n    training: [1, 2]\n", "suites.ci.training: expected a mapping, got [1, 2]"),
    ("suites:\n  ci:\n    runs: simcse\n", "suites.ci.runs: expected a list or a mapping, got 'simcse'"),
    ("suites:\n  ci:\n    seeds: abc\n", "suites.ci.seeds: expected a list of seeds or a range first-last (e.g. 1-16), got 'abc'"),
    ("suites:\n  ci:\n    seeds: 5-3\n", "suites.ci.seeds: expected a list of seeds or a range first-last (e.g. 1-16), got '5-3'"),
    ("suites:\n  ci:\n    runs: {x: {backbone: tiny, method: distillcse, objectives: {distillation: {teachers: "
     "{run: simcse, seeds: 1..2}}}}}\n", "suites.ci.runs.x.objectives.distillation.teachers.seeds: expected a list of "
     "seeds or a range first-last (e.g. 1-16), got '1..2'"),
    ("suites:\n  ci:\n    runs: {x: {backbone: tiny}}\n", "suites.ci.runs.x: missing 'method'"),
    ("suites:\n  ci:\n    runs: {x: {name: y, backbone: tiny, method: simcse}}\n",
     "suites.ci.runs.x: the key names the run; drop 'name'"),
    ("suites:\n  ci:\n    seeds: [1, abc]\n", "suites.ci.seeds[1]: expected a whole number, got 'abc'"),
    ("suites:\n  ci:\n    runs: [{name: x, backbone: tiny}]\n", "suites.ci.runs[0]: missing 'method'"),
    ("suites:\n  ci:\n    evaluation: {precision: fp64}\n",
     "suites.ci.evaluation.precision: 'fp64' is not one of auto, fp32, bf16, fast"),
    ("backbones:\n  tiny: {poolr: cls}\n", "backbones.tiny: unknown key 'poolr' (did you mean 'pooler'?)"),
    ("data:\n  ci:\n    corpus: {sample: 0}\n", "data.ci.corpus.sample: must be at least 1, got 0"),
])
def test_malformed_sections_are_one_line_naming_the_key(inputs, text, message):
    cfg = _override(inputs, text)
    with pytest.raises(ConfigError) as exc:
        load_params(PARAMS, [cfg])
    assert str(exc.value) == f"{cfg}: {message}"


def test_runs_keyed_by_name_and_seed_ranges_are_the_lists_they_stand_for(inputs):
    """params.yaml's short forms (so `dvc exp run -S` rewrites one line, docs/dvc.md) read as the
    long ones: same runs, same keys; an override's runs still replace the suite's whole list."""
    from csebench.study.resolve import resolve_run

    long = _override(inputs, "suites:\n  ci:\n    seeds: [1, 2, 3]\n    runs:\n"
                             "    - {name: s, backbone: tiny, method: simcse, seeds: [4, 5]}\n"
                             "    - {name: d, backbone: tiny, method: distillcse,\n"
                             "       objectives: {distillation: {teachers: {run: s, seeds: [4, 5]}}}}\n", "long.yaml")
    short = _override(inputs, "suites:\n  ci:\n    seeds: 1-3\n    runs:\n"
                              "      s: {backbone: tiny, method: simcse, seeds: 4-5}\n"
                              "      d:\n        backbone: tiny\n        method: distillcse\n"
                              "        objectives: {distillation: {teachers: {run: s, seeds: 4-5}}}\n", "short.yaml")
    a, b = load_params(PARAMS, [long]), load_params(PARAMS, [short])
    assert b["suites"]["ci"] == a["suites"]["ci"]
    assert b["suites"]["ci"]["seeds"] == [1, 2, 3] and [r["name"] for r in b["suites"]["ci"]["runs"]] == ["s", "d"]
    assert resolve_run(b, "ci", "d", 1).key() == resolve_run(a, "ci", "d", 1).key()
    assert [r["name"] for r in load_params(PARAMS)["suites"]["ci"]["runs"]] == ["simcse", "distillcse", "backbone"]
    one = _override(inputs, "suites:\n  ci:\n    runs:\n      s: {backbone: tiny, method: simcse}\n", "one.yaml")
    assert [r["name"] for r in load_params(PARAMS, [one])["suites"]["ci"]["runs"]] == ["s"]  # not merged by name


@pytest.mark.parametrize("config,message", [
    ({"suites": 5}, "suites: expected text or a list, got 5"),
    ({"suites": ["ci"], "analyses": ["align_uniform", "nope"]}, "analyses[1]: 'nope' is not one of align_uniform"),
    ({"suites": ["ci"], "threads": 0}, "threads: must be at least 1, got 0"),
    ({"suites": ["ci"], "analysis": {"topk_negative": {}}}, "analysis: unknown key 'topk_negative' (did you mean 'topk_negatives'?)"),
    ({"suites": ["ci"], "analysis": {"topk_negatives": {"repeat": 3}}},
     "analysis.topk_negatives: unknown key 'repeat' (did you mean 'repeats'?)"),
    ({"suites": ["ci"], "analysis": {"topk_negatives": {"repeats": 0}}}, "analysis.topk_negatives.repeats: must be at least 1, got 0"),
    ({"suites": ["ci"], "analysis": {"layers": {"split": "train"}}}, "analysis.layers.split: 'train' is not one of dev, test"),
    ({"suites": ["ci"], "analyses": ["token_matrix"]}, "analyses[0]: 'token_matrix' is not one of align_uniform, "),
    ({"suites": ["ci"], "sutes": ["ci"]}, "unknown key 'sutes' (did you mean 'suites'?)"),
])
def test_snakemake_config_schema(config, message):
    from csebench.workflow.steps import check_snakemake_config

    with pytest.raises(ConfigError, match="^Snakemake config .*: " + message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        check_snakemake_config(config, [])


def test_snakemake_config_text_booleans_and_files_given_twice(tmp_path):
    from csebench.workflow.steps import check_snakemake_config

    config = {"suites": ["ci"], "plan": "false", "progress": "True", "warm_start": "false"}  # as `--config plan=false` gives it
    check_snakemake_config(config, [])
    assert config["plan"] is False and config["progress"] is True and config["warm_start"] is False
    (tmp_path / "c.yaml").write_text("suites: [ci]\nreproduce: none\nsuites: [demo]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{tmp_path / 'c.yaml'}:3: duplicate key 'suites'"):
        check_snakemake_config({"suites": ["demo"]}, [tmp_path / "c.yaml"])


def test_every_yaml_read_goes_through_the_duplicate_key_loader(project_root):
    import ast

    reads = []
    for path in (project_root / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "yaml" and "load" in node.func.attr:
                reads.append(f"{path.relative_to(project_root)}:{node.lineno}")
    assert reads == ["src/csebench/core/schema.py:" + str(_line_of(project_root, "return yaml.load(text, Loader=UniqueKeyLoader)"))]


def _line_of(root: Path, text: str) -> int:
    lines = (root / "src/csebench/core/schema.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_every_shipped_config_passes_the_schemas(project_root):
    from csebench.core.schema import read_yaml
    from csebench.workflow.steps import check_snakemake_config

    load_params(project_root / "params.yaml")
    paper = read_yaml(project_root / "config" / "paper.yaml")
    for name in ("paper", "demo", "ci"):
        check_snakemake_config({**paper, **read_yaml(project_root / "config" / f"{name}.yaml")}, [])


@pytest.mark.slow(seconds=1)
@needs_pipeline
def test_snakemake_dry_run_names_the_key_in_one_line(tmp_path, project_root):
    from runhelpers import run_snakemake, tool_env

    cfg = _override(tmp_path, "suites:\n  ci:\n    training: [1, 2]\n")
    proc = run_snakemake(["-n", "--quiet", "rules", "--configfile", "config/ci.yaml", "--config", f"params_overrides=[{cfg}]",
                          "plan=false"], cwd=project_root, env=tool_env(), timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{cfg}: suites.ci.training: expected a mapping, got [1, 2]" in text
    assert "AttributeError" not in text and "object has no attribute" not in text
    proc = run_snakemake(["-n", "--quiet", "rules", "--configfile", "config/ci.yaml", "--config", "analyses=[align_uniform,nope]",
                          "plan=false"], cwd=project_root, env=tool_env(), timeout=300)
    assert proc.returncode != 0 and "analyses[1]: 'nope' is not one of" in proc.stdout + proc.stderr


# ------------------------------------------------------------- the Snakemake config's mistakes, a default no suite uses


@needs_pipeline
def test_snakemake_settings_mistake_is_one_line(tmp_path):
    """`snakemake -n` with a malformed section printed the right line under Snakemake's header, then 4 stack lines;
    an unknown suite in --config gave a KeyError with its stack."""
    from runhelpers import ROOT, run_snakemake, tool_env

    over = tmp_path / "over.yaml"
    over.write_text("suites:\n  ci:\n    training: [1, 2]\n")
    named = tmp_path / "named.yaml"  # was a MissingInputException
    named.write_text(f"suites:\n  ../../../../SOMEWHERE: {{data: ci, runs: {{simcse: {RUN}}}}}\n")
    for config, message in ((f"params_overrides=[{over}]", f"{over}: suites.ci.training: expected a mapping, got [1, 2]"),
                            ("suites=[cii]", "suites: unknown suite 'cii' (did you mean 'ci'?)"),
                            (f"params_overrides=[{named}] suites=[../../../../SOMEWHERE]",
                             f"{named}: suite '../../../../SOMEWHERE': {NAME_RULE}")):
        proc = run_snakemake(["-n", "--configfile", "config/ci.yaml", "--config", *config.split(), "plan=false"], cwd=ROOT,
                             env=tool_env(), timeout=120)
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if not l.startswith("Config file config/paper.yaml")]
        assert proc.returncode == 1 and lines == [f"csebench: error: {lines[0].partition('error: ')[2]}"], lines
        assert message in lines[0]


# ------------------------------------------------------------- names that become folders

NAME_RULE = "use letters, digits, . _ + - only, starting with a letter or digit (it names a folder)"
RUN = "{backbone: tiny, method: simcse}"


@pytest.mark.parametrize("text,where,name", [
    (f"suites:\n  ../../../../SOMEWHERE: {{data: ci, runs: {{simcse: {RUN}}}}}\n", "suite", "../../../../SOMEWHERE"),
    (f"suites:\n  ..: {{data: ci, runs: {{simcse: {RUN}}}}}\n", "suite", ".."),
    ("data:\n  ../x: {corpus: {path: c.txt}}\n", "data source", "../x"),
    ("backbones:\n  /etc: {model: x}\n", "backbone", "/etc"),
    ("methods:\n  a/b: {}\n", "method", "a/b"),
    ("methods:\n  .hidden: {}\n", "method", ".hidden"),
    (f"suites:\n  ci:\n    runs: {{../../x: {RUN}}}\n", "suites.ci.runs[0].name", "../../x"),
    ("suites:\n  ci:\n    runs: [{name: '-rf', backbone: tiny, method: simcse}]\n", "suites.ci.runs[0].name", "-rf"),
])
def test_a_name_that_would_leave_its_folder_is_refused_where_params_are_read(inputs, text, where, name):
    """`csebench rehearse --config over.yaml --suites ../../../../SOMEWHERE` wrote sts.json, train.json,
    transfer.json and links into that folder, outside --out; under Snakemake the same name gave a
    MissingInputException. Every name that becomes a path component is checked when its file is read."""
    cfg = _override(inputs, text)
    with pytest.raises(ConfigError) as exc:
        load_params(PARAMS, [cfg])
    assert str(exc.value) == f"{cfg}: {where} '{name}': {NAME_RULE}"


def test_rehearse_with_a_suite_named_out_of_its_folder_writes_nothing(tmp_path, capsys, monkeypatch):
    """The reported case, in process: one line, exit 2, and the folder the name points at is untouched."""
    from runhelpers import run_cli

    work = tmp_path / "a" / "b" / "c" / "d"
    work.mkdir(parents=True)
    decoy = tmp_path / "SOMEWHERE"
    decoy.mkdir()
    (decoy / "keep.txt").write_text("mine\n")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in decoy.iterdir())
    over = _override(tmp_path, f"suites:\n  ../../../../SOMEWHERE: {{data: ci, runs: {{simcse: {RUN}}}}}\n")
    monkeypatch.chdir(work)
    rc, err = run_cli(capsys, ["rehearse", "--params", str(PARAMS), "--config", str(over), "--suites",
                               "../../../../SOMEWHERE", "--out", str(tmp_path / "rehearsal")])
    assert rc == 2 and err.strip() == (f"csebench rehearse: error: {over}: suite '../../../../SOMEWHERE': {NAME_RULE}")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in decoy.iterdir()) == before
    assert not (tmp_path / "rehearsal").exists()


def test_a_nan_default_that_every_suite_overrides_is_refused(tmp_path, capsys):
    """`training.learning_rate: .nan` in params.yaml was accepted when every suite set its own."""
    from runhelpers import PARAMS

    text = PARAMS.read_text(encoding="utf-8")
    params = tmp_path / "params.yaml"
    at = text.index("\ntraining:")  # the defaults' learning rate: every suite sets its own
    params.write_text(text[:at] + text[at:].replace("  learning_rate: 3.0e-5\n", "  learning_rate: .nan\n", 1), encoding="utf-8")
    assert "\n  learning_rate: .nan\n" in params.read_text()
    assert_fails(capsys, ["show-config", "--params", str(params), "--suite", "ci", "--run", "simcse", "--seed", "1"],
                 f"{params}: training.learning_rate: expected a finite number, got nan")
    over = tmp_path / "over.yaml"
    over.write_text("suites:\n  nobody:\n    training: {temperature: .inf}\n")
    assert_fails(capsys, ["show-config", "--params", str(PARAMS), "--config", str(over), "--suite", "ci", "--run", "simcse",
                          "--seed", "1"], f"{over}: suites.nobody.training.temperature: expected a finite number, got inf")


# ----------------------------------------------------------------------------- a suite's evaluation settings


@pytest.mark.parametrize("cap,ok", [(500, True), (1, False), ("500", False), (True, False)])
def test_sts_pair_cap_setting(cap, ok):
    from csebench.study.jobs import suite_evaluation

    params = copy.deepcopy(P)
    params["suites"]["demo"]["evaluation"] = {"max_sts_pairs": cap}
    if ok:
        assert suite_evaluation(params, "demo")["max_sts_pairs"] == cap
    else:
        with pytest.raises(ConfigError, match="max_sts_pairs: give a whole number"):
            suite_evaluation(params, "demo")
    assert suite_evaluation(P, "paper")["max_sts_pairs"] is None  # paper scale: every pair


# ------------------------------------------------------------- YAML that does not parse: one line, with its position


@pytest.mark.slow(seconds=2)
def test_invalid_yaml_in_set_and_in_a_config_file_is_one_line_with_its_position(tmp_path):
    """PyYAML's message spans 2-4 lines ("in <unicode string>, line 1, column 1" under each mark); as a user runs
    `csebench train`, each is one line: a --set value's column (or "the end"), a file's line and column."""
    from runhelpers import PARAMS, run_csebench, write_corpus

    write_corpus(tmp_path / "corpus.txt", n=16)
    bad = _override(tmp_path, "suites:\n  ci:\n    training: {max_steps: 3\n", "bad.yaml")
    own = ["train", "--params", str(PARAMS), "--backbone", "tiny", "--method", "simcse", "--corpus", str(tmp_path / "corpus.txt"),
           "--out", str(tmp_path / "run"), "--no-progress"]
    for argv, line in (
            ([*own, "--set", "training.max_steps=[1, 2"],
             "--set training.max_steps=[1, 2: not valid YAML at the end: did not find expected ',' or ']' (while parsing a "
             "flow sequence that starts at column 1)"),
            ([*own, "--set", "objectives.prompt.template=a: b: c"],
             "--set objectives.prompt.template=a: b: c: not valid YAML at column 5: mapping values are not allowed in this context"),
            (["train", "--params", str(PARAMS), "--config", str(bad), "--suite", "ci", "--run", "simcse", "--seed", "1",
              "--corpus", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "run"), "--no-progress"],
             f"{bad}: not valid YAML at line 4, column 1: did not find expected ',' or '}}' (while parsing a flow mapping "
             "that starts at line 3, column 15)")):
        proc = run_csebench(argv, cwd=tmp_path, timeout=120)  # the program (forked: no second import of torch)
        assert proc.returncode == 2 and proc.stderr.splitlines() == [f"csebench train: error: {line}"], proc.stderr
        assert not (tmp_path / "run").exists()


def test_yaml_errors_keep_the_parser_s_words_in_one_line():
    from csebench.core.schema import load_yaml_text

    for text, said in (("a:\n\tb: 1\n", "T: not valid YAML at line 2, column 1: found character that cannot start any token"),
                       ("a: 1\n- b\n", "T: not valid YAML at line 2, column 1: did not find expected key (while parsing a "
                                       "block mapping that starts at line 1, column 1)"),
                       ("a: 'open", "T: not valid YAML at the end: found unexpected end of stream (while scanning a quoted "
                                    "scalar that starts at column 4)"),
                       ("a: *nope", "T: not valid YAML at column 4: found undefined alias"),
                       ("a: \x00", "T: not valid YAML: unacceptable character #x0000")):
        with pytest.raises(ConfigError) as err:
            load_yaml_text(text, "T")
        assert str(err.value).startswith(said) and "\n" not in str(err.value), str(err.value)


def test_deep_merge_merges_nested_keys_and_shares_nothing_with_its_inputs():
    from csebench.study.params import deep_merge

    base = {"training": {"lr": 1, "sched": {"warmup": 0, "kind": "linear"}}, "tags": ["a"]}
    over = {"training": {"sched": {"warmup": 5}, "extra": {"x": [1]}}, "tags": ["b"]}
    out = deep_merge(base, over)
    assert out == {"training": {"lr": 1, "sched": {"warmup": 5, "kind": "linear"}, "extra": {"x": [1]}}, "tags": ["b"]}
    assert base == {"training": {"lr": 1, "sched": {"warmup": 0, "kind": "linear"}}, "tags": ["a"]}
    assert over == {"training": {"sched": {"warmup": 5}, "extra": {"x": [1]}}, "tags": ["b"]}
    out["training"]["sched"]["kind"] = "cosine"
    out["training"]["extra"]["x"].append(2)
    out["tags"].append("c")
    assert base["training"]["sched"]["kind"] == "linear" and over["training"]["extra"]["x"] == [1] and over["tags"] == ["b"]
    assert deep_merge(base, None) == base and deep_merge(base, None) is not base

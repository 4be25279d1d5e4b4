"""Issue 19, part 5: settings that cannot be right are refused before anything runs, one line naming
the key (and the file), exit 2, at every entry point: NaN/inf/booleans in numbers, a max_seq_length
past the backbone's positions, keys given twice, typos in overrides, malformed sections, --batch-size 0,
and corpus lines of control characters."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from csebench.config import load_params
from csebench.errors import ConfigError
from runhelpers import PARAMS, SHARED, train_argv, write_corpus, write_mini_senteval
from runhelpers import assert_fails, data_override


@pytest.fixture()
def inputs(tmp_path):
    write_corpus(tmp_path / "corpus.txt", n=64)
    write_mini_senteval(tmp_path / "se", pairs=16)
    return tmp_path


def _override(tmp: Path, text: str, name: str = "over.yaml") -> Path:
    (tmp / name).write_text(text, encoding="utf-8")
    return tmp / name


# ----------------------------------------------------------------------------- NaN, inf, booleans


@pytest.mark.parametrize("setting,value,message", [
    ("learning_rate", ".nan", "learning_rate: expected a finite number, got nan"),
    ("temperature", ".inf", "temperature: expected a finite number, got inf"),
    ("max_grad_norm", ".nan", "max_grad_norm: expected a finite number, got nan"),
    ("temperature", "-.inf", "temperature: expected a finite number, got -inf"),
    ("epochs", "true", "epochs: expected a whole number, got True"),
    ("learning_rate", "false", "learning_rate: expected a finite number, got False"),
])
def test_non_finite_and_boolean_numbers_are_refused(inputs, capsys, setting, value, message):
    cfg = _override(inputs, f"suites:\n  ci:\n    training: {{{setting}: {value}}}\n")
    out = inputs / "run"
    # a NaN or inf is refused where it is written, with the file (issue 31: used or not); a boolean as the run resolves
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


def test_teacher_cache_max_seq_length_past_the_positions_is_refused(inputs, capsys, tiny_encoder):
    tiny_encoder().save(inputs / "teacher")
    out = inputs / "emb.npy"
    assert_fails(capsys, ["teacher-cache", "--model", str(inputs / "teacher"), "--corpus", str(inputs / "corpus.txt"),
                          "--out", str(out), "--max-seq-length", "500"],
                 "--max-seq-length is 500, longer than the backbone takes (128 positions", outputs=[out])


def test_position_limit_of_roberta_like_models():
    from types import SimpleNamespace

    from csebench.encoder import max_positions

    assert max_positions(SimpleNamespace(max_position_embeddings=514, model_type="roberta")) == 512
    assert max_positions(SimpleNamespace(max_position_embeddings=512, model_type="bert")) == 512
    assert max_positions(SimpleNamespace(model_type="t5")) is None


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
    from csebench.config import read_yaml

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
    import csebench.cli as cli_mod

    tiny_encoder().save(inputs / "model")
    monkeypatch.setattr(cli_mod, "_eval_encode_fn", lambda args: pytest.fail("encoding started"))
    cfg = _override(inputs, text)
    out = inputs / "sts.json"
    assert_fails(capsys, ["eval-sts", "--params", str(PARAMS), "--config", str(cfg), "--model", str(inputs / "model"),
                          "--senteval", str(SHARED / "senteval"), "--suite", "ci", "--run", "simcse", "--seed", "1",
                          "--out", str(out)], f"{cfg}: {message}", outputs=[out])


@pytest.mark.parametrize("command", ["eval-sts", "embed", "eval-transfer"])
def test_batch_size_zero_is_refused(inputs, capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        cli_main([command, "--model", str(inputs / "model"), "--senteval", str(SHARED / "senteval"),
                  "--out", str(inputs / "x.json"), "--batch-size", "0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"csebench {command}: error: argument --batch-size: give a whole number of at least 1, got '0'" in err


def cli_main(argv):
    from csebench import cli

    return cli.main(argv)


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
    from csebench.config import resolve_run

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
    from csebench.suites import check_snakemake_config

    with pytest.raises(ConfigError, match="^Snakemake config .*: " + message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        check_snakemake_config(config, [])


def test_snakemake_config_text_booleans_and_files_given_twice(tmp_path):
    from csebench.suites import check_snakemake_config

    config = {"suites": ["ci"], "plan": "false", "progress": "True"}  # as `--config plan=false` gives it
    check_snakemake_config(config, [])
    assert config["plan"] is False and config["progress"] is True
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
    assert reads == ["src/csebench/schema.py:" + str(_line_of(project_root, "return yaml.load(text, Loader=UniqueKeyLoader)"))]


def _line_of(root: Path, text: str) -> int:
    lines = (root / "src/csebench/schema.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_every_shipped_config_passes_the_schemas(project_root):
    from csebench.config import read_yaml
    from csebench.suites import check_snakemake_config

    load_params(project_root / "params.yaml")
    paper = read_yaml(project_root / "config" / "paper.yaml")
    for name in ("paper", "demo", "ci"):
        check_snakemake_config({**paper, **read_yaml(project_root / "config" / f"{name}.yaml")}, [])


@pytest.mark.slow
def test_snakemake_dry_run_names_the_key_in_one_line(tmp_path, project_root):
    from runhelpers import BIN, tool_env

    cfg = _override(tmp_path, "suites:\n  ci:\n    training: [1, 2]\n")
    proc = subprocess.run([str(BIN / "snakemake"), "-n", "--quiet", "rules", "--configfile", "config/ci.yaml",
                           "--config", f"params_overrides=[{cfg}]", "plan=false"],
                          cwd=project_root, env=tool_env(), capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{cfg}: suites.ci.training: expected a mapping, got [1, 2]" in text
    assert "AttributeError" not in text and "object has no attribute" not in text
    proc = subprocess.run([str(BIN / "snakemake"), "-n", "--quiet", "rules", "--configfile", "config/ci.yaml",
                           "--config", "analyses=[align_uniform,nope]", "plan=false"],
                          cwd=project_root, env=tool_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "analyses[1]: 'nope' is not one of" in proc.stdout + proc.stderr


# ----------------------------------------------------------------------------- corpus text


def test_corpus_is_split_at_newlines_only(tmp_path):
    from csebench.data import read_corpus

    corpus = tmp_path / "c.txt"
    corpus.write_bytes("one\u2028still one\r\ntwo\x85 too\x0cand this\r\n\r\nthree\n".encode("utf-8"))
    assert read_corpus(corpus) == ["one\u2028still one", "two\x85 too\x0cand this", "three"]


@pytest.mark.parametrize("content,line,chars", [(b"\x00" * 64, 1, "U+0000"),
                                                (b"fine .\n\x01\x02 \x7f\nmore .\n", 2, "U+0001, U+0002, U+007F")])
def test_control_character_lines_are_refused(inputs, capsys, content, line, chars):
    bad = inputs / "bad-corpus.txt"
    bad.write_bytes(content)
    out = inputs / "prepared.txt"
    assert_fails(capsys, ["prepare-corpus", "--params", str(PARAMS), "--config", str(data_override(inputs, bad)),
                          "--data", "bad", "--out", str(out)],
                 f"corpus {bad} line {line} holds only control characters ({chars})", outputs=[out])
    assert_fails(capsys, train_argv(inputs, inputs / "run", None, corpus=bad), f"corpus {bad} line {line}")

"""Settings and files as a hostile or careless user gives them (issue 63): no value of params.yaml reaches a shell
command unquoted, a path setting is checked as a path where it is read, a YAML alias bomb or a special file is one
line, a link out of data/ is refused as one out of results/ is, and a full disk leaves no empty folder behind."""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from runhelpers import BIN, PARAMS, ROOT, copy_project, needs_pipeline, run_cli, write_config

RULE_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
# params whose value is already shell text, each word quoted where it is built (csebench.workflow.steps.shell_words,
# params_args, the analyses' shlex.join): the only fields a rule's command may hold without Snakemake's `:q`
PRE_QUOTED = {"params.cfg", "params.cap", "params.progress", "params.args", "params.links", "params.corpus",
              "params.teacher_args", "threads"}


# ----------------------------------------------------------------------------- every rule's command is quoted


def _shell_commands(path: Path) -> dict[str, str]:
    """Every rule's shell command in a rule file, as written (`shell:` followed by strings, or by a name assigned
    strings in the same file), keyed by its line."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
              if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT)]

    def strings_from(i: int) -> str:
        out = []
        while i < len(tokens) and tokens[i].type == tokenize.STRING:
            out.append(ast.literal_eval(tokens[i].string))
            i += 1
        return "".join(out)

    named = {}
    for i, t in enumerate(tokens[:-3]):
        if t.type == tokenize.NAME and tokens[i + 1].string == "=" and tokens[i + 2].string == "(" \
                and tokens[i + 3].type == tokenize.STRING:
            named[t.string] = strings_from(i + 3)
    found = {}
    for i, t in enumerate(tokens[:-2]):
        if t.string == "shell" and tokens[i + 1].string == ":":
            nxt = tokens[i + 2]
            found[f"{path.name}:{t.start[0]}"] = strings_from(i + 2) if nxt.type == tokenize.STRING else named[nxt.string]
    return found


def test_every_value_in_a_rules_shell_command_is_quoted():
    """A settings file ran shell commands: the rules put {DATA}, {RESULTS}, {output} and the STS-pairs arguments into
    their commands unquoted. Every field of every rule's command is quoted by Snakemake (`:q`) or is shell text whose
    words were quoted where it was built; a command substitution is inside double quotes."""
    commands = {k: v for f in RULE_FILES for k, v in _shell_commands(f).items()}
    assert len(commands) >= 20  # every rule of the DAG has one
    for where, cmd in commands.items():
        fields = re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", cmd)
        unquoted = [f for f in fields if not f.endswith(":q") and f not in PRE_QUOTED]
        assert not unquoted, f"{where}: {cmd}"
        assert all(cmd[i - 1] == '"' for i in (m.start() for m in re.finditer(r"\$\(", cmd))), f"{where}: {cmd}"


def test_the_pre_quoted_shell_text_quotes_each_word():
    from csebench.workflow.steps import option_words, params_args, shell_words, sts_pairs_words

    hostile = "pairs $(touch X) 'q'.tsv"
    assert shell_words("--max-sts-pairs", 20) == "--max-sts-pairs 20"
    assert sts_pairs_words({"own": hostile}) == "--sts-pairs 'own=pairs $(touch X) '\"'\"'q'\"'\"'.tsv'"
    assert option_words("--teacher-cache", ["a b", "c"]) == "--teacher-cache 'a b' --teacher-cache c"
    assert option_words("--corpus", []) == "" and sts_pairs_words({}) == ""
    assert params_args({"params_overrides": ["my $(x).yaml"]}) == "--config 'my $(x).yaml'"
    # what a shell makes of it: the same words back, nothing run
    out = subprocess.run(["bash", "-c", f"printf '%s\\n' {sts_pairs_words({'own': hostile})}"], capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines() == ["--sts-pairs", f"own={hostile}"]


# ----------------------------------------------------------------------------- path settings checked as paths


@pytest.mark.parametrize("key, value, needle", [
    ("results", "res\nults", r"holds a control character ('\n' at position 4): a path is printable text"),
    ("data", "data\x1b[31m", r"holds a control character ('\x1b' at position 5)"),
    ("results", "-rf", "starts with '-', which a command reads as an option: write ./-rf"),
    ("data", "data_{x}", "holds '{' or '}', which Snakemake reads as a wildcard in the rules' file patterns"),
    ("shared", "", "expected a path, got ''"),
])
def test_a_path_setting_that_no_command_can_take_is_one_line_where_it_is_read(tmp_path, capsys, key, value, needle):
    from csebench.core.errors import ConfigError
    from csebench.study.params import load_params

    over = write_config(tmp_path / "o.yaml", {"paths": {key: value}})
    with pytest.raises(ConfigError) as err:
        load_params(PARAMS, [over])
    assert str(err.value).startswith(f"{over}: paths.{key}: ") and needle in str(err.value)
    assert "\n" not in str(err.value)
    rc, line = run_cli(capsys, ["plan", "--config", str(over), "--suites", "ci"])
    assert rc == 2 and line.count("\n") == 1 and needle in line


def test_a_data_source_path_with_a_control_character_is_refused_and_one_with_a_space_is_taken(tmp_path):
    from csebench.core.errors import ConfigError
    from csebench.study.params import load_params

    bad = write_config(tmp_path / "o.yaml", {"data": {"ci": {"sts_pairs": {"own": {"path": "own\n.tsv"}}}}})
    with pytest.raises(ConfigError, match=r"data\.ci\.sts_pairs\.own\.path: 'own\\n\.tsv' holds a control character"):
        load_params(PARAMS, [bad])
    good = write_config(tmp_path / "p.yaml", {"paths": {"results": "my results $(touch X)", "data": "d `x` 'y'"},
                                              "data": {"ci": {"sts_pairs": {"own": {"path": "my pairs $(touch X).tsv"}}}}})
    params = load_params(PARAMS, [good])
    assert params["paths"] == {"shared": "../shared", "data": "d `x` 'y'", "results": "my results $(touch X)"}


@pytest.mark.slow(seconds=40)
@needs_pipeline
def test_no_path_setting_runs_a_command_under_a_real_snakemake_build(tmp_path):
    """`$(touch X)` and a space in paths.data, paths.results, paths.shared and a data source's STS-pairs file: a build
    of the corpus and of a run's STS evaluation with its own STS set (the prepare, train, embed and eval-sts jobs,
    each command holding those paths) creates no file through them and succeeds, the space included."""
    from csebench.study.typed import Params
    from runhelpers import write_small_shared

    proj = copy_project(tmp_path / "proj")
    write_small_shared(proj / "shared $(touch INJ_SHARED)")
    pairs = proj / "pairs $(touch INJ_PAIRS).tsv"
    pairs.write_text("sentence1\tsentence2\tscore\n" + "".join(f"a cat number {i}\ta dog number {i % 7}\t{i % 5}\n"
                                                             for i in range(30)), encoding="utf-8")
    write_config(proj / "inj.yaml", {
        "paths": {"data": "data $(touch INJ_DATA)", "results": "res $(touch INJ_RESULTS)",
                  "shared": "shared $(touch INJ_SHARED)"},
        "data": {"inj": {"corpus": {"path": "{shared}/corpus/demo-sentences.txt", "sample": 64},
                         "senteval": {"path": "{shared}/senteval"}, "sts_pairs": {"own": {"path": pairs.name}}}},
        "suites": {"inj": {"data": "inj", "seeds": [1], "transfer": False,
                           "evaluation": {"max_sts_pairs": 20, "sts_pairs": ["own"]},
                           "runs": {"backbone": {"backbone": "tiny", "method": "backbone", "train": False}}}}})
    params = Params.load(proj / "params.yaml", [proj / "inj.yaml"])
    sts = f"{params.runs.eval_folder('inj', 'backbone', 1)}/sts.json"
    corpus = "data $(touch INJ_DATA)/inj/corpus.txt"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{BIN}:{os.environ['PATH']}",
               CSEBENCH_DATA_CHECK="0")  # the small shared folder is not SentEval's published data
    env.pop("CSEBENCH_SHARED", None)  # paths.shared itself is read
    proc = subprocess.run([str(BIN / "snakemake"), "--cores", "1", "--configfile", "config/ci.yaml", "--config",
                           "plan=false", "params_overrides=[inj.yaml]", "suites=[inj]", "--", corpus, sts],
                          cwd=proj, env=env, capture_output=True, text=True, timeout=600)
    made = sorted(str(p.relative_to(proj)) for p in proj.rglob("INJ_*"))
    assert made == [], made
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proj / corpus).is_file()
    result = json.loads((proj / sts).read_text())
    assert result["extra_sets"]["own"]["n_pairs"] == 20 and len(result["tasks"]) == 7

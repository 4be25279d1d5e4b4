"""Settings and files as a hostile or careless user gives them: no value of params.yaml reaches a shell
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

from runhelpers import BIN, PARAMS, ROOT, copy_project, needs_pipeline, run_cli, run_snakemake, write_config

RULE_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
# the only field a rule's command may hold without Snakemake's `:q`: the job's thread count, a number Snakemake sets
# (what a rule passes as several words is an argument list, quoted word by word by `:q`)
PRE_QUOTED = {"threads"}


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
    their commands unquoted. Every field of every rule's command is quoted by Snakemake (`:q`; an argument list word by
    word), the job's thread count aside; a command substitution is inside double quotes."""
    commands = {k: v for f in RULE_FILES for k, v in _shell_commands(f).items()}
    assert len(commands) >= 20  # every rule of the DAG has one
    for where, cmd in commands.items():
        fields = re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", cmd)
        unquoted = [f for f in fields if not f.endswith(":q") and f not in PRE_QUOTED]
        assert not unquoted, f"{where}: {cmd}"
        assert all(cmd[i - 1] == '"' for i in (m.start() for m in re.finditer(r"\$\(", cmd))), f"{where}: {cmd}"


def test_the_argument_lists_of_the_rules_params_are_quoted_word_by_word():
    """What a rule passes as several words is an argument list; Snakemake's `:q` (its own formatter, as a rule's
    command is rendered) quotes each word."""
    from snakemake.utils import format as rule_format

    from csebench.workflow.steps import option_args, params_args, sts_pairs_argv

    def q(args) -> str:
        return rule_format("{args:q}", args=args)

    hostile = "pairs $(touch X) 'q'.tsv"
    assert q(["--max-sts-pairs", "20"]) == "--max-sts-pairs 20"
    assert q(sts_pairs_argv({"own": hostile})) == "--sts-pairs 'own=pairs $(touch X) '\"'\"'q'\"'\"'.tsv'"
    assert q(option_args("--teacher-cache", ["a b", "c"])) == "--teacher-cache 'a b' --teacher-cache c"
    assert q(option_args("--corpus", [])) == "" and q(sts_pairs_argv({})) == ""
    assert q(params_args({"params_overrides": ["my $(x).yaml"]})) == "--config 'my $(x).yaml'"
    # what a shell makes of it: the same words back, nothing run
    out = subprocess.run(["bash", "-c", f"printf '%s\\n' {q(sts_pairs_argv({'own': hostile}))}"], capture_output=True,
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
def test_no_path_setting_runs_a_command_under_a_real_snakemake_build(tmp_path, warm_jobs):
    """`$(touch X)` and a space in paths.data, paths.results, paths.shared and a data source's STS-pairs file: a build
    of the corpus and of a run's STS evaluation with its own STS set (the prepare, train, embed and eval-sts jobs,
    each command holding those paths) creates no file through them and succeeds, the space included. The jobs' shell
    commands are Snakemake's, as in any build; the `csebench` each runs hands its arguments, folder and environment
    to the session's warm server (conftest warm_jobs, --config warm_start=false) rather than to one this build would
    start (its 6-7 CPU-s of imports)."""
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
    env.update(warm_jobs)
    # forked from this process (runhelpers.run_snakemake: Snakemake imported once), its own folder and environment
    proc = run_snakemake(["--cores", "1", "--configfile", "config/ci.yaml", "--config", "plan=false", "warm_start=false",
                          "params_overrides=[inj.yaml]", "suites=[inj]", "--", corpus, sts], cwd=proj, env=env, timeout=600)
    made = sorted(str(p.relative_to(proj)) for p in proj.rglob("INJ_*"))
    assert made == [], made
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (proj / corpus).is_file()
    result = json.loads((proj / sts).read_text())
    assert result["extra_sets"]["own"]["n_pairs"] == 20 and len(result["tasks"]) == 7


# ----------------------------------------------------------------------------- result files checked where read


def _suite_with_results(root: Path) -> tuple[list[str], Path]:
    """Suite s of two runs whose sts.json are written as eval-sts writes them (write_result: the scores' digest in
    their provenance); the argv of `results render --item suite/s` and one run's sts.json."""
    from csebench.evaluation.envelope import write_result
    from test_report import TRANSFER, sts_scores, suite_config, write_run

    for name, base in (("simcse", 70.0), ("iscse", 71.0)):
        run = write_run(root / "results", "s", name, 1, name, "bert-base", transfer={t: 80.0 for t in TRANSFER})
        info = json.loads((run / "transfer.json").read_text())["run_info"]
        tasks = sts_scores(base)
        write_result(run / "sts.json", {"tasks": tasks, "avg": sum(tasks.values()) / len(tasks), "protocol": "full"},
                     {"run_info": info}, "fp32")
    cfg = suite_config(root / "suite.yaml", "s", {"simcse": ("simcse", "bert-base"), "iscse": ("iscse", "bert-base")})
    argv = ["results", "render", "--params", str(PARAMS), "--config", str(cfg), "--item", "suite/s",
            "--results", str(root / "results"), "--n-boot", "20"]
    return argv, root / "results" / "s" / "runs" / "iscse" / "seed1" / "sts.json"


def _edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data["tasks"].update(changes.pop("tasks", {}))
    data.update(changes)
    path.write_text(json.dumps(data))


def test_a_hand_edited_sts_json_is_refused_by_the_table_build_in_one_line_and_the_old_table_stays(tmp_path, capsys):
    """A hand-edited sts.json (STS12 = 99, avg = 88.8) went into the table as 99.00 and 88.80 under a footer saying
    "SentEval data sha256-checked". The average is checked against its tasks where the table reads it: one line
    naming the file, exit 2, and the table built before stays as it was."""
    argv, sts = _suite_with_results(tmp_path)
    assert run_cli(capsys, argv)[0] == 0
    table = tmp_path / "results" / "s" / "tables" / "sts.md"
    before = table.read_bytes()
    assert b"CHANGED" not in before and b"SentEval" not in before  # (these fake results read no SentEval file)
    _edit(sts, tasks={"STS12": 99.0}, avg=88.8)
    rc, err = run_cli(capsys, argv)
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"csebench results: error: {sts}: avg is 88.8, but the mean of its 7 tasks is 78.000000: ")
    assert table.read_bytes() == before


@pytest.mark.parametrize("text, needle", [
    ('"STS12": NaN', "tasks.STS12 is nan, which csebench never writes (an undefined number is written as null): "
                     "the file was changed after it was written"),
    ('"STS12": -Infinity', "tasks.STS12 is -inf, which csebench never writes"),
    (None, "is not valid JSON (Unterminated string starting at: line 25, column 17): truncated or damaged"),
    ('"STS12": 140.0', "STS12 is 140.0, outside [-100, 100]: not a sts result as `csebench eval-sts` writes it"),
    ('"STS12": "71"', "STS12 is '71', not a number"),
])
def test_a_bad_number_or_a_truncated_result_is_one_line_and_deletes_no_earlier_table(tmp_path, capsys, text, needle):
    """NaN or Infinity written into sts.json gave the report a traceback, and the previous sts.md was deleted; a
    truncated one gave the view job a traceback. One line naming the file for the table build and for view-run;
    every table built before stays."""
    argv, sts = _suite_with_results(tmp_path)
    assert run_cli(capsys, argv)[0] == 0
    tables = {p: p.read_bytes() for p in (tmp_path / "results" / "s").rglob("*") if p.is_file() and "runs" not in p.parts}
    good = sts.read_text()
    if text is None:
        sts.write_text(good[: len(good) // 2])
    else:
        sts.write_text(re.sub(r'"STS12": [-0-9.e]+', lambda m: text, good, count=1))
    rc, err = run_cli(capsys, argv)
    assert rc == 2 and err.count("\n") == 1 and str(sts) in err and needle in err, err
    assert {p: p.read_bytes() for p in tables} == tables
    # the view job reads the run's file the same way (here the file is a suite's: its own view of itself)
    rc, err = run_cli(capsys, ["view-run", "--params", str(PARAMS), "--config", str(tmp_path / "suite.yaml"), "--suite", "s",
                               "--run", "iscse", "--seed", "1", "--first", "s/iscse", "--from", str(sts.parent),
                               "--out", str(tmp_path / "view"), "sts.json"])
    assert rc == 2 and err.count("\n") == 1 and str(sts) in err, err
    assert not (tmp_path / "view" / "sts.json").exists()


def test_a_number_changed_after_the_file_was_written_is_named_in_the_tables_footer(tmp_path, capsys, caplog):
    """An edit that keeps the average consistent (STS12 and avg changed together) passes the checks of the numbers,
    but not the digest of the scores recorded in the file's provenance when eval-sts wrote it: the table is built,
    and its footer (Markdown, CSV, LaTeX caption) says which file changed after it was written."""
    from csebench.core.provenance import written_as_recorded

    argv, sts = _suite_with_results(tmp_path)
    assert written_as_recorded(json.loads(sts.read_text())) is True
    data = json.loads(sts.read_text())
    data["tasks"]["STS12"] = 99.0
    data["avg"] = sum(data["tasks"].values()) / 7
    sts.write_text(json.dumps(data))
    assert written_as_recorded(data) is False
    rc, err = run_cli(capsys, argv)
    assert rc == 0, err
    assert f"{sts}: its scores differ from those its provenance recorded" in caplog.text
    out = tmp_path / "results" / "s" / "tables"
    note = f"CHANGED after it was written: {sts} (its scores differ from those its provenance recorded"
    assert note in (out / "sts.md").read_text() and note in (out / "sts.csv").read_text()
    assert "CHANGED after it was written" in (out / "sts.tex").read_text().split(r"\caption{")[1]
    assert "99.00" in (out / "sts.md").read_text()


def test_transfer_json_is_checked_the_same_way(tmp_path, capsys):
    argv, sts = _suite_with_results(tmp_path)
    transfer = sts.with_name("transfer.json")
    _edit(transfer, tasks={"MR": 95.0})  # avg stays 80.0
    rc, err = run_cli(capsys, argv)
    assert rc == 2 and err == (f"csebench results: error: {transfer}: avg is 80.0, but the mean of its 7 tasks is "
                               "82.142857: not a transfer result as `csebench eval-transfer` writes it (changed after it "
                               "was written?); make it again (delete it and rerun the job that writes it; Snakemake "
                               "rebuilds a missing file)\n")
    _edit(transfer, tasks={"MR": -3.0}, avg=None)
    rc, err = run_cli(capsys, argv)
    assert rc == 2 and "MR is -3.0, outside [0, 100]" in err


@pytest.mark.slow(seconds=25)
@needs_pipeline
def test_under_snakemake_a_refused_table_build_leaves_the_tables_built_before(tmp_path):
    """Snakemake removes a job's outputs before it runs it: a report job refused for a hand-edited sts.json lost the
    suite's tables. The rules flag the tables, figures and pages `update` (workflow/rules/inputs.smk): the job's
    refusal (its one line in the job's log) leaves every one of them as it was. (Before it, the build's first step
    refuses a link out of the repository in data/, as it does in results/.)"""
    import csv

    import numpy as np

    from csebench import cli
    from csebench.evaluation.sts import TEST_TASKS, save_pairs

    proj = copy_project(tmp_path / "proj")
    argv, sts = _suite_with_results(proj)
    rng = np.random.default_rng(0)
    for run in sts.parent.parent.parent.glob("*/seed1"):  # what the report rule reads besides the JSON results
        save_pairs(run / "sts_pairs.npz", {t: (rng.normal(size=30), rng.normal(size=30)) for t in TEST_TASKS})
        for name, rows in (("train_curve.csv", [["step", "loss"], [1, 3.0], [2, 2.0]]), ("dev_curve.csv", [["step", "stsb_dev"], [2, 50.0]])):
            with open(run / name, "w", newline="") as fh:
                csv.writer(fh).writerows(rows)
    assert cli.main(argv) == 0
    suite = proj / "results" / "s"
    built = {p: p.read_bytes() for p in suite.rglob("*") if p.is_file() and "runs" not in p.parts}
    _edit(sts, tasks={"STS12": 99.0}, avg=88.8)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{BIN}:{os.environ['PATH']}")
    cmd = ["--cores", "1", "--configfile", "config/ci.yaml", "--config", "plan=false",
           "warm_start=false", "params_overrides=[suite.yaml]", "suites=[s]", "analyses=[]", "--allowed-rules", "report",
           "--", "results/s/tables/sts.md"]
    # first a link data/ci to a folder outside: the build stops before anything runs (its first step), in one line
    outside = tmp_path / "outside"
    outside.mkdir()
    (proj / "data").mkdir(exist_ok=True)
    (proj / "data" / "ci").symlink_to(outside)
    proc = run_snakemake(cmd, cwd=proj, env=env, timeout=300)  # forked: Snakemake imported once
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1] == (
        f"csebench: error: data/ci is a symbolic link to {outside}, outside the repository {proj} and outside data "
        f"(paths.data): the build would write its prepared data through it (corpus.txt would land in {outside}); "
        "csebench makes no such link: remove it, or set paths.data to the folder you want the data in"), proc.stderr[-2000:]
    (proj / "data" / "ci").unlink()
    proc = run_snakemake(cmd, cwd=proj, env=env, timeout=300)  # forked: Snakemake imported once
    assert proc.returncode == 1 and "Error in rule report" in proc.stderr, proc.stderr[-3000:]
    assert (suite / "logs" / "report.log").read_text().splitlines()[-1] == (
        "csebench results: error: results/s/runs/iscse/seed1/sts.json: avg is 88.8, but the mean of its 7 tasks is "
        "78.000000: not a sts result as `csebench eval-sts` writes it (changed after it was written?); make it again "
        "(delete it and rerun the job that writes it; Snakemake rebuilds a missing file)")
    assert {p: p.read_bytes() for p in built} == built


# ----------------------------------------------------------------------------- YAML alias bombs, special files


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A YAML "billion laughs": each level an anchored list of ``width`` aliases of the one before (382 bytes at 9 x 9:
    9**9 = 387 million values once expanded)."""
    lines = ["a: &a [" + ",".join(['"lol"'] * width) + "]"]
    for prev, name in zip("abcdefghijklmnop", "bcdefghijklmnop"[: levels - 1]):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_one_line_at_once(tmp_path, capsys):
    """A 382-byte alias bomb given as --config hung over 40 s (the finiteness check walked every alias): the aliases
    are counted on the parsed document, each value once, before anything is built from it."""
    import time

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    assert len(bomb.read_bytes()) < 400
    t0 = time.perf_counter()
    rc, err = run_cli(capsys, ["plan", "--config", str(bomb), "--suites", "ci"])
    assert time.perf_counter() - t0 < 30  # was a hang (the check itself takes milliseconds)
    assert rc == 2 and err == (f"csebench plan: error: {bomb}: its aliases (*name) repeat 490,329,036 values, more than "
                               "the 100,000 a settings file may (a YAML alias bomb?): write the values out, or use fewer "
                               "aliases\n")
    loop = tmp_path / "loop.yaml"
    loop.write_text("paths:\n  data: &p [1, *p]\n")
    rc, err = run_cli(capsys, ["plan", "--config", str(loop), "--suites", "ci"])
    assert rc == 2 and err == (f"csebench plan: error: {loop}:2: an alias refers to a value that holds it (a value inside "
                               "itself): write the values out\n")


def test_aliases_within_bounds_are_read_and_a_huge_value_in_an_error_line_is_cut(tmp_path):
    """A few aliases are YAML as usual; a value that they make large (4,096 numbers from a 170-byte file) is quoted in
    its error line cut to a readable length (a 292-byte file printed a 5.8 MB line); any error line is bounded."""
    from csebench.core.errors import MAX_LINE, ConfigError
    from csebench.study.params import load_params

    fine = write_config(tmp_path / "fine.yaml", {})
    fine.write_text("training: &t {learning_rate: 5.0e-5}\nbackbones:\n  tiny: {model: random, training: *t}\n")
    assert load_params(PARAMS, [fine])["backbones"]["tiny"]["training"] == {"learning_rate": 5e-5}
    big = tmp_path / "big.yaml"
    big.write_text("paths: {data: [&a [1,2,3,4,5,6,7,8], &b [*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b], "
                   "&d [*c,*c,*c,*c,*c,*c,*c,*c]]}\n")
    with pytest.raises(ConfigError) as err:
        load_params(PARAMS, [big])
    line = str(err.value)
    assert line.startswith(f"{big}: paths.data: expected text, got [[1, 2, 3") and line.endswith(" characters)")
    assert len(line) < 250 + len(str(big))
    long = str(ConfigError("suites.x: unknown method '" + "m" * 10**6 + "'; did you mean 'simcse'?"))
    assert len(long) < MAX_LINE + 100 and "characters cut) …" in long and long.endswith("did you mean 'simcse'?")


def test_a_settings_file_that_is_no_regular_file_or_too_large_says_so(tmp_path, capsys):
    """`--config /dev/zero` and `--params /dev/stdin` said "not found"."""
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    large = tmp_path / "large.yaml"
    with open(large, "wb") as fh:
        fh.truncate(17 << 20)
    for argv, line in (
            (["--config", "/dev/zero"], "config override /dev/zero is a character device, not a regular file: give a YAML "
                                        "file of the settings it changes"),
            (["--params", str(fifo)], f"params file {fifo} is a named pipe (FIFO), not a regular file: give params.yaml or "
                                      "another YAML file"),
            (["--config", str(tmp_path)], f"config override {tmp_path} is a folder, not a regular file"),
            (["--config", str(large)], f"{large}: 17,825,792 bytes, larger than a settings file may be (16 MiB): is it "
                                       "the file you meant?"),
            (["--config", str(tmp_path / "nope.yaml")], f"config override not found: {tmp_path / 'nope.yaml'}")):
        rc, err = run_cli(capsys, ["plan", *argv, "--suites", "ci"])
        assert rc == 2 and err.startswith(f"csebench plan: error: {line}") and err.count("\n") == 1, err


# ----------------------------------------------------------------------------- data/ links, a full disk


def test_a_link_in_data_out_of_the_repository_is_refused_as_one_in_results_is(tmp_path):
    """A link data/ci to an outside folder was written through (corpus.txt landed outside); links out of results/
    were refused, data/ was not checked. A link out of the repository and out of paths.data is refused; paths.data
    itself a link to a bigger disk, and a link inside the repository, are fine."""
    from csebench.core.errors import DataError
    from csebench.workflow.steps import refuse_outside_links

    proj, outside = tmp_path / "proj", tmp_path / "outside"
    (proj / "data").mkdir(parents=True)
    outside.mkdir()
    refuse_outside_links(str(proj / "results"), ["ci"], workdir=str(proj), data=str(proj / "data"))
    (proj / "data" / "ci").symlink_to(outside)
    with pytest.raises(DataError, match=f"^{proj}/data/ci is a symbolic link to {outside}, outside the repository {proj} "
                                        f"and outside {proj}/data \\(paths.data\\): the build would write"):
        refuse_outside_links(str(proj / "results"), ["ci"], workdir=str(proj), data=str(proj / "data"))
    (proj / "data" / "ci").unlink()
    (proj / "data" / "ci").symlink_to(proj / "elsewhere-inside")
    refuse_outside_links(str(proj / "results"), ["ci"], workdir=str(proj), data=str(proj / "data"))
    scratch = tmp_path / "scratch-data"
    scratch.mkdir()
    (proj / "big").symlink_to(scratch)  # paths.data: big, a link to a folder on another disk, and links inside it
    (scratch / "ci").symlink_to(scratch / "other")
    refuse_outside_links(str(proj / "results"), ["ci"], workdir=str(proj), data=str(proj / "big"))


def test_a_full_disk_while_writing_a_checkpoint_leaves_no_run_folder(inputs, capsys, monkeypatch):
    """An ENOSPC in a checkpoint write left the run folder it had made behind (its unfinished best model, no
    checkpoint to resume from): one line, exit 2, and the folder and the parents the command made are gone."""
    import errno

    import csebench.training.checkpoint as checkpoint
    from runhelpers import ci_training, train_argv

    def full(folder, state):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint, "save", full)
    cfg = write_config(inputs / "a.yaml", ci_training(max_steps=4, eval_steps=2, checkpoint_steps=2, batch_size=8,
                                                      log_steps=1, eval_batch_size=64))
    out = inputs / "runs" / "new" / "run"
    rc, err = run_cli(capsys, train_argv(inputs, out, cfg, cache=inputs / "new-cache"))
    assert (rc, err) == (2, "csebench train: error: a write failed: No space left on device (errno ENOSPC); nothing "
                            "finished was replaced, the temporaries are removed\n")
    assert not (inputs / "runs").exists() and not (inputs / "new-cache").exists()


def test_a_full_disk_in_eval_sts_leaves_no_output_folder(trained, small, tmp_path, capsys, monkeypatch):
    """eval-sts --out res/sts.json on a full disk (a fake fsync raising ENOSPC) left an empty res/: the folders the
    command would have made are removed again when it fails and leaves them empty; a folder that was there stays."""
    import errno

    from runhelpers import STS_FAST

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    argv = ["eval-sts", "--model", str(trained / "model"), "--senteval", str(small), *STS_FAST]
    monkeypatch.setattr(os, "fsync", full)
    rc, err = run_cli(capsys, [*argv, "--out", str(tmp_path / "res" / "deeper" / "sts.json")])
    assert (rc, err) == (2, "csebench eval-sts: error: a write failed: No space left on device (errno ENOSPC); nothing "
                            "finished was replaced, the temporaries are removed\n")
    assert not (tmp_path / "res").exists()
    (tmp_path / "kept").mkdir()
    rc, err = run_cli(capsys, [*argv, "--out", str(tmp_path / "kept" / "sts.json")])
    assert rc == 2 and (tmp_path / "kept").is_dir() and not any((tmp_path / "kept").iterdir())

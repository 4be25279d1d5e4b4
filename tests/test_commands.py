"""The command line: each command declared beside its handler, in its package's cli module, options declared
once; `csebench --help` lists every command with its one-line summary; csebench.cli only builds the parser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from csebench.cli import build_parser, declared_commands
from runhelpers import SHARED

SRC = Path(__file__).resolve().parents[1] / "src" / "csebench"


def test_help_lists_every_command_with_its_summary(capsys):
    COMMANDS = declared_commands()
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names)) >= 21
    text = "".join(build_parser().format_help().split())  # argparse wraps lines (and at hyphens)
    for c in COMMANDS:
        assert c.summary and "\n" not in c.summary, c.name
        assert c.name + "".join(c.summary.split()) in text, c.name
    for c in COMMANDS:  # every command answers --help (its options build)
        sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices[c.name]
        assert sub.format_help()


def test_help_names_every_method_of_the_readme_and_where_the_list_is():
    """The top-level --help names the methods the README's terms table names (it named 5 of 12) and says where every
    method of params.yaml is."""
    readme = (SRC.parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| term key | method |"):].split("\n\n")[0]
    methods = [row.split("|")[2].strip().removeprefix("unsup-") for row in table.splitlines()[2:]]
    text = " ".join(build_parser().format_help().split())
    assert len(methods) == 12 and all(m in text for m in methods), [m for m in methods if m not in text]
    assert "`methods:` of params.yaml" in text


def handlers(parser) -> set[tuple[str, str]]:
    """(module, function) of every handler the parser reaches, subcommands (`results render`) included."""
    out = set()
    for action in parser._actions:
        if not isinstance(getattr(action, "choices", None), dict):
            continue
        for sub in action.choices:
            sp = action.choices[sub]
            func = sp._defaults.get("func")
            if func is not None:
                out.add((func.__module__, func.__name__))
            out |= handlers(sp)
    return out


def test_help_lists_the_commands_in_the_pipelines_order():
    """Fetching and the study's views first, then training, evaluation, analysis, results, sharing, the workflow."""
    names = [c.name for c in declared_commands()]
    order = ["fetch-backbone", "prepare-corpus", "train", "embed", "eval-sts", "analyze", "results", "model-card", "push",
             "rehearse"]
    assert [n for n in names if n in order] == order
    help_text = build_parser().format_help()
    assert help_text.index(" fetch-backbone ") < help_text.index(" train ") < help_text.index(" eval-sts ") < \
        help_text.index(" analyze ") < help_text.index(" rehearse ")


def test_every_handler_is_a_declared_command():
    """Each cmd_* function of a package's cli module is the handler of a command of the parser."""
    modules = sorted(SRC.glob("*/cli.py"))
    assert {m.parent.name for m in modules} >= {"study", "training", "evaluation", "analysis", "results", "sharing", "workflow"}
    reached = handlers(build_parser())
    for path in modules:
        module = f"csebench.{path.parent.name}.cli"
        defined = {(module, f) for f in re.findall(r"^def (cmd_\w+)\(", path.read_text(), re.M)}
        assert defined and defined <= reached, defined - reached


def test_the_cli_module_only_builds_the_parser_and_runs_a_command():
    """No handler, no list of commands or of their outputs in csebench/cli.py: each command declares what it
    writes (Command.out_folder, writes, also_writes) beside its handler."""
    text = (SRC / "cli.py").read_text()
    assert not re.findall(r"^def cmd_|^@\w*command|COMMANDS\s*=|FOLDER_OUT|args\.command in|args\.command ==", text, re.M)
    names = [c.name for c in declared_commands()]
    for name in names:
        assert f'"{name}"' not in text, f"csebench/cli.py names the command {name}"


def test_a_package_that_declares_a_command_is_found_without_a_list(tmp_path, monkeypatch):
    """A new package with a cli module holding COMMANDS: its command is in the parser, nothing else edited."""
    import csebench
    from csebench import cli

    pkg = tmp_path / "csebench" / "extra"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("from csebench.core.commands import Commands\nCOMMANDS = Commands()\n\n\n"
                                "@COMMANDS.command('say-hello', 'print hello')\ndef cmd_say_hello(args):\n    print('hello')\n")
    monkeypatch.setattr(csebench, "__path__", [*csebench.__path__, str(tmp_path / "csebench")])
    assert "say-hello" in [c.name for c in cli.declared_commands()]
    assert cli.main(["say-hello"]) == 0


def test_shared_options_are_declared_once():
    texts = "".join(p.read_text() for p in SRC.rglob("*.py"))
    for needle in ("encoding batch size (default: 128 on a GPU", "hyperparameter file (default: params.yaml here",
                   "override the saved evaluation pooler", "load a run's model even if its weight files differ"):
        assert texts.count(needle) == 1, needle


# ----------------------------------------------------------------------------- options checked by the parser


@pytest.mark.parametrize("command", ["eval-sts", "embed", "eval-transfer"])
def test_batch_size_zero_is_refused(inputs, capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        cli_main([command, "--model", str(inputs / "model"), "--senteval", str(SHARED / "senteval"),
                  "--out", str(inputs / "x.json"), "--batch-size", "0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"csebench {command}: error: argument --batch-size: give a whole number of at least 1, got '0'" in err


@pytest.mark.parametrize("command,seed", [("eval-sts", "-1"), ("eval-transfer", str(2**33)), ("embed", "x")])
def test_a_senteval_seed_numpy_cannot_take_is_refused_at_the_argument(inputs, capsys, command, seed):
    """--senteval-seed -1 or 2**33 reached numpy's and scikit-learn's generators: a ValueError traceback."""
    with pytest.raises(SystemExit) as exit_info:
        cli_main([command, "--model", str(inputs / "model"), "--senteval", str(SHARED / "senteval"),
                  "--out", str(inputs / "x.json"), f"--senteval-seed={seed}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (f"csebench {command}: error: argument --senteval-seed: give a whole number from 0 "
                                    f"to 4294967295 (2**32 - 1), got '{seed}'")


def cli_main(argv):
    from csebench import cli

    return cli.main(argv)

"""The command line: each command declared beside its handler, options declared once,
`csebench --help` lists every command with its one-line summary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from csebench.cli import build_parser
from csebench.core.commands import COMMANDS
from runhelpers import SHARED

SRC = Path(__file__).resolve().parents[1] / "src" / "csebench"


def test_help_lists_every_command_with_its_summary(capsys):
    build_parser()
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names)) >= 21
    text = "".join(build_parser().format_help().split())  # argparse wraps lines (and at hyphens)
    for c in COMMANDS:
        assert c.summary and "\n" not in c.summary, c.name
        assert c.name + "".join(c.summary.split()) in text, c.name
    for c in COMMANDS:  # every command answers --help (its options build)
        sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices[c.name]
        assert sub.format_help()


def test_every_handler_is_a_declared_command():
    """Each cmd_* function of csebench.cli and csebench.analysis.cli is the handler of a declared command."""
    build_parser()
    handlers = {c.func.__name__ for c in COMMANDS if c.func}
    for module in ("cli.py", "analysis/cli.py"):
        defined = set(re.findall(r"^def (cmd_\w+)\(", (SRC / module).read_text(), re.M))
        assert defined and defined <= handlers, defined - handlers


def test_shared_options_are_declared_once():
    texts = "".join(p.read_text() for p in SRC.rglob("*.py"))
    for needle in ("encoding batch size (default: 128 on a GPU", "hyperparameter file (default: params.yaml)",
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


def cli_main(argv):
    from csebench import cli

    return cli.main(argv)

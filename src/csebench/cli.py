"""csebench's command line: the thin layer the Snakemake rules (and users) call. It builds the parser from the
commands each package declares in its ``cli`` module (csebench.core.commands: a handler beside its package, with
the shared option groups), then runs one: logging, the outputs checked writable before any work, one line for an
error or a Ctrl-C. `csebench --help` lists every command, `csebench COMMAND --help` one command's options.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import errno
import gc
import logging
import os
import pkgutil
import signal
import sys
import threading

import csebench
from csebench.core.commands import Command, add_commands, positive_int
from csebench.core.errors import CsebenchError
from csebench.core.startup import CommandClock


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # transformers prints load reports (e.g. the unused BERT pooler) and shard-writing bars. Said through
    # its environment, read when it is first imported: importing it here to say so cost every command,
    # most of which never load a model, 2-3 s of start-up
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:  # an in-process caller imported it already
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def declared_commands() -> list[Command]:
    """Every package's commands: the ``COMMANDS`` of each ``csebench.<package>.cli`` (csebench.core.commands), the
    packages in the pipeline's order their ``COMMANDS.stage`` gives. A new command is a handler in its package's
    cli module; a package that starts declaring commands is found by its cli module, without a list here."""
    found = [importlib.import_module(f"csebench.{info.name}.cli").COMMANDS for info in pkgutil.iter_modules(csebench.__path__)
             if info.ispkg and importlib.util.find_spec(f"csebench.{info.name}.cli") is not None]
    out: list[Command] = [c for commands in sorted(found, key=lambda cs: cs.stage) for c in commands]
    names = [c.name for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"commands declared more than once: {twice}")
    return out


# the papers' methods the top-level --help names (README.md, "Methods are objective terms"; tests/test_commands.py)
METHODS = ("GS-InfoNCE", "IS-CSE", "SSCL", "DistillCSE", "ESimCSE", "MixCSE", "DCLR", "PromptBERT", "SNCSE", "RankCSE",
           "DiffCSE")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every declared command; each handler gets ``args.spec`` (its Command) and ``args.run_command``
    (this module's main, for a handler that runs other commands in process: rehearse)."""
    p = argparse.ArgumentParser(prog="csebench", description="Unsupervised contrastive sentence embeddings: SimCSE and "
                                f"the methods built on it ({', '.join(METHODS)}), trained, evaluated and analysed as the "
                                "papers do.",
                                epilog="`csebench COMMAND --help`: one command's options. Every method and its settings: the "
                                "`methods:` of params.yaml (`csebench train --method NAME`; docs/methods.md). README.md and "
                                "docs/: the whole story.")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch (default: torch's choice)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    commands = declared_commands()
    add_commands(sub, commands)
    for c in commands:
        sub.choices[c.name].set_defaults(spec=c, run_command=main)
    return p


_COMMAND = ["csebench"]  # the command named on the command line, for the interrupt line
_NESTED: list[bool] = []  # one entry per main() running: more than one while rehearse runs the commands in process


def _command_of(argv: list[str]) -> str:
    """``csebench <subcommand>`` as named on the command line, before argparse has read it."""
    i = 0
    while i < len(argv):
        if argv[i] == "--threads":
            i += 2
        elif argv[i].startswith("-"):
            i += 1
        else:
            return f"csebench {argv[i]}"
    return "csebench"


def _in_import(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_interrupt(signum, frame) -> None:
    # the first Ctrl-C unwinds (temporaries removed, the run lock released, one line printed);
    # a second one while that runs ends the process at once
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    if _in_import(frame):
        # raised inside an import, KeyboardInterrupt can land in C++ code that cannot pass it on (torch's
        # pybind11 bindings: `terminate called ...`, exit 134 and an 85-line dump): end here instead, the
        # temporaries of unfinished outputs removed (the run lock's file stays: the next train takes it over)
        from csebench.core.io import open_temporaries, remove_path

        for tmp in open_temporaries():
            remove_path(tmp)
        # the terminal's stderr: a command run inside another (csebench rehearse) has its stderr captured
        print(f"{_COMMAND[0]}: interrupted", file=sys.__stderr__ or sys.stderr, flush=True)
        os._exit(130)
    raise KeyboardInterrupt


OUTPUT_OPTIONS = ("out", "pairs_out", "figure", "markdown", "latex", "csv", "out_dir")  # checked writable before any work


def _check_outputs(args) -> None:
    """Every output folder takes a file, before any work (a read-only results folder was found only after
    eval-sts had computed everything). Commands that only check (--check) or only print write nothing."""
    from csebench.core.io import check_writable

    spec = args.spec
    if getattr(args, "check", False) or not spec.writes:
        return
    for name in OUTPUT_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value not in ("", "-"):
            check_writable(value, is_dir=name == "out_dir" or spec.out_folder)
    for path, is_dir in spec.also_writes(args) if spec.also_writes else ():
        check_writable(path, is_dir=is_dir)


def _output_folders(args) -> list:
    """The folders the command's outputs go into (as _check_outputs finds them) that do not exist yet, each with
    those of its parents that do not either, deepest first: what a failed command removes again where it left them
    empty (a full disk in eval-sts left its empty --out folder behind)."""
    from pathlib import Path

    spec = args.spec
    if getattr(args, "check", False) or not spec.writes:
        return []
    outputs = [(v, name == "out_dir" or spec.out_folder) for name in OUTPUT_OPTIONS
               if isinstance(v := getattr(args, name, None), str) and v not in ("", "-")]
    outputs += list(spec.also_writes(args) if spec.also_writes else ())
    made: list = []
    for path, is_dir in outputs:
        folder = Path(path).absolute() if is_dir else Path(path).absolute().parent
        while not os.path.lexists(folder) and folder != folder.parent:
            made.append(folder)
            folder = folder.parent
    return sorted(set(made), key=lambda f: len(f.parts), reverse=True)


def _remove_empty(folders: list) -> None:
    for folder in folders:  # deepest first; one that is not empty (what another process wrote there) stays
        try:
            folder.rmdir()
        except OSError:
            pass


def collect_less() -> None:
    """The program's cyclic garbage collector, run less often. With Python's default thresholds (700, 10, 10) a
    command that imports torch and transformers keeps rescanning their objects: 1,100 collections, 0.85 s of a
    15 s `csebench eval-sts --model minilm --max-sts-pairs 200`; at (50000, 20, 20), 14 and 0.36 s, the same
    peak memory. A program that set its own thresholds keeps them."""
    if gc.get_threshold() == (700, 10, 10):
        gc.set_threshold(50_000, 20, 20)


def main(argv: list[str] | None = None) -> int:
    """The program (argv None) or an in-process call. Ctrl-C prints one line and gives 130 while the
    command is unfinished, imports and argument parsing included; once it has finished, a Ctrl-C
    interrupts nothing: the program ignores it until it exits, an in-process caller gets its handler back."""
    if argv is None:  # a job of a local build: run in its warm server where there is one (csebench.workflow.warm)
        from csebench.workflow.warm import forward

        rc = forward(sys.argv[1:])
        if rc is not None:
            return rc
        collect_less()
    main_thread = threading.current_thread() is threading.main_thread()
    clock = CommandClock() if argv is None else None  # the program: its log ends with its time and start-up
    previous = signal.signal(signal.SIGINT, _on_interrupt) if main_thread else None
    outer = _COMMAND[0] if _NESTED else None  # a command run by another (rehearse): the interrupt line names the outer
    _NESTED.append(True)
    command = _command_of(sys.argv[1:] if argv is None else list(argv))
    _COMMAND[0] = outer or command
    made: list = []  # the output folders the command would create: removed again if it fails and leaves them empty
    try:
        args = build_parser().parse_args(argv)
        command = f"csebench {args.command}"
        _COMMAND[0] = outer or command
        _setup_logging(args.verbose)
        _check_outputs(args)
        made = _output_folders(args)
        from csebench.core.provenance import reset

        reset()  # a result's provenance names the data files read by its own command
        if hasattr(args, "no_verify"):  # the commands that load a model
            from csebench.model.encoder import VERIFY_WEIGHTS

            VERIFY_WEIGHTS[0] = not args.no_verify
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        from csebench.study.cli import resolve_inputs  # here: a job forwarded to its warm server never parses params

        resolve_inputs(args)
        args.func(args)
    except CsebenchError as exc:
        _remove_empty(made)
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `csebench plan | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error as Python flushes stdout at exit
        return 0
    except Exception as exc:  # a full disk, a read-only or forbidden folder found while writing: one line
        from csebench.core.io import os_error_of

        failed = os_error_of(exc)  # an OSError, or safetensors' error that carries one
        if failed is None or failed.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        _remove_empty(made)
        what = f"cannot write {failed.filename}" if failed.filename else "a write failed"  # fsync and write name no file
        print(f"{command}: error: {what}: {failed.strerror} (errno {errno.errorcode[failed.errno]}); "
              "nothing finished was replaced, the temporaries are removed", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _remove_empty(made)
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    finally:
        _NESTED.pop()
        if main_thread:
            signal.signal(signal.SIGINT, signal.SIG_IGN if argv is None else previous)
    if clock is not None:
        logging.getLogger("csebench").info(clock.line(command))
    if argv is None:
        # the program ends here: the collector's last passes over every object torch and transformers made at import
        # cost a job 0.5-1 CPU-s of its exit; frozen, they are left to the process's end (atexit still runs, files
        # still flush and close as their references go)
        gc.freeze()
    return 0


if __name__ == "__main__":
    sys.exit(main())
